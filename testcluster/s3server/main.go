// Command s3server runs an S3-compatible server (versitygw's gateway on its
// posix backend, Apache-2.0) on loopback for the Studio's tests of its S3
// backup target: it checks every request's SigV4 signature against one
// known key pair, stores objects as files under --dir and supports
// multipart uploads. It is a module of its own so that the gateway's
// dependencies stay out of the Studio's go.mod (and testcluster's).
//
//	s3server --addr 127.0.0.1:PORT --dir DIR --access AK --secret SK [--region R] [--bucket NAME]... [--readonly] [--virtual-domain D]
//
// It prints "ready" once the address answers and each --bucket exists
// (created empty, owned by the key pair), and runs until SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:7070", "listen address (loopback)")
	dir := flag.String("dir", "", "data directory (buckets are its folders)")
	access := flag.String("access", "", "the root access key")
	secret := flag.String("secret", "", "the root secret key")
	region := flag.String("region", "us-east-1", "region")
	virtual := flag.String("virtual-domain", "", "serve virtual-hosted requests: Host BUCKET.DOMAIN[:port]")
	readonly := flag.Bool("readonly", false, "refuse every write (AccessDenied), as storage whose policy allows reads only")
	var buckets list
	flag.Var(&buckets, "bucket", "a bucket to create empty (repeatable)")
	flag.Parse()
	if *dir == "" || *access == "" || *secret == "" {
		log.Fatal("s3server: --dir, --access and --secret are required")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || (host != "127.0.0.1" && host != "::1" && host != "localhost" && !ownPrivate(host)) {
		log.Fatal("s3server: --addr must be a loopback host:port, or a private address of this machine's own (the test cluster's bridge)")
	}
	root := filepath.Join(*dir, "data")
	side := filepath.Join(*dir, "meta")
	for _, d := range []string{root, side} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			log.Fatal(err)
		}
	}
	for _, b := range buckets {
		if err := os.MkdirAll(filepath.Join(root, b), 0o755); err != nil {
			log.Fatal(err)
		}
	}
	sc, err := meta.NewSideCar(side)
	if err != nil {
		log.Fatal(err)
	}
	opts := posix.PosixOpts{SideCarDir: side, Concurrency: 64}
	opts.SetNewDirPerm(0o755)
	opts.SetNewFilePerm(0o644)
	be, err := posix.New(root, sc, opts)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if c, err := net.DialTimeout("tcp", *addr, time.Second); err == nil {
				c.Close()
				fmt.Println("ready")
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		log.Print("s3server: not listening after 30s")
		stop()
	}()
	err = embedgw.RunVersityGW(ctx, be, &embedgw.Config{
		RootUserAccess:    *access,
		RootUserSecret:    *secret,
		Region:            *region,
		Ports:             []string{*addr},
		MaxConnections:    256,
		MaxRequests:       256,
		MultipartMaxParts: 10000,
		Quiet:             true,
		Readonly:          *readonly,
		VirtualDomain:     *virtual,
	})
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// ownPrivate says whether host is a private address (such as the test
// cluster's bridge, 10.244.0.1) of one of this machine's interfaces:
// reachable from the machine's own pods, never from outside it.
func ownPrivate(host string) bool {
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsPrivate() {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// Package s3test starts a real S3-compatible server on loopback for tests:
// testcluster/s3server (versitygw's gateway on its posix backend, in a
// module of its own), built once per test binary into the user cache and
// started per test with a temporary data directory and a known key pair.
// It checks every request's SigV4 signature. When it cannot be built the
// test skips, or fails with CI=true.
package s3test

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/s3target"
)

// VirtualDomain is the domain the server takes virtual-hosted requests
// for (Host: BUCKET.s3.test:PORT); a client reaches it through
// Client.DialVia, never the resolver.
const VirtualDomain = "s3.test"

// Server is a running S3 test server.
type Server struct {
	Endpoint string
	// Addr is its host:port (loopback unless StartOn).
	Addr   string
	Region string
	Access string
	Secret string
	// Dir holds its data: Dir/data/BUCKET/KEY are the objects' files.
	Dir string
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Start builds (once) and starts a server with buckets created empty; it
// stops when the test ends.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	return start(t, false, buckets)
}

// StartOn is Start listening on host (an address of this machine, such as
// the test cluster's bridge, where its pods reach it) instead of loopback.
func StartOn(t testing.TB, host string, buckets ...string) *Server {
	t.Helper()
	return startOn(t, host, false, buckets)
}

// StartReadOnly starts a server that refuses every write (AccessDenied).
func StartReadOnly(t testing.TB, buckets ...string) *Server {
	t.Helper()
	return start(t, true, buckets)
}

func start(t testing.TB, readonly bool, buckets []string) *Server {
	t.Helper()
	return startOn(t, "127.0.0.1", readonly, buckets)
}

func startOn(t testing.TB, host string, readonly bool, buckets []string) *Server {
	t.Helper()
	buildOnce.Do(func() { binPath, buildErr = build() })
	if buildErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no S3 test server: %v", buildErr)
		}
		t.Skipf("no S3 test server: %v", buildErr)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{Endpoint: "http://" + addr, Addr: addr, Region: "us-east-1", Access: "SKALITEST" + strings.ToUpper(rand.Text()[:11]),
		Secret: rand.Text() + rand.Text(), Dir: t.TempDir()}
	args := []string{"--addr", addr, "--dir", s.Dir, "--access", s.Access, "--secret", s.Secret, "--region", s.Region, "--virtual-domain", VirtualDomain}
	for _, b := range buckets {
		args = append(args, "--bucket", b)
	}
	if readonly {
		args = append(args, "--readonly")
	}
	ready := make(chan error, 1)
	stopped := make(chan struct{})
	var cmd *exec.Cmd
	logPath := filepath.Join(s.Dir, "s3server.log")
	go func() {
		// The server dies with the thread that started it (Pdeathsig):
		// this goroutine keeps its thread until the server stops.
		runtime.LockOSThread()
		defer close(stopped)
		cmd = exec.Command(binPath, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		logf, err := os.Create(logPath)
		if err != nil {
			ready <- err
			return
		}
		defer logf.Close()
		cmd.Stderr = logf
		out, err := cmd.StdoutPipe()
		if err != nil {
			ready <- err
			return
		}
		if err := cmd.Start(); err != nil {
			ready <- err
			return
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				ready <- nil
				break
			}
		}
		go func() {
			for sc.Scan() {
			}
		}()
		err = cmd.Wait()
		select {
		case ready <- fmt.Errorf("s3server stopped before it was ready (%v)", err):
		default:
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("S3 test server: %v\n%s", err, log)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the S3 test server did not print ready within 60 s")
	}
	t.Cleanup(func() {
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-stopped
		}
	})
	return s
}

// Client is a client of bucket on the server (path-style).
func (s *Server) Client(t testing.TB, bucket string) *s3target.Client {
	t.Helper()
	c, err := s3target.NewClient(s.Endpoint, s.Region, bucket, true, s.Access, s.Secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Objects lists the keys and sizes under prefix in bucket.
func (s *Server) Objects(t testing.TB, bucket, prefix string) map[string]int64 {
	t.Helper()
	objs, err := s.Client(t, bucket).List(context.Background(), prefix, 0)
	if err != nil {
		t.Fatalf("list %s/%s: %v", bucket, prefix, err)
	}
	out := map[string]int64{}
	for _, o := range objs {
		out[o.Key] = o.Size
	}
	return out
}

// build compiles testcluster/s3server into the user cache.
func build() (string, error) {
	src, err := sourceDir()
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", errors.New("the go command is not on PATH")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(cache, "skali-s3server", "s3server")
	// Test binaries of several packages build at once: each into a name
	// of its own, renamed into place (a no-op relink when nothing changed).
	tmp := fmt.Sprintf("%s.%d", out, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v: %s", src, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// sourceDir finds testcluster/s3server above the current directory.
func sourceDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "testcluster", "s3server")
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the repository's testcluster/s3server directory was not found")
		}
		dir = parent
	}
}

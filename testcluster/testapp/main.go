// Command testapp is the test application of the real-node test cluster:
// one static binary whose every behaviour is chosen by its arguments or
// environment, so that real-pod tests need no other image.
//
//	testapp serve [--addr :8080] [--ready-after 2s] [--never-ready] [--say TEXT]
//	    HTTP: / answers TEXT (default "testapp") and the pod's name, /healthz
//	    is always 200, /readyz 200 once ready (after --ready-after, never with
//	    --never-ready); with DATABASE_URL, /rows lists the rows "migrate" wrote.
//	testapp exit [--code N] [--stdout TEXT] [--stderr TEXT]
//	    prints TEXT to stdout and stderr, then exits with code N.
//	testapp allocate --mib N
//	    allocates and touches N MiB, printing its progress, then waits (past
//	    a memory limit the kernel kills it: OOMKilled).
//	testapp migrate
//	    with DATABASE_URL: creates the table testapp_rows and adds a row (a
//	    release command).
//	testapp pause
//	    waits for SIGTERM, reaping children (the pods' sandbox).
//	testapp dial --to HOST:PORT,HOST:PORT
//	    opens a TCP connection to each (3 s each) and prints "HOST:PORT:
//	    connected" or the error; exits 0 (what a pod can reach).
//
// With TESTAPP_DATA (a volume's mount path), serve's /files lists and
// writes the files there (files.go).
//
// Every flag can also be set in the environment as TESTAPP_ and its name in
// capitals with _ for -, and the mode as TESTAPP_MODE: TESTAPP_READY_AFTER=3s.
// --stdout and --stderr work in every mode (printed at start).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	mode := os.Getenv("TESTAPP_MODE")
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	if mode == "" {
		mode = "serve"
	}
	fs := flag.NewFlagSet("testapp "+mode, flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "serve: listen address")
	readyAfter := fs.Duration("ready-after", 0, "serve: become ready this long after start")
	neverReady := fs.Bool("never-ready", false, "serve: never become ready")
	say := fs.String("say", "testapp", "serve: what / answers")
	code := fs.Int("code", 0, "exit: the exit code")
	stdout := fs.String("stdout", "", "print this to stdout at start")
	stderr := fs.String("stderr", "", "print this to stderr at start")
	mib := fs.Int("mib", 0, "allocate: MiB to allocate")
	to := fs.String("to", "", "dial: comma-separated HOST:PORT addresses")
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv("TESTAPP_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))); ok {
			_ = f.Value.Set(v)
		}
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *stdout != "" {
		fmt.Fprintln(os.Stdout, *stdout)
	}
	if *stderr != "" {
		fmt.Fprintln(os.Stderr, *stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch mode {
	case "serve":
		return serve(ctx, *addr, *readyAfter, *neverReady, *say)
	case "exit":
		return *code
	case "allocate":
		return allocate(ctx, *mib)
	case "migrate":
		return migrate(ctx)
	case "pause":
		return pause(ctx)
	case "dial":
		for _, a := range strings.Split(*to, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			c, err := net.DialTimeout("tcp", a, 3*time.Second)
			if err != nil {
				fmt.Printf("%s: %v\n", a, err)
				continue
			}
			c.Close()
			fmt.Printf("%s: connected\n", a)
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "testapp: unknown mode %q (serve, exit, allocate, migrate, pause, dial)\n", mode)
	return 2
}

func serve(ctx context.Context, addr string, readyAfter time.Duration, neverReady bool, say string) int {
	var ready atomic.Bool
	if !neverReady {
		time.AfterFunc(readyAfter, func() { ready.Store(true); fmt.Println("testapp: ready") })
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s from %s\n", say, host)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	// POST /exit?code=N ends the process (a container that dies): the
	// answer is sent first.
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		code, err := strconv.Atoi(r.URL.Query().Get("code"))
		if err != nil {
			code = 1
		}
		fmt.Fprintf(w, "exiting with %d\n", code)
		w.(http.Flusher).Flush()
		go func() {
			time.Sleep(20 * time.Millisecond)
			fmt.Fprintf(os.Stderr, "testapp: exiting with %d as asked\n", code)
			os.Exit(code)
		}()
	})
	mux.HandleFunc("/files", filesHandler(os.Getenv("TESTAPP_DATA")))
	mux.HandleFunc("/files/", filesHandler(os.Getenv("TESTAPP_DATA")))
	mux.HandleFunc("/rows", func(w http.ResponseWriter, r *http.Request) {
		rows, err := readRows(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, row := range rows {
			fmt.Fprintln(w, row)
		}
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("testapp: serving on %s\n", addr)
	select {
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "testapp:", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	fmt.Println("testapp: stopped")
	return 0
}

var held [][]byte

func allocate(ctx context.Context, mib int) int {
	for i := 1; i <= mib; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		held = append(held, b)
		if i%16 == 0 || i == mib {
			fmt.Printf("testapp: allocated %d MiB\n", i)
		}
	}
	<-ctx.Done()
	return 0
}

func pause(ctx context.Context) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-sig:
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || errors.Is(err, syscall.ECHILD) {
					break
				}
			}
		}
	}
}

package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
	"github.com/skali-dev/studio/web"
)

func runtimeNumCPU() int { return runtime.NumCPU() }

// runChild is the Studio the bench measures: the web application with its
// event hub and metrics, wired as `studio serve` wires them, plus a /gc
// endpoint on the metrics listener so memory is read after a collection.
func runChild(args []string) error {
	fs := flag.NewFlagSet("studio-child", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "address")
	maddr := fs.String("metrics-addr", "127.0.0.1:0", "metrics address")
	_ = fs.String("data-dir", "", "unused")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := store.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer db.Close()
	hub := events.NewHub(db, events.HubOptions{Logger: logger, LatestRuns: views.LatestRunsShown})
	defer hub.Close()
	metrics := web.NewMetrics(db)
	handler := web.New(web.Deps{
		DB: db, Logger: logger, PublicURL: "http://" + *addr, LocalLogin: true,
		Hub: hub, Metrics: metrics,
	})
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	ml, err := net.Listen("tcp", *maddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	mux.HandleFunc("POST /gc", func(w http.ResponseWriter, r *http.Request) {
		// An idle process is collected every two minutes (and its idle
		// goroutines' stacks shrink at each collection): a few collections
		// show what an idle stream keeps.
		for range 3 {
			runtime.GC()
		}
		debug.FreeOSMemory()
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /debug/heap", func(w http.ResponseWriter, r *http.Request) {
		_ = pprof.Lookup("heap").WriteTo(w, 0)
	})
	mux.HandleFunc("GET /debug/cpu", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("for"))
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		time.Sleep(min(max(d, time.Second), time.Minute))
		pprof.StopCPUProfile()
	})
	// The bench's -cpuprofile: a profile from start to stop, around one
	// scenario's events exactly.
	var cpuOut *os.File
	mux.HandleFunc("POST /debug/cpu/start", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Create(r.URL.Query().Get("to"))
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		cpuOut = f
	})
	mux.HandleFunc("POST /debug/cpu/stop", func(w http.ResponseWriter, r *http.Request) {
		pprof.StopCPUProfile()
		if cpuOut != nil {
			cpuOut.Close()
			cpuOut = nil
		}
	})
	go http.Serve(ml, mux)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(hub.Close)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

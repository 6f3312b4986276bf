package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stopWithGoRun ends ctx when the `go run` that started this process exits.
// `go run` does not pass SIGTERM on to the program it built, so without this
// a SIGTERM to `go run ./cmd/studio serve` (the README's command) would leave
// the Studio and its private PostgreSQL running. A Studio started any other
// way keeps running when its parent exits, as a server should.
func stopWithGoRun(ctx context.Context) context.Context {
	ppid := os.Getppid()
	if !isGoRun(ppid) {
		return ctx
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// Once the parent is gone the process is re-parented.
				if os.Getppid() != ppid {
					cancel()
					return
				}
			}
		}
	}()
	return ctx
}

// isGoRun reports whether process pid is `go run ...`.
func isGoRun(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(string(data), "\x00")
	return len(args) > 1 && filepath.Base(args[0]) == "go" && args[1] == "run"
}

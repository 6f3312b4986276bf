package main

// A cluster shared by several processes (--shared DIR): the test binaries
// of one `go test ./...` that need the real node use one cluster at once
// instead of queueing on the machine's lock, each starting its own. The
// protocol, in DIR:
//
//   - join.lock: held (flock, exclusive) by a process deciding whether to
//     join the running cluster or start one, and by the cluster deciding
//     to stop: the two never cross.
//   - users.lock: every process using the cluster holds a shared flock on
//     it for as long as it does (the kernel drops it when the process
//     ends, however it ends).
//   - cluster: written by the cluster once it is ready (its directory and
//     pid), removed when it decides to stop.
//
// The cluster checks every second; once no process has held users.lock
// for sharedGrace, it removes DIR/cluster and stops as on SIGTERM.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// sharedGrace is how long a shared cluster outlives its last user: a test
// binary that starts just after another ended finds it still running.
const sharedGrace = 10 * time.Second

// announceShared writes DIR/cluster: this cluster's directory and pid.
func announceShared(shareDir, clusterDir string) error {
	tmp := filepath.Join(shareDir, "cluster.tmp")
	if err := os.WriteFile(tmp, []byte(clusterDir+"\n"+strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(shareDir, "cluster"))
}

// whileUsed returns when no process has held DIR/users.lock for
// sharedGrace (DIR/cluster removed first), or when ctx ends.
func whileUsed(ctx context.Context, shareDir string) error {
	join, err := os.OpenFile(filepath.Join(shareDir, "join.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer join.Close()
	users, err := os.OpenFile(filepath.Join(shareDir, "users.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer users.Close()
	var unusedSince time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = os.Remove(filepath.Join(shareDir, "cluster"))
			return nil
		case <-tick.C:
		}
		if err := syscall.Flock(int(join.Fd()), syscall.LOCK_EX); err != nil {
			return err
		}
		err := syscall.Flock(int(users.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			if unusedSince.IsZero() {
				unusedSince = time.Now()
			}
			if time.Since(unusedSince) >= sharedGrace {
				// Nobody joins while join.lock is held: once the file is
				// gone, the next one starts a cluster of its own.
				_ = os.Remove(filepath.Join(shareDir, "cluster"))
				_ = syscall.Flock(int(users.Fd()), syscall.LOCK_UN)
				_ = syscall.Flock(int(join.Fd()), syscall.LOCK_UN)
				fmt.Fprintf(os.Stderr, "testcluster: no process used the shared cluster for %s: stopping\n", sharedGrace)
				return nil
			}
			_ = syscall.Flock(int(users.Fd()), syscall.LOCK_UN)
		case errors.Is(err, syscall.EWOULDBLOCK):
			unusedSince = time.Time{}
		default:
			_ = syscall.Flock(int(join.Fd()), syscall.LOCK_UN)
			return err
		}
		_ = syscall.Flock(int(join.Fd()), syscall.LOCK_UN)
	}
}

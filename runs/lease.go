package runs

// An execution's lease on its run, the process identity it is held under,
// and how a process that stops gives its runs back.

import (
	"cmp"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultLease is how long a run's lease lasts unless renewed.
const DefaultLease = 20 * time.Second

func (r *Runner) lease() time.Duration { return cmp.Or(r.Lease, DefaultLease) }

// Stop makes every execution of this runner give its run back at its next
// safe point (between checkpoints, or once the step in flight is recorded),
// for another process, or this one restarted, to resume.
// A step that only waits (see yielding) stops waiting at once: it is
// recorded nowhere, and the next execution takes it up again.
func (r *Runner) Stop() {
	if !r.stopping.Swap(true) {
		close(r.stopChan())
	}
}

// stopChan is the channel Stop closes.
func (r *Runner) stopChan() chan struct{} {
	r.stopOnce.Do(func() { r.stopped = make(chan struct{}) })
	return r.stopped
}

// errYielded means a step that waited was stopped by Stop: its checkpoint
// stays as it was, for the next execution to take up again.
var errYielded = errors.New("runs: the step stopped waiting: the process is shutting down")

// stepContext is the context of a step of kind: for a step that only
// waits, one that ends when Stop is called (with errYielded as its cause).
func (r *Runner) stepContext(ctx context.Context, kind string) (context.Context, context.CancelFunc) {
	if !yielding(kind) {
		return ctx, func() {}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-r.stopChan():
			cancel(errYielded)
		case <-done:
		}
	}()
	return sctx, func() { close(done); cancel(nil) }
}

// processName names this process in lease owners: its machine (host name
// and pid namespace) and pid, so that an operator reading the runs table
// sees who executes what, and a process on the same machine can tell an
// executor that died (see deadHere).
var processName = machineName() + ":" + strconv.Itoa(os.Getpid())

// machineName is host@pid-namespace: processes with the same machine name
// see the same process ids.
func machineName() string {
	host, _ := os.Hostname()
	ns, err := os.Readlink("/proc/self/ns/pid") // "pid:[4026531836]"
	if err != nil {
		return host
	}
	return host + "@" + strings.Trim(strings.TrimPrefix(ns, "pid:"), "[]")
}

// deadHere reports whether the lease owner names a process of this
// machine that no longer exists: its lease need not run out before the run
// is taken over. A process id reused since only delays that (the lease
// still expires); it never makes a live executor look dead.
func deadHere(owner string) bool {
	machine, rest, ok := strings.Cut(owner, ":")
	if !ok || !strings.Contains(machine, "@") || machine != machineName() {
		return false
	}
	pidText, _, _ := strings.Cut(rest, ":")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// renew renews the execution's lease until done is closed. When another
// process holds the lease now, or it could not be renewed before it
// expired, it cancels the execution with that cause.
func (r *Runner) renew(ctx context.Context, runID int64, owner string, lost context.CancelCauseFunc, done <-chan struct{}) {
	every := r.lease() / 4
	t := time.NewTicker(every)
	defer t.Stop()
	expires := time.Now().Add(r.lease())
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
		ok, err := r.DB.RenewRunLease(rctx, runID, owner, r.lease())
		cancel()
		switch {
		case err == nil && ok:
			expires = sent.Add(r.lease())
		case err == nil:
			lost(ErrTakenOver)
			return
		case time.Now().After(expires):
			lost(errLeaseExpired)
			return
		}
	}
}

package runs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// stepWaiter is the platform.Waiter of one step: when the platform cannot
// reach what it works on (the Kubernetes API server), the checkpoint says
// so as it happens ("Waiting for the Kubernetes API server at … since
// 12:04:10 UTC: connection refused"), with a line in the step's log; when
// it answers again, the checkpoint's note goes and the log says when it
// was back. The changes are written in order by one goroutine, never by
// the caller (a watch must not wait for the database).
type stepWaiter struct {
	r      *Runner
	ctx    context.Context
	runID  int64
	lease  string
	pos    int
	status string
	out    platform.Output

	mu     sync.Mutex
	down   map[string]time.Time // what → since
	warned map[string]bool      // warnings already logged
	writes chan string          // the checkpoint's warning to write
	done   chan struct{}
}

func (r *Runner) newStepWaiter(ctx context.Context, rc *runContext, cp store.Checkpoint, out platform.Output) *stepWaiter {
	status := cp.Status
	if status == store.CheckpointPending {
		status = store.CheckpointRunning
	}
	w := &stepWaiter{r: r, ctx: context.WithoutCancel(ctx), runID: rc.run.ID, lease: rc.lease, pos: cp.Position, status: status, out: out,
		down: map[string]time.Time{}, writes: make(chan string, 16), done: make(chan struct{})}
	go w.run(w.writes)
	return w
}

func (w *stepWaiter) run(writes <-chan string) {
	defer close(w.done)
	for warning := range writes {
		// Newest first: a note superseded before it was written is not.
		for more := true; more; {
			select {
			case next, ok := <-writes:
				if !ok {
					more = false
				} else {
					warning = next
				}
			default:
				more = false
			}
		}
		if _, _, err := w.r.apply(w.ctx, store.RunChange{RunID: w.runID, Lease: w.lease, Checkpoint: &store.CheckpointChange{
			Position: w.pos, Status: w.status, Warning: warning, From: []string{w.status}}}); err != nil {
			w.r.Logger.Warn("record that a step waits for the cluster", "run", w.runID, "err", err)
		}
	}
}

// Unreachable implements platform.Waiter.
func (w *stepWaiter) Unreachable(what string, since time.Time, cause string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.down[what]; ok || w.writes == nil {
		return
	}
	w.down[what] = since
	text := fmt.Sprintf("Waiting for %s since %s: %s.", what, humanize.HourSecond(since), cause)
	w.out.Line(text)
	w.writes <- text
}

// Reachable implements platform.Waiter.
func (w *stepWaiter) Reachable(what string, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	first, ok := w.down[what]
	if !ok || w.writes == nil {
		return
	}
	delete(w.down, what)
	now := time.Now()
	w.out.Line(fmt.Sprintf("%s answers again at %s (unreachable since %s, %s).", upperFirst(what), humanize.HourSecond(now),
		humanize.HourSecond(first), humanize.Duration(now.Sub(first).Round(time.Second))))
	if len(w.down) == 0 {
		w.writes <- ""
	}
}

// Warn implements platform.Warner: the warning is a line of the step's
// log, once per step.
func (w *stepWaiter) Warn(who, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.warned == nil {
		w.warned = map[string]bool{}
	}
	if w.warned[text] || w.writes == nil {
		return
	}
	w.warned[text] = true
	w.out.Line(fmt.Sprintf("Warning from %s: %s", who, text))
}

// close ends the waiter once its notes are written: the step's outcome
// is recorded after them.
func (w *stepWaiter) close() {
	w.mu.Lock()
	close(w.writes)
	w.writes = nil
	w.mu.Unlock()
	<-w.done
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// TestAHeldRolloutWaitsUntilTheHoldIsLifted: a rollout of an application
// held by the faults does not start (no pod) until a Set lifts the hold,
// another application's is not held, and a held rollout whose run is
// cancelled ends with the cancellation.
func TestAHeldRolloutWaitsUntilTheHoldIsLifted(t *testing.T) {
	t.Parallel()
	faults := &Faults{Hold: map[string]bool{"web": true}}
	l := &Platform{Faults: faults}
	env := platform.Env{ID: 7, Project: "p", Name: "production"}
	app := &compiler.Application{Scaling: compiler.Scaling{Min: 1}}
	ctx := context.Background()

	if err := l.Rollout(ctx, env, "worker", app, Discard()); err != nil {
		t.Fatalf("worker is not held: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Rollout(ctx, env, "web", app, Discard()) }()
	waiting := func() {
		t.Helper()
		for {
			faults.mu.Lock()
			w := faults.wake != nil
			faults.mu.Unlock()
			if w {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("the held rollout ended (%v) before its hold was lifted", err)
			case <-time.After(time.Millisecond):
			}
		}
	}
	waiting()
	// Another change than the hold's leaves it held.
	faults.Set(func(f *Faults) { f.Build = map[string]string{"other": "x"} })
	waiting()
	if cs, err := l.LogContainers(ctx, env, "web"); err != nil || len(cs) != 0 {
		t.Fatalf("a held rollout started pods %+v (%v)", cs, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the held rollout ended (%v) before its hold was lifted", err)
	default:
	}
	faults.Set(func(f *Faults) { f.Hold = nil })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cs, err := l.LogContainers(ctx, env, "web"); err != nil || len(cs) != 1 {
		t.Fatalf("after the hold web has containers %+v (%v), want 1", cs, err)
	}

	faults.Set(func(f *Faults) { f.Hold = map[string]bool{"web": true} })
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- l.Rollout(cctx, env, "web", app, Discard()) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled held rollout ended with %v, want context.Canceled", err)
	}
}

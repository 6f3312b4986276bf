package stream

import (
	"context"
	"sync"
	"time"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/events/payload"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// FragmentRenderer renders the fragments an event changes (views.Fragment:
// HTML that replaces the element with the same id), so a watching page
// swaps them in place: the run page's checkpoint row (id
// "checkpoint-<position>"), its header ("run-header") and status
// ("run-status"); the environment page's runs list row or service state.
// It is called once per event and process, whatever the number of
// watchers, so the fragments must not depend on who watches. An error is
// logged and the frame goes out without fragments (the page still updates
// its data-run-status and its last sequence number). RunFragments renders
// from the event and its state alone (its context has no deadline);
// EnvironmentFragments may read, within 5 s.
type FragmentRenderer interface {
	RunFragments(ctx context.Context, runID int64, ev *events.Event) ([]views.Fragment, error)
	EnvironmentFragments(ctx context.Context, environmentID int64, ev *events.Event) ([]views.Fragment, error)
}

// NoFragments renders nothing: frames carry only the event's data (tests
// that watch raw frames use it).
type NoFragments struct{}

// RunFragments implements FragmentRenderer.
func (NoFragments) RunFragments(context.Context, int64, *events.Event) ([]views.Fragment, error) {
	return nil, nil
}

// EnvironmentFragments implements FragmentRenderer.
func (NoFragments) EnvironmentFragments(context.Context, int64, *events.Event) ([]views.Fragment, error) {
	return nil, nil
}

// pageFragments renders the run and environment pages' own components
// (views.RunFragments, views.EnvironmentFragments) from the state read
// with the event: the default renderer.
type pageFragments struct {
	now func() time.Time
	// activeRelease returns the run of an environment's active release (0
	// when none): a finished deploy's row offers a rollback unless it is
	// that. It is asked once per environment state, not per frame
	// (releases).
	activeRelease func(ctx context.Context, envID int64) (int64, error)
	releases      *releaseCache
	// nextCheck is when the reconciler checks a DNS-pending domain again
	// (runs.Service.NextAutomaticCheck); nil without a reconciler.
	nextCheck func(c store.Certificate, now time.Time) (time.Time, bool)
}

// RunFragments implements FragmentRenderer.
func (p pageFragments) RunFragments(ctx context.Context, _ int64, ev *events.Event) ([]views.Fragment, error) {
	if ev.Run == nil || ev.Environment == nil || payload.CarriesLog(ev.Payload) {
		// Log lines change no part the server renders: the page's script
		// appends them from the event itself.
		return nil, nil
	}
	return views.RunFragments(ctx, p.now(), ev.Run, ev.Environment, ev.CheckpointNow)
}

// EnvironmentFragments implements FragmentRenderer.
func (p pageFragments) EnvironmentFragments(ctx context.Context, _ int64, ev *events.Event) ([]views.Fragment, error) {
	if ev.Environment == nil {
		return nil, nil
	}
	var active int64
	if r := ev.Run; r != nil && views.RollbackHref(ev.Environment, r, 0) != "" && p.activeRelease != nil {
		var err error
		if active, err = p.releases.get(ctx, ev.Environment, p.activeRelease); err != nil {
			return nil, err
		}
	}
	now := p.now()
	var next time.Time
	if c := ev.Certificate; c != nil && p.nextCheck != nil {
		next, _ = p.nextCheck(*c, now)
	}
	return views.EnvironmentFragments(ctx, now, ev.Environment, ev.LatestRuns, ev.Run, ev.Certificate, active, next)
}

// releaseCache remembers each environment's active release run for the
// environment's newest event: the active release changes only when a run
// finishes, which appends an environment event, so every frame rendered
// from the same environment state (a replay's, or one event's frames to
// many watchers) asks the database once.
type releaseCache struct {
	mu      sync.Mutex
	entries map[int64]releaseEntry
}

type releaseEntry struct {
	seq, run int64
}

func newReleaseCache() *releaseCache { return &releaseCache{entries: map[int64]releaseEntry{}} }

func (c *releaseCache) get(ctx context.Context, env *store.Environment, ask func(context.Context, int64) (int64, error)) (int64, error) {
	if c == nil {
		return ask(ctx, env.ID)
	}
	c.mu.Lock()
	e, ok := c.entries[env.ID]
	c.mu.Unlock()
	if ok && e.seq == env.LastEventSeq {
		return e.run, nil
	}
	run, err := ask(ctx, env.ID)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	if len(c.entries) >= 4096 {
		clear(c.entries)
	}
	c.entries[env.ID] = releaseEntry{seq: env.LastEventSeq, run: run}
	c.mu.Unlock()
	return run, nil
}

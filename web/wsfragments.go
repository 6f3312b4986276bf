package web

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/a-h/templ"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/runs"
)

// Fragment is a piece of HTML that replaces the element with the same id
// (its outerHTML) on a page that follows an event stream.
type Fragment struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// FragmentRenderer renders the fragments an event changes, so a watching
// page swaps them in place: the run page's checkpoint row (id
// "checkpoint-<position>"), its header ("run-header") and status
// ("run-status"); the environment page's runs list row or service state.
// It is called once per event and process, whatever the number of
// watchers, so the fragments must not depend on who watches. An error is
// logged and the frame goes out without fragments (the page still updates
// its data-run-status and its last sequence number).
type FragmentRenderer interface {
	RunFragments(ctx context.Context, runID int64, ev *runs.Event) ([]Fragment, error)
	EnvironmentFragments(ctx context.Context, environmentID int64, ev *runs.Event) ([]Fragment, error)
}

// NoFragments renders nothing: frames carry only the event's data (tests
// that watch raw frames use it).
type NoFragments struct{}

// RunFragments implements FragmentRenderer.
func (NoFragments) RunFragments(context.Context, int64, *runs.Event) ([]Fragment, error) {
	return nil, nil
}

// EnvironmentFragments implements FragmentRenderer.
func (NoFragments) EnvironmentFragments(context.Context, int64, *runs.Event) ([]Fragment, error) {
	return nil, nil
}

// pageFragments renders the run and environment pages' own components (see
// handlers.LiveFragments): the default renderer.
type pageFragments struct{ live handlers.LiveFragments }

// RunFragments implements FragmentRenderer.
func (p pageFragments) RunFragments(ctx context.Context, _ int64, ev *runs.Event) ([]Fragment, error) {
	if ev.Run == nil || ev.Environment == nil {
		return nil, nil
	}
	return renderFragments(ctx, p.live.Run(ev.Run, ev.Environment, ev.CheckpointNow))
}

// EnvironmentFragments implements FragmentRenderer.
func (p pageFragments) EnvironmentFragments(ctx context.Context, _ int64, ev *runs.Event) ([]Fragment, error) {
	if ev.Environment == nil {
		return nil, nil
	}
	return renderFragments(ctx, p.live.Environment(ev.Environment, ev.LatestRuns, ev.Run, ev.Certificate))
}

// renderFragments renders components by element id, in id order.
func renderFragments(ctx context.Context, parts map[string]templ.Component) ([]Fragment, error) {
	out := make([]Fragment, 0, len(parts))
	for _, id := range slices.Sorted(maps.Keys(parts)) {
		var b strings.Builder
		if err := parts[id].Render(ctx, &b); err != nil {
			return nil, err
		}
		out = append(out, Fragment{ID: id, HTML: b.String()})
	}
	return out, nil
}

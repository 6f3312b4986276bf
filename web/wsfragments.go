package web

import (
	"context"

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

// NoFragments renders nothing: frames carry only the event's data. It is the
// default until the run pages' components are plugged in through
// Deps.Fragments.
type NoFragments struct{}

// RunFragments implements FragmentRenderer.
func (NoFragments) RunFragments(context.Context, int64, *runs.Event) ([]Fragment, error) {
	return nil, nil
}

// EnvironmentFragments implements FragmentRenderer.
func (NoFragments) EnvironmentFragments(context.Context, int64, *runs.Event) ([]Fragment, error) {
	return nil, nil
}

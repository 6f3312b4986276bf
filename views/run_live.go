package views

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// Fragment is a piece of HTML that replaces the element with the same id
// (its outerHTML, and every element whose data-live names the id) on a
// page that follows an event stream.
type Fragment struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// RunFragments renders the parts of the run page that its event stream
// swaps in place, from the state read with the event: its heading (id
// run-header), its summary (id run-summary) and, when cp is set, that
// checkpoint's row (id checkpoint-<position>). A stream sends one frame to
// every watcher, so nothing here depends on who watches: the role-dependent
// actions (cancel) stay outside these parts.
func RunFragments(ctx context.Context, now time.Time, run *store.Run, env *store.Environment, cp *store.Checkpoint) ([]Fragment, error) {
	vm := NewRunView(env, run, now, false)
	// In id order, as renderFragments gives them ("checkpoint-" sorts
	// before "run-"), without its map: this runs for every event.
	out := make([]Fragment, 0, 3)
	var b strings.Builder
	b.Grow(4 << 10)
	render := func(id string, c templ.Component) error {
		start := b.Len()
		if err := c.Render(ctx, &b); err != nil {
			return err
		}
		out = append(out, Fragment{ID: id, HTML: b.String()[start:]})
		return nil
	}
	if cp != nil {
		if err := render("checkpoint-"+strconv.Itoa(cp.Position), CheckpointRow(NewCheckpointView(env, run, *cp, now))); err != nil {
			return nil, err
		}
	}
	if err := render("run-header", RunHeading(vm)); err != nil {
		return nil, err
	}
	if err := render("run-summary", RunSummary(vm)); err != nil {
		return nil, err
	}
	return out, nil
}

// EnvironmentFragments renders the parts of the environment and runs pages
// that an environment event replaces: the list of its latest runs (id
// latest-runs), its state with the revision it runs (id env-state), when
// run is set (the event concerns a run) that run's row of the runs list (id
// run-row-<id>, inserted in order when the list does not show it yet) and,
// when cert is set (the event changed a service's state), that hostname's
// TLS state (every element whose data-live is service-state-<domain>). The
// domain is the event's own: nothing is shown that the event does not
// carry already.
func EnvironmentFragments(ctx context.Context, now time.Time, env *store.Environment, latest []store.Run, run *store.Run, cert *store.Certificate) ([]Fragment, error) {
	rs := make([]RunView, 0, len(latest))
	for i := range latest {
		rs = append(rs, NewRunView(env, &latest[i], now, false))
	}
	// The missing-values hint of an empty list needs the values; an event
	// means a run exists, so the list is never empty here.
	var active int64
	if env.ActiveRevisionID != nil {
		active = *env.ActiveRevisionID
	}
	parts := map[string]templ.Component{
		"latest-runs": LatestRuns(rs, false),
		"env-state":   EnvironmentLiveState(env.State, active),
	}
	if run != nil {
		parts[RunRowID(run.ID)] = RunRow(NewRunView(env, run, now, false))
	}
	if cert != nil {
		parts["service-state-"+cert.Domain] = ServiceStateBadge(cert.Domain, ServiceStateText(*cert), cert.State)
	}
	return renderFragments(ctx, parts)
}

// ServiceStateText is how a hostname's TLS state reads on the environment
// page: issued, cert failed (with its retry), or DNS pending.
func ServiceStateText(c store.Certificate) string {
	switch c.State {
	case store.CertIssued:
		return "issued"
	case store.CertFailed:
		if c.NextRetryAt != nil {
			return runs.RetryText(*c.NextRetryAt)
		}
		return "cert failed"
	}
	return "DNS pending"
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

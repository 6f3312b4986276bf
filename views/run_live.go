package views

import (
	"context"
	"encoding/json"
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

// CheckpointID is the element id of a run's checkpoint at position: the
// row on the run page and the fragment a live frame replaces
// ("checkpoint-3").
func CheckpointID(position int) string { return "checkpoint-" + strconv.Itoa(position) }

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
		if err := render(CheckpointID(cp.Position), CheckpointRow(NewCheckpointView(env, run, *cp, now))); err != nil {
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
// carry already. activeRelease is the run number of the environment's
// active release (0 when none): the row offers a rollback to an earlier
// successful deploy as the served list does (RollbackHref). nextCheck,
// when set with a DNS-pending cert, is its next automatic check: every
// countdown to it (data-live next-check-<domain>, on the environment page
// and under the run page's TLS checkpoint) restarts from it.
func EnvironmentFragments(ctx context.Context, now time.Time, env *store.Environment, latest []store.Run, run *store.Run, cert *store.Certificate, activeRelease int64, nextCheck time.Time) ([]Fragment, error) {
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
		row := NewRunView(env, run, now, false)
		row.RollbackHref = RollbackHref(env, run, activeRelease)
		parts[RunRowID(run.ID)] = RunRow(row)
		if run.ID == activeRelease {
			// The deploy that just became the active release makes the
			// previous one an earlier release: its row now offers the
			// rollback too.
			if prev := previousRelease(latest, run.ID); prev != nil {
				row := NewRunView(env, prev, now, false)
				row.RollbackHref = RollbackHref(env, prev, activeRelease)
				parts[RunRowID(prev.ID)] = RunRow(row)
			}
		}
	}
	if cert != nil {
		parts["service-state-"+cert.Domain] = ServiceStateBadge(cert.Domain, ServiceStateText(*cert), cert.State)
		if cert.State != store.CertIssued && !nextCheck.IsZero() {
			parts["next-check-"+cert.Domain] = NextCheck(cert.Domain, nextCheck, now)
		}
		// What the domain answered at its newest probe, and when.
		if cert.State != store.CertIssued && cert.LastProbeAt != nil {
			var probe runs.ProbeResult
			if json.Unmarshal(cert.LastProbe, &probe) == nil {
				parts["dns-resolves-"+cert.Domain] = DNSResolves(NewDNSPendingView(cert.Domain, &probe, *cert.LastProbeAt, nil))
			}
		}
	}
	return renderFragments(ctx, parts)
}

// previousRelease is the successful deploy among latest, other than run
// id, that finished last: the release that was active before it.
func previousRelease(latest []store.Run, id int64) *store.Run {
	var prev *store.Run
	for i := range latest {
		r := &latest[i]
		if r.ID == id || r.FinishedAt == nil || RollbackHref(&store.Environment{}, r, 0) == "" {
			continue
		}
		if prev == nil || r.FinishedAt.After(*prev.FinishedAt) {
			prev = r
		}
	}
	return prev
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

package views

import (
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// DriftItemView is one thing changed outside the Studio, in words: "web
// scaled to 0 outside the Studio", what the Studio applied and what it is
// now, and when it was first seen.
type DriftItemView struct {
	Key      string
	App      string
	Kind     string
	Sentence string
	Now      string
	Applied  string
	Since    time.Time
	// Removed (on a deploy's plan): the application goes with the deploy,
	// its drift with it; otherwise the deploy undoes it.
	Removed bool
}

// DriftView is an environment's drift on its page: what differs from what
// the Studio last applied, and where a deployer restores it (a redeploy of
// the active release, planned as usual; "" when the reader may not
// deploy).
type DriftView struct {
	Items   []DriftItemView
	Restore string
}

// NewDriftItemViews puts each drift in words.
func NewDriftItemViews(ds []platform.Drift) []DriftItemView {
	out := make([]DriftItemView, 0, len(ds))
	for _, d := range ds {
		out = append(out, DriftItemView{Key: d.Key(), App: d.App, Kind: string(d.Kind), Sentence: d.Sentence(),
			Now: d.Now, Applied: d.Applied, Since: d.Since})
	}
	return out
}

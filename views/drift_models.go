package views

import (
	"strings"
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
		out = append(out, DriftItemView{Key: d.Key(), App: d.App, Kind: string(d.Kind), Sentence: DriftSentence(d),
			Now: d.Now, Applied: d.Applied, Since: d.Since})
	}
	return out
}

// DriftSentence says what was done outside the Studio, in one sentence
// without a value (an environment variable's is never shown).
func DriftSentence(d platform.Drift) string {
	switch d.Kind {
	case platform.DriftReplicas:
		return d.App + " scaled to " + d.Now + " outside the Studio"
	case platform.DriftImage:
		return d.App + " set to image " + d.Now + " outside the Studio"
	case platform.DriftEnv:
		name := strings.TrimPrefix(d.Field, "env ")
		switch d.Now {
		case "removed":
			return name + " removed from " + d.App + " outside the Studio"
		case "set":
			return name + " added to " + d.App + " outside the Studio"
		}
		return name + " of " + d.App + " changed outside the Studio"
	case platform.DriftDeleted:
		return d.Object + " deleted outside the Studio"
	case platform.DriftAutoscaler:
		return d.Object + " " + d.Now + " outside the Studio"
	}
	return d.Object + " " + d.Field + " changed outside the Studio"
}

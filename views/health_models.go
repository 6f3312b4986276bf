package views

import (
	"strconv"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// HealthView is what the platform last reported of an environment, as its
// page leads with it: a word for the whole (healthy, degraded, down) and
// each application's state, counts and since-when.
type HealthView struct {
	// Level is healthy, degraded, down or unknown (nothing reported).
	Level string
	// Label is the header's words; Note says why nothing is known.
	Label, Badge, Note string
	Apps               map[string]AppHealthView
	Databases          map[string]ServiceHealthView
	Buckets            map[string]ServiceHealthView
	// At is when the Studio stored the report.
	At time.Time
}

// AppHealthView is one application's health on its card.
type AppHealthView struct {
	Name, State, Badge, Reason string
	Known                      bool
	Ready, Desired, Restarts   int
	Since                      time.Time
	Count                      int
}

// ServiceHealthView is a database's or bucket's health.
type ServiceHealthView struct {
	Name, Phase, Badge, Counts string
	Healthy                    bool
}

// Replicas is "2 of 3 ready".
func (a AppHealthView) Replicas() string {
	return strconv.Itoa(a.Ready) + " of " + strconv.Itoa(a.Desired) + " ready"
}

// NewHealthView builds the view of an environment's stored health;
// deployed says whether the Studio ever deployed the environment.
func NewHealthView(h store.EnvironmentHealth, deployed bool) HealthView {
	v := HealthView{Level: string(h.Level), Apps: map[string]AppHealthView{}, Databases: map[string]ServiceHealthView{},
		Buckets: map[string]ServiceHealthView{}, At: h.UpdatedAt}
	switch {
	case !deployed:
		v.Level, v.Label, v.Badge, v.Note = string(platform.HealthUnknown), "not deployed", "badge-plain", "Not deployed yet: nothing runs, so there is no health to show."
		return v
	case !h.Report.Reported:
		v.Level, v.Label, v.Badge, v.Note = string(platform.HealthUnknown), "no health reported", "badge-plain",
			"The platform reports nothing of this environment: it is not deployed on this cluster (or the Studio has not heard from it yet)."
		return v
	}
	v.Level = string(h.Report.Level())
	v.Label = v.Level
	v.Badge = healthBadge(platform.HealthLevel(v.Level))
	for _, a := range h.Report.Apps {
		b := "badge-ok"
		switch {
		case a.State == platform.StateRollingOut:
			b = "badge-info"
		case !a.State.Healthy() && a.Ready == 0:
			b = "badge-danger"
		case !a.State.Healthy():
			b = "badge-warn"
		}
		v.Apps[a.Name] = AppHealthView{Name: a.Name, State: string(a.State), Badge: b, Reason: a.Reason, Known: true,
			Ready: a.Ready, Desired: a.Desired, Restarts: a.Restarts, Since: a.Since, Count: a.Count}
	}
	for _, d := range h.Report.Databases {
		v.Databases[d.Name] = ServiceHealthView{Name: d.Name, Phase: d.Phase, Healthy: d.Healthy, Badge: okBadge(d.Healthy),
			Counts: strconv.Itoa(d.Ready) + " of " + strconv.Itoa(d.Instances) + " instances ready"}
	}
	for _, b := range h.Report.Buckets {
		v.Buckets[b.Name] = ServiceHealthView{Name: b.Name, Phase: b.Phase, Healthy: b.Healthy, Badge: okBadge(b.Healthy)}
	}
	return v
}

// App is the application's health, or one that says nothing is known.
func (v HealthView) App(name string) AppHealthView {
	if a, ok := v.Apps[name]; ok {
		return a
	}
	return AppHealthView{Name: name}
}

func healthBadge(l platform.HealthLevel) string {
	switch l {
	case platform.HealthHealthy:
		return "badge-ok"
	case platform.HealthDegraded:
		return "badge-warn"
	case platform.HealthDown:
		return "badge-danger"
	}
	return "badge-plain"
}

func okBadge(ok bool) string {
	if ok {
		return "badge-ok"
	}
	return "badge-warn"
}

// HealthLevelView is an environment's health in one word on the home and
// project pages ("" when nothing was reported).
func HealthLevelView(l platform.HealthLevel) (label, badge string) {
	if l == "" || l == platform.HealthUnknown {
		return "", ""
	}
	return string(l), healthBadge(l)
}

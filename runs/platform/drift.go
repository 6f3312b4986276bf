package platform

// Drift (issue 39): what differs on the platform from what the Studio last
// applied, changed by someone outside the Studio. It is shown, never
// corrected on its own: the next deploy (a redeploy of the active release
// restores it) applies what the Studio deploys again.

import (
	"context"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
)

// DriftKind is what a drift changed.
type DriftKind string

// The kinds of drift.
const (
	// DriftReplicas: the replica count differs from what the Studio set.
	DriftReplicas DriftKind = "replicas"
	// DriftImage: a container runs another image.
	DriftImage DriftKind = "image"
	// DriftEnv: an environment variable was changed, added or removed.
	DriftEnv DriftKind = "env"
	// DriftDeleted: an object the Studio applied is gone.
	DriftDeleted DriftKind = "deleted"
	// DriftAutoscaler: the autoscaler the Studio applied was removed or
	// suspended (its range changed).
	DriftAutoscaler DriftKind = "autoscaler"
)

// Drift is one difference between what the Studio applied and what the
// platform runs. Now and Applied are what a person may read: replica
// counts and image references as they are; for an environment variable
// only whether it is set, never its value (it may be a secret).
type Drift struct {
	// App is the application the object belongs to.
	App  string    `json:"app"`
	Kind DriftKind `json:"kind"`
	// Object is the object in the platform's words ("Deployment web").
	Object string `json:"object"`
	// Field names what changed within it ("replicas", "image of web",
	// "env LOG_LEVEL"); "" for the object itself.
	Field   string `json:"field,omitempty"`
	Now     string `json:"now"`
	Applied string `json:"applied"`
	// Since is when the platform first saw it (zero when it cannot tell:
	// the store then keeps when the Studio first stored it).
	Since time.Time `json:"since,omitzero"`
}

// Key identifies the drift of one field of one object: the same key with
// another Now is the same drift, changed again.
func (d Drift) Key() string { return d.Object + " " + d.Field }

// DriftReader is a platform that can tell what differs from what the
// Studio applied (a capability): on Kubernetes from the health watches'
// objects, on the local platform from its simulation (Faults.Drift).
// Calls for drift come whenever its HealthReader says an environment may
// have changed.
type DriftReader interface {
	// Drift is what differs in env from what the Studio applied for def,
	// the definition it last deployed there (nil: none, and so no
	// drift). Like Health it answers from what the platform already
	// watches.
	Drift(ctx context.Context, env Env, def *compiler.Definition) ([]Drift, error)
}

// Sentence says what was done outside the Studio, in one sentence ("web
// scaled to 0 outside the Studio"), without a value an environment
// variable was set to.
func (d Drift) Sentence() string {
	switch d.Kind {
	case DriftReplicas:
		return d.App + " scaled to " + d.Now + " outside the Studio"
	case DriftImage:
		return d.App + " set to image " + d.Now + " outside the Studio"
	case DriftEnv:
		name := strings.TrimPrefix(d.Field, "env ")
		switch d.Now {
		case "removed":
			return name + " removed from " + d.App + " outside the Studio"
		case "set":
			return name + " added to " + d.App + " outside the Studio"
		}
		return name + " of " + d.App + " changed outside the Studio"
	case DriftDeleted:
		return d.Object + " deleted outside the Studio"
	case DriftAutoscaler:
		return d.Object + " " + d.Now + " outside the Studio"
	}
	return d.Object + " " + d.Field + " changed outside the Studio"
}

package platform

import (
	"context"
	"time"
)

// Waiter hears, while a step's work goes on, that the step waits for
// something outside the Studio that cannot be reached (the Kubernetes API
// server), and when it answers again: the runner says so on the step's
// checkpoint as it happens.
type Waiter interface {
	// Unreachable: what (a sentence's subject, "the Kubernetes API server
	// at https://…") has not answered since, because of cause.
	Unreachable(what string, since time.Time, cause string)
	// Reachable: what answers again, after it did not since.
	Reachable(what string, since time.Time)
}

// Warner is what a Waiter may also be: told of a warning the platform's
// server gave with an answer that succeeded (the Kubernetes API server's
// Warning header: a deprecated API version, a field it will drop), which
// the step's log shows.
type Warner interface {
	Warn(who, text string)
}

type waiterKey struct{}

// WithWaiter returns ctx carrying w for the platform calls made with it.
func WithWaiter(ctx context.Context, w Waiter) context.Context {
	return context.WithValue(ctx, waiterKey{}, w)
}

// WaiterFrom is the Waiter ctx carries, nil when none.
func WaiterFrom(ctx context.Context) Waiter {
	w, _ := ctx.Value(waiterKey{}).(Waiter)
	return w
}

// HandEdit is the fields a field manager other than the Studio (a
// person's kubectl scale, set image or edit) owns on one of the objects
// the Studio applies: drift that the next deploy takes back.
type HandEdit struct {
	Kind, Name string
	Manager    string
	Operation  string // Update or Apply
	// Subresource is the subresource it wrote through ("scale"), "" for
	// the object itself.
	Subresource string
	Since       time.Time
	Fields      []string
	// Removed: the object goes with the next deploy (the blue-green slot
	// the next switch deletes), its hand edits with it.
	Removed bool
}

// HandEditReader is a platform that can tell hand edits of what it
// applied (kubernetes: from each object's managedFields).
type HandEditReader interface {
	HandEdits(ctx context.Context, env Env) ([]HandEdit, error)
}

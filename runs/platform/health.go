package platform

// What runs now: the words a platform reports an application's state in,
// shared by the runner (a rollout that fails says which of these it saw)
// and the health an environment's page leads with. A platform classifies
// what it sees into one of these in one place (on Kubernetes,
// kubernetes/podstate.go).

import (
	"context"
	"time"

	"github.com/skali-dev/studio/compiler"
)

// AppState is an application's state in plain words.
type AppState string

// The states an application can be in.
const (
	// StateRunning: every desired replica is ready.
	StateRunning AppState = "running"
	// StateRollingOut: a new version is replacing the old one.
	StateRollingOut AppState = "rolling out"
	// StateCrashLooping: a container exits and is restarted again and again.
	StateCrashLooping AppState = "crash looping"
	// StateOOMKilled: a container was killed for passing its memory limit.
	StateOOMKilled AppState = "killed for memory"
	// StateImagePull: the image cannot be pulled.
	StateImagePull AppState = "image cannot be pulled"
	// StateUnschedulable: no node has room for a pod (the scheduler's words).
	StateUnschedulable AppState = "waiting for room"
	// StateNotReady: a container runs but fails its readiness probe.
	StateNotReady AppState = "failing its readiness probe"
	// StateMissing: what the Studio applied is gone from the platform.
	StateMissing AppState = "missing"
	// StateScaledToZero: scaled to zero outside the Studio.
	StateScaledToZero AppState = "scaled to zero"
)

// Failing is whether s is a state a rollout fails on at once (what is
// known will not pass by waiting for the rollout's deadline).
func (s AppState) Failing() bool {
	switch s {
	case StateCrashLooping, StateOOMKilled, StateImagePull, StateUnschedulable:
		return true
	}
	return false
}

// PodProblem is what a platform knows of one pod (or simulated replica)
// that is not running as it should: its state and the evidence for it.
// Every string is as the platform wrote it; a caller masks values in it
// before it is shown or stored (LastLines are the application's own
// output).
type PodProblem struct {
	State AppState
	Pod   string
	// Container is the container the problem is in ("" for the pod).
	Container string
	// Reason is one sentence of what the platform said: the exit code and
	// signal, the limit passed, the image and why it was refused, the
	// scheduler's message, the probe's path and last failure.
	Reason   string
	ExitCode *int
	// Limit is the memory limit passed (OOMKilled), e.g. "64Mi".
	Limit string
	// Image is the image that cannot be pulled.
	Image string
	// LastLines are the last lines the crashed container printed, when
	// the platform keeps them (filled by the caller that fetches them).
	LastLines []string
	// Since is when the problem was first seen; Count how many times it
	// happened (restarts, failed probes, pull attempts).
	Since time.Time
	Count int
}

// Healthy is whether an application in state s serves as it should (a
// rollout under way counts: it is the Studio's own change).
func (s AppState) Healthy() bool { return s == StateRunning || s == StateRollingOut }

// AppHealth is what a platform reports of one application now.
type AppHealth struct {
	Name  string   `json:"name"`
	State AppState `json:"state"`
	// Ready and Desired are replicas: ready to serve, and asked for (by
	// the Deployment as it stands on the platform, not as the Studio
	// applied it).
	Ready   int `json:"ready"`
	Desired int `json:"desired"`
	// Restarts is how many times its containers restarted in the last
	// hour.
	Restarts int `json:"restarts"`
	// Since is when the application entered State (as far as the
	// platform knows; zero when it cannot tell).
	Since time.Time `json:"since,omitzero"`
	// Count is how often the problem happened (restarts, failed probes,
	// pull attempts); 0 for running.
	Count int `json:"count,omitempty"`
	// Reason is one sentence of evidence in the platform's words ("exit
	// code 2", "passed its memory limit of 64Mi", the scheduler's
	// message); "" when running.
	Reason string `json:"reason,omitempty"`
	// Problem is the pod the reason was seen on, when there is one.
	Problem *PodProblem `json:"-"`
}

// DatabaseHealth is what a platform reports of one database: the
// operator's phase and its instances.
type DatabaseHealth struct {
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Ready     int    `json:"ready"`
	Instances int    `json:"instances"`
	Healthy   bool   `json:"healthy"`
}

// BucketHealth is what a platform reports of one bucket: whether its claim
// is bound.
type BucketHealth struct {
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Healthy bool   `json:"healthy"`
}

// EnvironmentHealth is what a platform reports of an environment's
// applications, databases and buckets.
type EnvironmentHealth struct {
	// Reported says the platform knows the environment: false when it was
	// never deployed here (on Kubernetes, its namespace is not on this
	// cluster), and then nothing else is set.
	Reported  bool             `json:"reported"`
	Apps      []AppHealth      `json:"applications"`
	Databases []DatabaseHealth `json:"databases"`
	Buckets   []BucketHealth   `json:"buckets"`
}

// HealthLevel is an environment's health in one word.
type HealthLevel string

// The levels of an environment's health.
const (
	// HealthUnknown: the platform reported nothing (never deployed here).
	HealthUnknown HealthLevel = "unknown"
	// HealthHealthy: every application and service is as it should be.
	HealthHealthy HealthLevel = "healthy"
	// HealthDegraded: something is not, but every application still has a
	// ready replica.
	HealthDegraded HealthLevel = "degraded"
	// HealthDown: some application has no ready replica.
	HealthDown HealthLevel = "down"
)

// Level is the environment's health in one word.
func (h EnvironmentHealth) Level() HealthLevel {
	if !h.Reported {
		return HealthUnknown
	}
	level := HealthHealthy
	for _, a := range h.Apps {
		if a.State.Healthy() {
			continue
		}
		if a.Ready == 0 {
			return HealthDown
		}
		level = HealthDegraded
	}
	for _, d := range h.Databases {
		if !d.Healthy {
			level = HealthDegraded
		}
	}
	for _, b := range h.Buckets {
		if !b.Healthy {
			level = HealthDegraded
		}
	}
	return level
}

// HealthReader is a platform that reports what runs now (a capability):
// each application's state, databases and buckets.
type HealthReader interface {
	// Health is what the platform sees of env now, for the definition the
	// Studio last deployed there (nil: none). It answers from what the
	// platform already watches, without a request per call.
	Health(ctx context.Context, env Env, def *compiler.Definition) (EnvironmentHealth, error)
	// WatchHealth calls changed, from one goroutine, with each
	// environment whose health may have changed (Env's Project and Name
	// set; ID when the platform knows it), until ctx ends. Calls may be
	// spurious, never missing.
	WatchHealth(ctx context.Context, changed func(Env)) error
}

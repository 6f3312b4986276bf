package platform

// What runs now: the words a platform reports an application's state in,
// shared by the runner (a rollout that fails says which of these it saw)
// and the health an environment's page leads with. A platform classifies
// what it sees into one of these in one place (on Kubernetes,
// kubernetes/podstate.go).

import "time"

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

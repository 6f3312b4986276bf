// Package payload is the live-event format: one Go type per kind of event,
// the constants for kinds and for run and checkpoint states, and the one
// encoding (JSON) that the event tables store, the websocket frames carry
// and static/js/live.js and backups.js read. It imports nothing of the
// Studio, so that store (which appends events) and events (which streams
// them) both use it without an import cycle.
package payload

import (
	"encoding/json"
	"time"
)

// Kind names a kind of environment event (its "type" field). A run
// stream's events have no type: each is a RunChanged.
type Kind string

// The kinds of environment event.
const (
	// KindRunStarted: a run of the environment started.
	KindRunStarted Kind = "run.started"
	// KindRunFinished: a run of the environment finished.
	KindRunFinished Kind = "run.finished"
	// KindRunExecutor: a run's executor was lost, or a process took the
	// run over.
	KindRunExecutor Kind = "run.executor"
	// KindServiceState: a domain's TLS state changed.
	KindServiceState Kind = "service.state"
	// KindServiceChecked: a DNS-pending domain was probed again and still
	// does not point here: its state is unchanged, its next automatic
	// check moved (Service names the domain).
	KindServiceChecked Kind = "service.checked"
	// KindEnvironmentState: the environment's state changed (a restore).
	KindEnvironmentState Kind = "environment.state"
	// KindHealth: what the platform reports of the environment's
	// applications changed (the page reads its health again).
	KindHealth Kind = "health"
	// KindDrift: what differs from what the Studio last applied changed
	// (the page reads its drift again).
	KindDrift Kind = "drift"
)

// Run statuses. A run is pending until an executor takes it, running or
// waiting (a certificate backoff, a deadline) while it works, and ends in
// one of the last four.
const (
	RunPending               = "pending"
	RunRunning               = "running"
	RunWaiting               = "waiting"
	RunSucceeded             = "succeeded"
	RunSucceededWithWarnings = "succeeded-with-warnings"
	RunFailed                = "failed"
	RunCancelled             = "cancelled"
	// RunRejected is a deploy waiting for approval that an approver
	// rejected.
	RunRejected = "rejected"
)

// Checkpoint statuses.
const (
	CheckpointPending   = "pending"
	CheckpointRunning   = "running"
	CheckpointWaiting   = "waiting"
	CheckpointSucceeded = "succeeded"
	CheckpointFailed    = "failed"
	CheckpointSkipped   = "skipped"
	// CheckpointNotRun is a checkpoint a failed or cancelled run never
	// reached.
	CheckpointNotRun = "not-run"
)

// Payload is an event as stored: RunChanged (a run's stream) or
// EnvironmentChanged (an environment's).
type Payload interface{ payload() }

// RunChanged is every event of a run's stream: the run's state after the
// change and, when the change concerned a checkpoint, that checkpoint.
type RunChanged struct {
	Run        RunState         `json:"run"`
	Checkpoint *CheckpointState `json:"checkpoint,omitempty"`
	// Log is set on the events that append log lines to the run (and on
	// no other): the lines, masked, as they were stored.
	Log *LogLines `json:"log,omitempty"`
}

// LogLines are log lines of one checkpoint appended to a run's log: First
// is the run-wide number of the first (Lines[0].N), the others follow.
type LogLines struct {
	Position int       `json:"position"`
	First    int64     `json:"first"`
	Lines    []LogLine `json:"lines"`
	// Cut: the run's log reached its bound; the last line says so and no
	// later line is kept.
	Cut bool `json:"cut,omitempty"`
}

// LogLine is one line of a run's log: its run-wide number, its time and
// its text (masked).
type LogLine struct {
	N    int64     `json:"n"`
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// RunState is a run's state in a RunChanged.
type RunState struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Summary string `json:"summary"`
	// ExecutorLost is set by the events that say the run's executor was
	// lost (true) or that a process took the run over (false).
	ExecutorLost *bool `json:"executorLost,omitempty"`
}

// CheckpointState is a checkpoint's state in a RunChanged.
type CheckpointState struct {
	Position int    `json:"position"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	Warning  string `json:"warning"`
}

// EnvironmentChanged is every event of an environment's stream; Type says
// which fields are set.
type EnvironmentChanged struct {
	Type Kind `json:"type"`
	// Run is the run the event concerns (run.started, run.finished,
	// run.executor, service.state).
	Run *RunRef `json:"run,omitempty"`
	// Service is the domain whose state changed (service.state), or that
	// was checked again (service.checked).
	Service *ServiceState `json:"service,omitempty"`
	// State is the environment's new state (environment.state).
	State string `json:"state,omitempty"`
}

// RunRef names a run in an environment event, with its status.
type RunRef struct {
	ID           int64  `json:"id"`
	Kind         string `json:"kind"`
	Status       string `json:"status"`
	ExecutorLost *bool  `json:"executorLost,omitempty"`
}

// ServiceState is a domain's TLS state as the environment page shows it
// ("DNS pending", "issued", "cert failed · retry at 14:03 UTC").
type ServiceState struct {
	Domain string `json:"domain"`
	State  string `json:"state"`
}

func (RunChanged) payload()         {}
func (EnvironmentChanged) payload() {}

// Encode is the one encoding of an event.
func Encode(p Payload) ([]byte, error) { return json.Marshal(p) }

// DecodeRun reads a run stream's stored event.
func DecodeRun(raw []byte) (RunChanged, error) {
	var p RunChanged
	err := json.Unmarshal(raw, &p)
	return p, err
}

// DecodeEnvironment reads an environment stream's stored event.
func DecodeEnvironment(raw []byte) (EnvironmentChanged, error) {
	var p EnvironmentChanged
	err := json.Unmarshal(raw, &p)
	return p, err
}

// CarriesLog reports whether a run stream's stored event carries log
// lines (a RunChanged with Log set), without decoding the lines.
func CarriesLog(raw []byte) bool {
	var p struct {
		Log json.RawMessage `json:"log"`
	}
	return json.Unmarshal(raw, &p) == nil && len(p.Log) > 0 && string(p.Log) != "null"
}

// Bool returns a pointer to b, for the optional flags above.
func Bool(b bool) *bool { return &b }

package platform

// Runtime logs: what an application's containers print while they run (not
// a run's steps, which write to an Output). A platform that keeps them has
// the LogReader capability; the Studio masks every line with the
// environment's values before it leaves the server (runs.Service.AppLogs),
// so a platform hands lines over as the containers printed them.

import (
	"context"
	"time"
)

// LogContainer is one container of an application's pod whose log can be
// read.
type LogContainer struct {
	Pod       string `json:"pod"`
	Container string `json:"container"`
	// Restarts is how often the container was restarted: from 1 on, the
	// previous container's log can be read (LogQuery.Previous).
	Restarts int `json:"restarts"`
	// Running is whether the container runs now.
	Running bool `json:"running"`
	// Started is when the pod started (zero when the platform cannot tell).
	Started time.Time `json:"started,omitzero"`
}

// LogQuery is what to read of an application's log.
type LogQuery struct {
	// App is the application's name in the definition.
	App string
	// Previous reads the previous container's log (the one that exited
	// before the last restart) instead of the current one's; a container
	// never restarted has none and is left out.
	Previous bool
	// Since and Until bound the lines' times (zero: unbounded). Since is
	// inclusive, Until exclusive; a platform may hand over lines before
	// Since that share its second (the caller filters them).
	Since, Until time.Time
	// TailLines keeps only the last TailLines lines of each container (0:
	// all of them), and LimitBytes stops reading a container after about
	// that many bytes (0: no bound): the caller's bounds, so that a large
	// log is never read whole.
	TailLines  int
	LimitBytes int64
	// Follow goes on handing over new lines as they are written, of the
	// containers that run now and of each pod that starts meanwhile, until
	// ctx ends.
	Follow bool
}

// LogLine is one line a container printed, without its newline.
type LogLine struct {
	At        time.Time `json:"at"`
	Pod       string    `json:"pod"`
	Container string    `json:"container"`
	Text      string    `json:"text"`
}

// LogReader is a platform that reads what an application's containers
// print (a capability, found with Logs).
type LogReader interface {
	// LogContainers lists the containers of app's pods in env whose log
	// can be read, by pod and container name.
	LogContainers(ctx context.Context, env Env, app string) ([]LogContainer, error)
	// ReadLogs calls emit with each line of q, in time order within a
	// container (lines of different containers may interleave as they
	// arrive). Without Follow it returns once every container's lines were
	// handed over; with it, it returns when ctx ends (nil then) or emit
	// returns an error (that error). emit is called from one goroutine at
	// a time.
	ReadLogs(ctx context.Context, env Env, q LogQuery, emit func(LogLine) error) error
}

// Logs is p's LogReader, or the refusal of runtime logs on p.
func Logs(p Platform) (LogReader, error) {
	if r, ok := As[LogReader](p); ok {
		return r, nil
	}
	return nil, NotSupported(p, "runtime logs")
}

package local

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// RuntimeFault is what a deployed application of the local platform does
// after its rollout (Faults.Runtime, by application): crash loop, be
// killed for memory, fail to pull its image, wait for room, fail its
// readiness probe, be scaled to zero or deleted outside the Studio.
type RuntimeFault struct {
	State platform.AppState `json:"state"`
	// Reason is the platform's sentence ("exit code 2", the scheduler's
	// message); a default one per state when empty.
	Reason string `json:"reason,omitempty"`
	// Ready is how many replicas still serve (default 0).
	Ready int `json:"ready,omitempty"`
	// Restarts is how often its containers restarted in the last hour.
	Restarts int      `json:"restarts,omitempty"`
	ExitCode *int     `json:"exitCode,omitempty"`
	Limit    string   `json:"limit,omitempty"`
	Image    string   `json:"image,omitempty"`
	Lines    []string `json:"lines,omitempty"`
}

// defaultReasons are the local platform's words for a fault without a
// reason of its own.
var defaultReasons = map[platform.AppState]string{
	platform.StateCrashLooping:  "its container exits with code 1 and is restarted",
	platform.StateOOMKilled:     "its container passed its memory limit",
	platform.StateImagePull:     "the image was not found in its registry",
	platform.StateUnschedulable: "0/1 nodes are available: insufficient memory",
	platform.StateNotReady:      "its readiness probe answered 503",
	platform.StateMissing:       "its workload was deleted outside the Studio",
	platform.StateScaledToZero:  "its workload was scaled to 0 outside the Studio",
}

// simulation is what the local platform's applications do: which are
// rolling out, since when each is in its state, and who watches.
type simulation struct {
	mu       sync.Mutex
	rolling  map[int64]map[string]bool
	deployed map[int64]platform.Env
	since    map[string]stateSince        // "env app" → state and since
	pods     map[int64]map[string]simPods // env → app → its pods (logs.go)
	// apps are the applications each environment runs (rolled out, or in
	// the definition its health was read for); drift what was done to
	// them outside the Studio (drift.go).
	apps      map[int64]map[string]bool
	drift     map[int64]map[string]driftSeen
	watchers  map[int]func(platform.Env)
	nextWatch int
}

type stateSince struct {
	state platform.AppState
	at    time.Time
}

func (s *simulation) init() {
	if s.rolling == nil {
		s.rolling = map[int64]map[string]bool{}
		s.deployed = map[int64]platform.Env{}
		s.since = map[string]stateSince{}
		s.apps = map[int64]map[string]bool{}
		s.drift = map[int64]map[string]driftSeen{}
		s.pods = map[int64]map[string]simPods{}
		s.watchers = map[int]func(platform.Env){}
	}
}

// changed tells every watcher that env's health may have changed; with a
// zero env, every environment the simulation ran.
func (l *Platform) healthChanged(env platform.Env) {
	l.sim.mu.Lock()
	l.sim.init()
	var envs []platform.Env
	if env.ID == 0 {
		envs = slices.Collect(maps.Values(l.sim.deployed))
	} else {
		envs = []platform.Env{env}
	}
	ws := slices.Collect(maps.Values(l.sim.watchers))
	l.sim.mu.Unlock()
	for _, e := range envs {
		for _, w := range ws {
			w(e)
		}
	}
}

func (l *Platform) setRolling(env platform.Env, app string, on bool) {
	l.sim.mu.Lock()
	l.sim.init()
	l.sim.deployed[env.ID] = env
	if l.sim.rolling[env.ID] == nil {
		l.sim.rolling[env.ID] = map[string]bool{}
	}
	if on {
		l.sim.rolling[env.ID][app] = true
	} else {
		delete(l.sim.rolling[env.ID], app)
	}
	l.sim.mu.Unlock()
	l.healthChanged(env)
}

// WatchHealth implements platform.HealthReader: the simulation tells of a
// rollout starting or ending and of a runtime fault set (Faults.Set).
func (l *Platform) WatchHealth(ctx context.Context, changed func(platform.Env)) error {
	ch := make(chan platform.Env, 64)
	l.sim.mu.Lock()
	l.sim.init()
	id := l.sim.nextWatch
	l.sim.nextWatch++
	l.sim.watchers[id] = func(e platform.Env) {
		select {
		case ch <- e:
		default:
			// The watcher is behind: it reads every environment again
			// when it catches up (a zero Env).
			select {
			case ch <- platform.Env{}:
			default:
			}
		}
	}
	l.sim.mu.Unlock()
	defer func() {
		l.sim.mu.Lock()
		delete(l.sim.watchers, id)
		l.sim.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-ch:
			if e.ID == 0 && e.Project == "" {
				l.sim.mu.Lock()
				all := slices.Collect(maps.Values(l.sim.deployed))
				l.sim.mu.Unlock()
				for _, d := range all {
					changed(d)
				}
				continue
			}
			changed(e)
		}
	}
}

// Health implements platform.HealthReader from the simulation: every
// application of the definition the Studio deployed runs with its
// replicas, unless it is rolling out or a runtime fault says otherwise.
func (l *Platform) Health(ctx context.Context, env platform.Env, def *compiler.Definition) (platform.EnvironmentHealth, error) {
	if def == nil {
		return platform.EnvironmentHealth{}, nil
	}
	h := platform.EnvironmentHealth{Reported: true, Apps: []platform.AppHealth{}, Databases: []platform.DatabaseHealth{}, Buckets: []platform.BucketHealth{}}
	now := time.Now()
	var runtime map[string]*RuntimeFault
	if l.Faults != nil {
		l.Faults.mu.Lock()
		runtime = maps.Clone(l.Faults.Runtime)
		l.Faults.mu.Unlock()
	}
	l.sim.mu.Lock()
	l.sim.init()
	l.sim.deployed[env.ID] = env
	rolling := maps.Clone(l.sim.rolling[env.ID])
	l.sim.apps[env.ID] = map[string]bool{}
	for name := range def.Applications {
		l.sim.apps[env.ID][name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(def.Applications)) {
		a := def.Applications[name]
		desired := max(a.Scaling.Min, 1)
		ah := platform.AppHealth{Name: name, State: platform.StateRunning, Ready: desired, Desired: desired}
		if d, ok := l.sim.driftOf(env.ID, name); ok && !rolling[name] {
			switch {
			case d.fault.Deleted:
				ah.State, ah.Desired, ah.Ready, ah.Reason = platform.StateMissing, 0, 0, defaultReasons[platform.StateMissing]
			case d.fault.Replicas != nil && *d.fault.Replicas == 0:
				ah.State, ah.Desired, ah.Ready, ah.Reason = platform.StateScaledToZero, 0, 0, defaultReasons[platform.StateScaledToZero]
			case d.fault.Replicas != nil:
				ah.Desired, ah.Ready = *d.fault.Replicas, *d.fault.Replicas
			}
		}
		if f := runtime[name]; f != nil && f.State != "" {
			ah.State, ah.Ready, ah.Restarts, ah.Reason = f.State, min(f.Ready, desired), f.Restarts, f.Reason
			if ah.Reason == "" {
				ah.Reason = defaultReasons[f.State]
			}
			switch f.State {
			case platform.StateMissing:
				ah.Desired, ah.Ready = 0, 0
			case platform.StateScaledToZero:
				ah.Desired, ah.Ready = 0, 0
			case platform.StateCrashLooping, platform.StateOOMKilled:
				ah.Count = max(f.Restarts, 1)
			}
			ah.Problem = &platform.PodProblem{State: f.State, Pod: name + "-0", Container: name, Reason: ah.Reason,
				ExitCode: f.ExitCode, Limit: f.Limit, Image: f.Image, LastLines: f.Lines, Count: ah.Count}
		} else if rolling[name] {
			ah.State, ah.Ready = platform.StateRollingOut, 0
		}
		key := env.Project + "/" + env.Name + " " + name
		s, ok := l.sim.since[key]
		if !ok || s.state != ah.State {
			s = stateSince{state: ah.State, at: now}
			l.sim.since[key] = s
		}
		ah.Since = s.at
		if ah.Problem != nil {
			ah.Problem.Since = s.at
		}
		h.Apps = append(h.Apps, ah)
	}
	l.sim.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(def.Databases)) {
		h.Databases = append(h.Databases, platform.DatabaseHealth{Name: name, Phase: "accepting connections", Ready: 1, Instances: 1, Healthy: true})
	}
	for _, name := range slices.Sorted(maps.Keys(def.Buckets)) {
		h.Buckets = append(h.Buckets, platform.BucketHealth{Name: name, Phase: "bound", Healthy: true})
	}
	return h, nil
}

var _ platform.HealthReader = (*Platform)(nil)

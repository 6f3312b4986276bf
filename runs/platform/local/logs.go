package local

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// Runtime logs of the simulation. Each application the local platform
// rolled out runs its replicas as pods APP-0, APP-1, … (one container,
// named as the application), started when its rollout ended. A container
// prints a line every LogEvery (line k of pod i at start + k·LogEvery +
// i·LogEvery/replicas): a start line, then requests it served ("GET
// /items/K 200 …"), and every third line, in turn, the lines the fault
// file scripts for it (Faults.Output["runtime"][APP], where ${NAME} stands
// for a value's plaintext in an encoding, as for a step's lines). The
// lines are a function of time, so reading is computing: nothing is kept,
// and a read of the last N lines costs N lines whatever the log's age.
//
// Restarts: an application with a runtime fault that counts restarts
// (RuntimeFault.Restarts) has a previous container per pod, which printed
// prevLines lines in the prevLines·LogEvery before its pod's current
// container started, the fault's last lines (RuntimeFault.Lines, with
// ${NAME} as in scripted lines) and the exit code it ended with.

// DefaultLogEvery is how often a simulated container prints a line.
const DefaultLogEvery = time.Second

// prevLines is how many lines a previous container printed before its
// fault's last lines.
const prevLines = 8

// simPods are an application's simulated pods: how many, since when.
type simPods struct {
	replicas int
	started  time.Time
}

// startPods records that app's pods (re)started now, with replicas.
func (l *Platform) startPods(env platform.Env, app string, replicas int) {
	l.sim.mu.Lock()
	defer l.sim.mu.Unlock()
	l.sim.init()
	if l.sim.pods[env.ID] == nil {
		l.sim.pods[env.ID] = map[string]simPods{}
	}
	l.sim.pods[env.ID][app] = simPods{replicas: max(replicas, 1), started: time.Now()}
}

func (l *Platform) logEvery() time.Duration {
	if l.LogEvery > 0 {
		return l.LogEvery
	}
	return DefaultLogEvery
}

// podsOf is app's pods now (ok false: none run).
func (l *Platform) podsOf(env platform.Env, app string) (simPods, bool) {
	l.sim.mu.Lock()
	defer l.sim.mu.Unlock()
	l.sim.init()
	p, ok := l.sim.pods[env.ID][app]
	return p, ok
}

// fault is app's runtime fault (nil: none).
func (l *Platform) fault(app string) *RuntimeFault {
	if l.Faults == nil {
		return nil
	}
	l.Faults.mu.Lock()
	defer l.Faults.mu.Unlock()
	if f := l.Faults.Runtime[app]; f != nil {
		c := *f
		c.Lines = slices.Clone(f.Lines)
		return &c
	}
	return nil
}

// LogContainers implements platform.LogReader.
func (l *Platform) LogContainers(ctx context.Context, env platform.Env, app string) ([]platform.LogContainer, error) {
	p, ok := l.podsOf(env, app)
	if !ok {
		return []platform.LogContainer{}, nil
	}
	restarts := 0
	if f := l.fault(app); f != nil {
		restarts = f.Restarts
	}
	out := make([]platform.LogContainer, p.replicas)
	for i := range out {
		out[i] = platform.LogContainer{Pod: podName(app, i), Container: app, Restarts: restarts, Running: true, Started: p.started}
	}
	return out, nil
}

func podName(app string, i int) string { return fmt.Sprintf("%s-%d", app, i) }

// logSource is what one simulated container prints.
type logSource struct {
	app, pod string
	// first is when line 0 is printed; every the time between lines.
	first time.Time
	every time.Duration
	// count bounds the lines (a previous container's); -1: unbounded.
	count    int
	scripted []string
	// ending are the previous container's last lines (after count).
	ending []string
}

// at is when line k is printed.
func (s *logSource) at(k int) time.Time { return s.first.Add(time.Duration(k) * s.every) }

// index is the first line printed at or after t.
func (s *logSource) index(t time.Time) int {
	if !t.After(s.first) {
		return 0
	}
	d := t.Sub(s.first)
	k := int(d / s.every)
	if time.Duration(k)*s.every < d {
		k++
	}
	return k
}

// total is how many lines the source prints (-1: unbounded).
func (s *logSource) total() int {
	if s.count < 0 {
		return -1
	}
	return s.count + len(s.ending)
}

// line is line k's text.
func (s *logSource) line(k int) string {
	if s.count >= 0 && k >= s.count {
		return s.ending[k-s.count]
	}
	if k == 0 {
		return fmt.Sprintf("Starting %s in pod %s, listening on :8080", s.app, s.pod)
	}
	if k%3 == 0 && len(s.scripted) > 0 {
		return s.scripted[(k/3-1)%len(s.scripted)]
	}
	paths := [...]string{"/items/%d", "/orders/%d", "/healthz?n=%d", "/api/search?page=%d"}
	path := fmt.Sprintf(paths[k%len(paths)], k)
	status, ms := 200, (k*7)%40+1
	switch {
	case k%29 == 0:
		return fmt.Sprintf("error: GET %s: upstream timed out after %dms", path, 1000+ms)
	case k%17 == 0:
		status = 404
	}
	return fmt.Sprintf("GET %s %d %dms", path, status, ms)
}

// sources are the containers q reads of app's pods p.
func (l *Platform) sources(env platform.Env, q platform.LogQuery, p simPods) []*logSource {
	f := l.fault(q.App)
	every := l.logEvery()
	var scripted []string
	if l.Faults != nil {
		l.Faults.mu.Lock()
		scripted = slices.Clone(l.Faults.Output[OutputRuntime][q.App])
		l.Faults.mu.Unlock()
	}
	values := l.ReceivedValues(env.ID)
	defer clear(values)
	for i, s := range scripted {
		scripted[i] = expand(s, values)
	}
	var out []*logSource
	for i := range p.replicas {
		offset := time.Duration(i) * every / time.Duration(p.replicas)
		s := &logSource{app: q.App, pod: podName(q.App, i), first: p.started.Add(offset), every: every, count: -1, scripted: scripted}
		if q.Previous {
			if f == nil || f.Restarts == 0 {
				continue
			}
			code := 1
			if f.ExitCode != nil {
				code = *f.ExitCode
			}
			for _, line := range f.Lines {
				s.ending = append(s.ending, expand(line, values))
			}
			s.ending = append(s.ending, fmt.Sprintf("%s exited with code %d", q.App, code))
			s.count = prevLines
			s.first = s.first.Add(-time.Duration(prevLines+len(s.ending)) * every)
		}
		out = append(out, s)
	}
	return out
}

// ReadLogs implements platform.LogReader from the simulation.
func (l *Platform) ReadLogs(ctx context.Context, env platform.Env, q platform.LogQuery, emit func(platform.LogLine) error) error {
	p, ok := l.podsOf(env, q.App)
	if !ok {
		if !q.Follow || q.Previous {
			return nil
		}
	}
	// next is, by pod, the next line to hand over.
	next := map[string]int{}
	var srcs []*logSource
	if ok {
		srcs = l.sources(env, q, p)
	}
	now := time.Now()
	for _, s := range srcs {
		from, to := s.index(q.Since), s.index(now.Add(time.Nanosecond))
		if !q.Until.IsZero() {
			to = min(to, s.index(q.Until))
		}
		if n := s.total(); n >= 0 {
			to = min(to, n)
		}
		if q.TailLines > 0 {
			from = max(from, to-q.TailLines)
		}
		var bytes int64
		for k := from; k < to; k++ {
			text := s.line(k)
			if bytes += int64(len(text)) + 1; q.LimitBytes > 0 && bytes > q.LimitBytes {
				break
			}
			if err := emit(platform.LogLine{At: s.at(k), Pod: s.pod, Container: q.App, Text: text}); err != nil {
				return err
			}
		}
		next[s.pod] = to
	}
	if !q.Follow || q.Previous {
		return nil
	}
	// Follow: hand over each line as its time comes, re-reading the pods
	// at least every followRecheck (a rollout starts new ones: they join
	// from their first line).
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		cur, ok := l.podsOf(env, q.App)
		if !ok {
			continue
		}
		if !cur.started.Equal(p.started) || cur.replicas != p.replicas {
			p = cur
			next = map[string]int{}
			srcs = l.sources(env, q, p)
		} else if srcs == nil {
			srcs = l.sources(env, q, p)
		}
		now := time.Now()
		if !q.Until.IsZero() && now.After(q.Until) {
			now = q.Until
		}
		for _, s := range srcs {
			to := s.index(now.Add(time.Nanosecond))
			for k := max(next[s.pod], s.index(q.Since)); k < to; k++ {
				if err := emit(platform.LogLine{At: s.at(k), Pod: s.pod, Container: q.App, Text: s.line(k)}); err != nil {
					return err
				}
			}
			next[s.pod] = max(next[s.pod], to)
		}
		// Wake when the next line is due.
		wait := followRecheck
		for _, s := range srcs {
			wait = min(wait, time.Until(s.at(next[s.pod])))
		}
		timer.Reset(max(wait, time.Millisecond))
	}
}

// followRecheck is how often a follow looks for new pods.
const followRecheck = 250 * time.Millisecond

var _ platform.LogReader = (*Platform)(nil)

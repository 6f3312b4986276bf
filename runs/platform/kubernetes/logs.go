package kubernetes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// Runtime logs (issue 39): an application's pods are those the driver
// labels with its service and the application component, as the
// environment's pod watch sees them (the watch hub's, shared with health:
// no list per read); each container's log comes from the API server's
// pod log endpoint (GET .../pods/POD/log with container, timestamps,
// previous, sinceTime, tailLines, limitBytes and follow), which the
// Studio's Role in each namespace allows (get on pods/log). A follow
// streams each running container, and starts streaming each container the
// pod watch shows running later: a new pod, or a container restarted.

// logLineMax bounds a line read from the API server; a longer one is cut
// there (the rest of it is skipped).
const logLineMax = 64 << 10

// appPods are app's pods in the environment's watched objects, by name.
func (p *Platform) appPods(ctx context.Context, env platform.Env, app string) ([]Object, bool, error) {
	ns := NamespaceName(env.Project, env.Name)
	if known, err := p.namespaceKnown(ctx, ns); err != nil || !known {
		return nil, false, err // !known: never deployed on this cluster
	}
	o, err := p.followNamespace(ctx, env, ns)
	if err != nil {
		return nil, false, err
	}
	p.health.mu.Lock()
	defer p.health.mu.Unlock()
	var pods []Object
	for _, pod := range o.objects[KindPod.Resource] {
		if l := labelsOf(pod); l[LabelService] == labelValue(app) && l[LabelComponent] == "application" {
			pods = append(pods, pod)
		}
	}
	slices.SortFunc(pods, func(a, b Object) int { return strings.Compare(str(a, "metadata", "name"), str(b, "metadata", "name")) })
	return pods, true, nil
}

// podContainers are a pod's containers as logs know them.
func podContainers(pod Object) []platform.LogContainer {
	name := str(pod, "metadata", "name")
	started, _ := time.Parse(time.RFC3339, str(pod, "status", "startTime"))
	status := map[string]Object{}
	for _, v := range list(pod, "status", "containerStatuses") {
		if cs, ok := v.(Object); ok {
			status[str(cs, "name")] = cs
		}
	}
	var out []platform.LogContainer
	for _, v := range list(pod, "spec", "containers") {
		c, _ := v.(Object)
		cn := str(c, "name")
		cs := status[cn]
		out = append(out, platform.LogContainer{Pod: name, Container: cn, Restarts: num(cs["restartCount"]),
			Running: at(cs, "state", "running") != nil, Started: started})
	}
	return out
}

// hasLog is whether container c of pod has a log to read now: it runs or
// ran (a container still waiting for its first start has none).
func hasLog(pod Object, container string, previous bool) bool {
	for _, v := range list(pod, "status", "containerStatuses") {
		cs, _ := v.(Object)
		if str(cs, "name") != container {
			continue
		}
		if previous {
			return num(cs["restartCount"]) > 0 || at(cs, "lastState", "terminated") != nil
		}
		return at(cs, "state", "running") != nil || at(cs, "state", "terminated") != nil || at(cs, "lastState", "terminated") != nil
	}
	return false
}

// LogContainers implements platform.LogReader.
func (p *Platform) LogContainers(ctx context.Context, env platform.Env, app string) ([]platform.LogContainer, error) {
	pods, _, err := p.appPods(ctx, env, app)
	if err != nil {
		return nil, err
	}
	out := []platform.LogContainer{}
	for _, pod := range pods {
		out = append(out, podContainers(pod)...)
	}
	return out, nil
}

// readContainerLog reads one container's log (streamed while follow),
// calling emit with each line after after (zero: every line), and returns
// the time of the last line it handed over.
func (p *Platform) readContainerLog(ctx context.Context, ns, pod, container string, q platform.LogQuery, follow bool, after time.Time, emit func(platform.LogLine) error) (time.Time, error) {
	v := url.Values{"container": {container}, "timestamps": {"true"}}
	if q.Previous {
		v.Set("previous", "true")
	}
	since := q.Since
	if after.After(since) {
		since = after
	}
	if !since.IsZero() {
		v.Set("sinceTime", since.UTC().Format(time.RFC3339))
	}
	if q.TailLines > 0 && after.IsZero() {
		v.Set("tailLines", fmt.Sprint(q.TailLines))
	}
	if q.LimitBytes > 0 && !follow {
		v.Set("limitBytes", fmt.Sprint(q.LimitBytes))
	}
	if follow {
		v.Set("follow", "true")
	}
	path := KindPod.path(ns, pod) + "/log?" + v.Encode()
	var resp *http.Response
	var err error
	if follow {
		// A follow's answer never ends while the container runs: one
		// request, without the client's retries (the follow loop starts
		// it again when the pod watch shows the container running).
		resp, err = p.Client.doOnce(ctx, http.MethodGet, path, "", nil)
	} else {
		resp, err = p.Client.do(ctx, http.MethodGet, path, "", nil)
	}
	if err != nil {
		return after, err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 32<<10)
	last := after
	for {
		line, err := readLine(r)
		if line != "" {
			at, text := splitTimestamp(line)
			if (after.IsZero() || at.After(after)) && (q.Until.IsZero() || at.Before(q.Until)) {
				if err := emit(platform.LogLine{At: at, Pod: pod, Container: container, Text: text}); err != nil {
					return last, err
				}
				last = at
			} else if !q.Until.IsZero() && !at.Before(q.Until) && !follow {
				return last, nil // past the window
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return last, nil
			}
			return last, err
		}
	}
}

// readLine reads one line without its newline, at most logLineMax bytes
// of it.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if len(b) < logLineMax {
			b = append(b, chunk[:min(len(chunk), logLineMax-len(b))]...)
		}
		if err != nil || !isPrefix {
			return string(b), err
		}
	}
}

// splitTimestamp splits a line written with timestamps=true into its time
// and its text.
func splitTimestamp(line string) (time.Time, string) {
	ts, text, ok := strings.Cut(line, " ")
	if !ok {
		ts, text = line, ""
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Now(), line
	}
	return at, text
}

// ReadLogs implements platform.LogReader through the pod log endpoint.
func (p *Platform) ReadLogs(ctx context.Context, env platform.Env, q platform.LogQuery, emit func(platform.LogLine) error) error {
	ns := NamespaceName(env.Project, env.Name)
	pods, deployed, err := p.appPods(ctx, env, q.App)
	if err != nil || !deployed {
		return err
	}
	var mu sync.Mutex
	safeEmit := func(l platform.LogLine) error {
		mu.Lock()
		defer mu.Unlock()
		return emit(l)
	}
	if !q.Follow || q.Previous {
		for _, pod := range pods {
			name := str(pod, "metadata", "name")
			for _, c := range podContainers(pod) {
				if !hasLog(pod, c.Container, q.Previous) {
					continue
				}
				if _, err := p.readContainerLog(ctx, ns, name, c.Container, q, false, time.Time{}, safeEmit); err != nil {
					var se *StatusError
					if errors.As(err, &se) && (se.Code == http.StatusBadRequest || se.Code == http.StatusNotFound) {
						continue // gone, or no previous container after all
					}
					return p.apiError("reading the log of pod "+name, err)
				}
			}
		}
		return nil
	}
	return p.followLogs(ctx, env, ns, q, safeEmit)
}

// followLogs streams every container of app's pods that runs, now and as
// the pod watch shows more (a new pod, a restarted container), until ctx
// ends or emit fails.
func (p *Platform) followLogs(ctx context.Context, env platform.Env, ns string, q platform.LogQuery, emit func(platform.LogLine) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	podEvents, unsubscribe := p.watches.subscribeBuffered(KindPod, ns, "", 64)
	defer unsubscribe()
	type stream struct {
		running bool
		last    time.Time
	}
	var mu sync.Mutex
	streams := map[string]*stream{} // "pod/container"
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func() error {
		pods, _, err := p.appPods(ctx, env, q.App)
		if err != nil {
			return err
		}
		for _, pod := range pods {
			name := str(pod, "metadata", "name")
			for _, c := range podContainers(pod) {
				if !c.Running {
					continue
				}
				key := name + "/" + c.Container
				mu.Lock()
				st := streams[key]
				if st == nil {
					st = &stream{}
					streams[key] = st
				}
				if st.running {
					mu.Unlock()
					continue
				}
				st.running = true
				after := st.last
				mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					last, err := p.readContainerLog(ctx, ns, name, c.Container, q, true, after, func(l platform.LogLine) error {
						if err := emit(l); err != nil {
							cancel(err)
							return err
						}
						return nil
					})
					mu.Lock()
					st.running, st.last = false, last
					mu.Unlock()
					if err != nil && ctx.Err() == nil {
						p.Opts.Logger.Info("logs: a container's follow ended", "namespace", ns, "pod", name, "container", c.Container, "error", err)
					}
				}()
			}
		}
		return nil
	}
	if err := start(); err != nil {
		return err
	}
	// The pod watch says when a pod starts or a container restarts: a
	// stream that ended (its container exited) is started again once the
	// watch shows the container running, resuming after its last line;
	// a slow tick catches what a full buffer dropped.
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case <-podEvents:
		case <-tick.C:
		}
		if err := start(); err != nil && ctx.Err() == nil {
			return err
		}
	}
}

var _ platform.LogReader = (*Platform)(nil)

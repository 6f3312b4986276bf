package kubernetes

// A rollout's pods, watched while it waits for its Deployment: a pod of
// the new revision that Kubernetes reports crash looping, killed for
// memory, unable to pull its image or unschedulable fails the rollout at
// once, with what Kubernetes said (ClassifyPod) and, for a container that
// ended, its last lines. A readiness probe that keeps failing is reported
// at the progress deadline, with the probe and its last failure: until
// then a slow start may still pass.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// rolloutLastLines is how many of a failed container's last lines a
// rollout's output shows.
const rolloutLastLines = 20

// rolloutSettle is how long a new container without a readiness probe
// must have run before its rollout counts as done: from its start, and
// from when the Studio first saw it running. The second bound covers the
// kubelet's lag: on a busy node it reports a start seconds late, and would
// report a crash just as late.
const rolloutSettle = 2 * time.Second

// probed is whether the Deployment's containers have a readiness or
// startup probe (else a started container is ready at once).
func probed(dep Object) bool {
	cs := list(dep, "spec", "template", "spec", "containers")
	for _, v := range cs {
		c, _ := v.(Object)
		if c["readinessProbe"] == nil && c["startupProbe"] == nil {
			return false
		}
	}
	return len(cs) > 0
}

// settle waits until every container of the new revision's pods has run
// for rolloutSettle, both by its start time and since the Studio first saw
// it running (so at most rolloutSettle from now); the pods' watch fails the
// rollout meanwhile (ctx ends) if one of them fails.
func (w *podWatch) settle(ctx context.Context) error {
	pods, err := w.p.Client.List(ctx, KindPod, w.namespace, w.selector())
	if err != nil {
		return nil
	}
	now := time.Now()
	w.sawRunning(pods, now)
	var until time.Time
	for _, pod := range pods {
		if !w.ours(ctx, pod) {
			continue
		}
		for _, v := range list(pod, "status", "containerStatuses") {
			cs, _ := v.(Object)
			running, _ := nested(cs, "state", "running")
			started := timeOf(running, "startedAt")
			if started.IsZero() {
				continue
			}
			w.mu.Lock()
			seen := w.seen[runningKey(pod, cs)]
			w.mu.Unlock()
			for _, t := range []time.Time{started, seen} {
				if t.Add(rolloutSettle).After(until) {
					until = t.Add(rolloutSettle)
				}
			}
		}
	}
	wait := min(until.Sub(now), rolloutSettle)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// PodFailure is a rollout failed by what one of its pods showed.
type PodFailure struct {
	App     string
	Problem platform.PodProblem
}

func (e *PodFailure) Error() string {
	return fmt.Sprintf("%s: pod %s, %s: %s", e.App, e.Problem.Pod, e.Problem.State, e.Problem.Reason)
}

// podWatch judges the pods of one Deployment's new revision.
type podWatch struct {
	p         *Platform
	namespace string
	app       string
	dep       string
	match     map[string]string // the Deployment's selector

	mu       sync.Mutex
	revision string               // the Deployment's, once it observed its generation
	rsRev    map[string]string    // ReplicaSet → its revision
	recheck  chan struct{}        // the revision became known
	seen     map[string]time.Time // a container's run (runningKey) → when first seen running
}

// runningKey names one run of a container of pod: a restart is another.
func runningKey(pod, cs Object) string {
	return str(pod, "metadata", "uid") + "/" + str(cs, "name") + "/" + str(cs, "state", "running", "startedAt")
}

// sawRunning notes when each running container of pods was first seen.
func (w *podWatch) sawRunning(pods []Object, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, pod := range pods {
		if pod["deleted"] == true {
			continue
		}
		for _, v := range list(pod, "status", "containerStatuses") {
			cs, _ := v.(Object)
			if running, _ := nested(cs, "state", "running"); running == nil {
				continue
			}
			if k := runningKey(pod, cs); w.seen[k].IsZero() {
				w.seen[k] = now
			}
		}
	}
}

func newPodWatch(p *Platform, namespace, app string, dep Object) *podWatch {
	w := &podWatch{p: p, namespace: namespace, app: app, dep: str(dep, "metadata", "name"), match: map[string]string{}, rsRev: map[string]string{}, recheck: make(chan struct{}, 1), seen: map[string]time.Time{}}
	sel, _ := nested(dep, "spec", "selector", "matchLabels")
	for k, v := range sel {
		w.match[k], _ = v.(string)
	}
	return w
}

// observed notes the Deployment's current revision, once its controller
// has seen its newest generation (before that its revision is the old
// one's).
func (w *podWatch) observed(dep Object) {
	md, _ := dep["metadata"].(Object)
	st, _ := dep["status"].(Object)
	if num(st["observedGeneration"]) < num(md["generation"]) {
		return
	}
	ann, _ := md["annotations"].(Object)
	rev, _ := ann["deployment.kubernetes.io/revision"].(string)
	w.mu.Lock()
	changed := rev != w.revision
	w.revision = rev
	w.mu.Unlock()
	if changed {
		// Pods seen before the revision was known are read again: one
		// that is not scheduled changes no more.
		select {
		case w.recheck <- struct{}{}:
		default:
		}
	}
}

func (w *podWatch) selector() string {
	var parts []string
	for k, v := range w.match {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// ours is whether pod belongs to the Deployment's new revision: its
// ReplicaSet is the Deployment's, of its current revision.
func (w *podWatch) ours(ctx context.Context, pod Object) bool {
	labels := labelsOf(pod)
	for k, v := range w.match {
		if labels[k] != v {
			return false
		}
	}
	rs := w.dep + "-" + labels["pod-template-hash"]
	owned := false
	for _, v := range list(pod, "metadata", "ownerReferences") {
		o, _ := v.(Object)
		if str(o, "kind") == "ReplicaSet" && str(o, "name") == rs {
			owned = true
		}
	}
	if !owned {
		return false
	}
	w.mu.Lock()
	want, got, known := w.revision, "", false
	if want != "" {
		got, known = w.rsRev[rs]
	}
	w.mu.Unlock()
	if want == "" {
		return false // not yet known which revision is new
	}
	if !known {
		o, err := w.p.Client.Get(ctx, KindReplicaSet, w.namespace, rs)
		if err != nil {
			return false
		}
		got = str(o, "metadata", "annotations", "deployment.kubernetes.io/revision")
		w.mu.Lock()
		w.rsRev[rs] = got
		w.mu.Unlock()
	}
	return got == want
}

// failing is the problem that fails the rollout at once in pod, if any.
func (w *podWatch) failing(ctx context.Context, pod Object) (platform.PodProblem, bool) {
	if pod["deleted"] == true {
		return platform.PodProblem{}, false
	}
	prob, ok := ClassifyPod(pod, nil)
	if !ok || !prob.State.Failing() || !w.ours(ctx, pod) {
		return platform.PodProblem{}, false
	}
	return prob, true
}

// run reads the namespace's pods from ch, and all of them again once the
// Deployment's new revision is known (observed), until
// one of the new revision fails the rollout (its problem) or ctx ends.
func (w *podWatch) run(ctx context.Context, ch <-chan Object) (platform.PodProblem, bool) {
	for {
		select {
		case <-ctx.Done():
			return platform.PodProblem{}, false
		case <-w.recheck:
			pods, err := w.p.Client.List(ctx, KindPod, w.namespace, w.selector())
			if err != nil {
				continue
			}
			w.sawRunning(pods, time.Now())
			for _, pod := range pods {
				if prob, ok := w.failing(ctx, pod); ok {
					return prob, true
				}
			}
		case pod := <-ch:
			w.sawRunning([]Object{pod}, time.Now())
			if prob, ok := w.failing(ctx, pod); ok {
				return prob, true
			}
		}
	}
}

// report writes the problem and, for a container that ended, its last
// lines to out (which masks them), and returns the rollout's error.
func (w *podWatch) report(ctx context.Context, prob platform.PodProblem, out platform.Output) error {
	if prob.Container != "" && (prob.State == platform.StateCrashLooping || prob.State == platform.StateOOMKilled) {
		// The container that ended is the previous one once it was
		// restarted, else still the current one.
		lines, err := w.p.ContainerLastLines(ctx, w.namespace, prob.Pod, prob.Container, true, rolloutLastLines)
		if err == nil && len(lines) == 0 {
			lines, err = w.p.ContainerLastLines(ctx, w.namespace, prob.Pod, prob.Container, false, rolloutLastLines)
		}
		if err == nil && len(lines) > 0 {
			prob.LastLines = lines
			out.Line(fmt.Sprintf("the last lines container %s of pod %s printed before it ended:", prob.Container, prob.Pod))
			for _, l := range lines {
				out.Line("  " + l)
			}
		}
	}
	err := &PodFailure{App: w.app, Problem: prob}
	out.Line(err.Error())
	return err
}

// atDeadline is what the new revision's pods show when the rollout's
// progress deadline passed: the first problem of any kind (a readiness
// probe failing, with its last failure), or "".
func (w *podWatch) atDeadline(ctx context.Context) string {
	pods, err := w.p.Client.List(ctx, KindPod, w.namespace, w.selector())
	if err != nil {
		return ""
	}
	events, _ := w.p.Client.List(ctx, KindEvent, w.namespace, "")
	sort.Slice(pods, func(i, j int) bool { return str(pods[i], "metadata", "name") < str(pods[j], "metadata", "name") })
	for _, pod := range pods {
		if !w.ours(ctx, pod) {
			continue
		}
		if prob, ok := ClassifyPod(pod, events); ok {
			return fmt.Sprintf("pod %s: %s", prob.Pod, prob.Reason)
		}
	}
	return ""
}

// IsPodFailure reports whether err is a rollout failed by a pod, and its
// problem.
func IsPodFailure(err error) (platform.PodProblem, bool) {
	var pf *PodFailure
	if errors.As(err, &pf) {
		return pf.Problem, true
	}
	return platform.PodProblem{}, false
}

package kubernetes

// What a pod's status says is wrong with it: the one place the driver
// reads a pod (and the kubelet's Warning events about it) as a
// platform.PodProblem. A rollout that fails fast and the health an
// environment's page shows both read pods through ClassifyPod.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// unboundClaims is what the scheduler says of a pod whose volume claim the
// cluster has not bound yet (its provisioner is still at work): no node is
// tried, and the pod is scheduled once the claim is bound.
const unboundClaims = "pod has unbound immediate PersistentVolumeClaims"

// ClassifyPod reads one pod as the problem it has, in the order that
// explains the most: not scheduled, an image that cannot be pulled, a
// container killed for memory, a container that exits and is restarted
// (a crash loop), a running container that fails its readiness probe. ok
// is false when nothing is wrong that its status shows: it runs and is
// ready, it is still being created or started, or it finished. events are
// the namespace's events (others than the pod's are ignored); the newest
// "Unhealthy" one about a container gives a readiness failure's last
// words and count. Every string is the platform's own; the caller masks
// values before showing or storing any of it.
func ClassifyPod(pod Object, events []Object) (problem platform.PodProblem, ok bool) {
	name := str(pod, "metadata", "name")
	if md, _ := pod["metadata"].(Object); md["deletionTimestamp"] != nil {
		return platform.PodProblem{}, false // leaving: its state is no longer the app's
	}
	if c, ok := conditionOf(pod, "PodScheduled"); ok && c.status == "False" && c.reason == "Unschedulable" {
		if strings.Contains(c.message, unboundClaims) {
			// Its volume's claim is not bound yet: the scheduler tries
			// again once it is, as for a pod still being created.
			return platform.PodProblem{}, false
		}
		return platform.PodProblem{
			State:  platform.StateUnschedulable,
			Pod:    name,
			Reason: "no node can run it: " + strings.TrimSpace(c.message),
			Since:  conditionTime(pod, "PodScheduled"),
		}, true
	}
	statuses := append(list(pod, "status", "initContainerStatuses"), list(pod, "status", "containerStatuses")...)
	var found []platform.PodProblem
	for _, v := range statuses {
		cs, _ := v.(Object)
		if p, ok := classifyContainer(pod, cs, events); ok {
			p.Pod = name
			found = append(found, p)
		}
	}
	best := -1
	for i, p := range found {
		if best < 0 || rank(p.State) < rank(found[best].State) {
			best = i
		}
	}
	if best < 0 {
		return platform.PodProblem{}, false
	}
	return found[best], true
}

// rank orders the states a pod can show at once: the one that explains
// the others first.
func rank(s platform.AppState) int {
	switch s {
	case platform.StateImagePull:
		return 0
	case platform.StateOOMKilled:
		return 1
	case platform.StateCrashLooping:
		return 2
	}
	return 3
}

// imagePullReasons are the kubelet's waiting reasons for an image it
// cannot have.
var imagePullReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
}

func classifyContainer(pod, cs Object, events []Object) (platform.PodProblem, bool) {
	cname, _ := cs["name"].(string)
	spec := containerSpec(pod, cname)
	restarts := num(cs["restartCount"])
	waiting, _ := nested(cs, "state", "waiting")
	running, _ := nested(cs, "state", "running")
	term, _ := nested(cs, "state", "terminated")
	last, _ := nested(cs, "lastState", "terminated")
	wreason, _ := waiting["reason"].(string)

	if imagePullReasons[wreason] {
		image, _ := spec["image"].(string)
		if image == "" {
			image, _ = cs["image"].(string)
		}
		msg := strings.TrimSpace(str(waiting, "message"))
		reason := fmt.Sprintf("image %s cannot be pulled (%s)", image, wreason)
		if msg != "" {
			reason = fmt.Sprintf("image %s cannot be pulled: %s", image, msg)
		}
		return platform.PodProblem{State: platform.StateImagePull, Container: cname, Image: image, Reason: reason, Count: restarts}, true
	}

	// The termination that says most: the current one, else the last.
	ended := term
	if ended == nil {
		ended = last
	}
	limit := str(spec, "resources", "limits", "memory")
	// The node does not always say a container was killed for memory: on
	// cgroup v1, containerd misses the kernel's OOM event now and then
	// (2 kills in 24 on the test node) and reports an Error with exit
	// code 137, SIGKILL's. With a memory limit that is the likely cause;
	// the reason says it was inferred.
	// A kubelet that kills a container for failing its liveness probe
	// says so in an event: that SIGKILL is not the limit's.
	unsaid := ended != nil && limit != "" && num(ended["exitCode"]) == 137 && (str(ended, "reason") == "Error" || str(ended, "reason") == "") &&
		!killedForLiveness(str(pod, "metadata", "name"), cname, events)
	if ended != nil && str(ended, "reason") == "OOMKilled" || unsaid {
		reason := fmt.Sprintf("container %s was killed for passing its memory limit", cname)
		switch {
		case unsaid:
			reason = fmt.Sprintf("container %s was killed (exit code 137, SIGKILL), most likely for passing its memory limit of %s: the node did not say why", cname, limitWords(limit))
		case limit != "":
			reason = fmt.Sprintf("container %s was killed for passing its memory limit of %s", cname, limitWords(limit))
		}
		if restarts > 0 {
			reason += fmt.Sprintf(" (restarted %s)", times(restarts))
		}
		return platform.PodProblem{State: platform.StateOOMKilled, Container: cname, Reason: reason, Limit: limit,
			ExitCode: exitCode(ended), Since: timeOf(ended, "finishedAt"), Count: max(restarts, 1)}, true
	}

	crashed := wreason == "CrashLoopBackOff" || wreason == "RunContainerError" ||
		(restarts > 0 && last != nil && num(last["exitCode"]) != 0) ||
		(term != nil && num(term["exitCode"]) != 0 && restartsAlways(pod, cname))
	if crashed {
		p := platform.PodProblem{State: platform.StateCrashLooping, Container: cname, Count: restarts}
		if ended != nil {
			p.ExitCode = exitCode(ended)
			p.Since = timeOf(ended, "finishedAt")
			p.Reason = fmt.Sprintf("container %s %s", cname, endedWords(ended))
		} else {
			p.Reason = fmt.Sprintf("container %s cannot start: %s", cname, strings.TrimSpace(str(waiting, "message")))
		}
		if restarts > 0 {
			p.Reason += fmt.Sprintf(", restarted %s", times(restarts))
		}
		return p, true
	}

	if running != nil && cs["ready"] != true {
		probe, _ := spec["readinessProbe"].(Object)
		if probe == nil || cs["started"] == false {
			return platform.PodProblem{}, false
		}
		p := platform.PodProblem{State: platform.StateNotReady, Container: cname, Since: timeOf(running, "startedAt")}
		p.Reason = fmt.Sprintf("container %s fails its readiness probe %s", cname, probeWords(probe))
		if ev := lastUnhealthy(str(pod, "metadata", "name"), cname, events); ev != nil {
			if msg := strings.TrimSpace(eventMessage(ev)); msg != "" {
				p.Reason += ": " + msg
			}
			p.Count = max(num(ev["count"]), num(str2(ev, "series", "count")), 1)
			if t := timeOf(ev, "firstTimestamp"); !t.IsZero() {
				p.Since = t
			}
		}
		return p, true
	}
	return platform.PodProblem{}, false
}

// limitWords says a memory limit as a manifest writes it: 32MB for the
// API server's 32M (or 32000000), 32MiB for 32Mi.
func limitWords(limit string) string {
	if b, err := strconv.ParseInt(limit, 10, 64); err == nil {
		return compiler.ByteSize(b).String()
	}
	for _, u := range []struct{ k8s, user string }{{"Ki", "KiB"}, {"Mi", "MiB"}, {"Gi", "GiB"}, {"Ti", "TiB"}, {"k", "KB"}, {"M", "MB"}, {"G", "GB"}, {"T", "TB"}} {
		if n, ok := strings.CutSuffix(limit, u.k8s); ok {
			if _, err := strconv.ParseInt(n, 10, 64); err == nil {
				return n + u.user
			}
		}
	}
	return limit
}

func str2(o Object, path ...string) any {
	var v any = o
	for _, k := range path {
		m, _ := v.(Object)
		v = m[k]
	}
	return v
}

func nested(o Object, path ...string) (Object, bool) {
	v, _ := str2(o, path...).(Object)
	return v, v != nil
}

func containerSpec(pod Object, name string) Object {
	for _, field := range []string{"containers", "initContainers"} {
		for _, v := range list(pod, "spec", field) {
			c, _ := v.(Object)
			if n, _ := c["name"].(string); n == name {
				return c
			}
		}
	}
	return Object{}
}

// restartsAlways is whether the kubelet starts the container again
// whenever it ends (an application's pod, not a Job's; no init
// container).
func restartsAlways(pod Object, container string) bool {
	if rp := str(pod, "spec", "restartPolicy"); rp != "" && rp != "Always" {
		return false
	}
	for _, v := range list(pod, "spec", "initContainers") {
		c, _ := v.(Object)
		if n, _ := c["name"].(string); n == container {
			return false
		}
	}
	return true
}

func exitCode(term Object) *int {
	if _, ok := term["exitCode"]; !ok {
		return nil
	}
	c := num(term["exitCode"])
	return &c
}

// endedWords is how a container ended: its exit code, signal and the
// kubelet's reason when it is not the plain "Error".
func endedWords(term Object) string {
	s := fmt.Sprintf("exited with code %d", num(term["exitCode"]))
	if sig := num(term["signal"]); sig != 0 {
		s += fmt.Sprintf(" (signal %d)", sig)
	}
	if r := str(term, "reason"); r != "" && r != "Error" && r != "Completed" {
		s += " (" + r + ")"
	}
	if m := strings.TrimSpace(str(term, "message")); m != "" {
		s += ": " + m
	}
	return s
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// probeWords names a probe as a user wrote it: GET /path on port 8080,
// TCP port 5432, or the command.
func probeWords(probe Object) string {
	if h, ok := nested(probe, "httpGet"); ok {
		path := str(h, "path")
		if path == "" {
			path = "/"
		}
		return fmt.Sprintf("GET %s on port %v", path, portWords(h["port"]))
	}
	if t, ok := nested(probe, "tcpSocket"); ok {
		return fmt.Sprintf("TCP port %v", portWords(t["port"]))
	}
	if g, ok := nested(probe, "grpc"); ok {
		return fmt.Sprintf("gRPC port %v", portWords(g["port"]))
	}
	if e, ok := nested(probe, "exec"); ok {
		var args []string
		for _, a := range list(e, "command") {
			s, _ := a.(string)
			args = append(args, s)
		}
		return "command " + strings.Join(args, " ")
	}
	return ""
}

func portWords(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprint(int(f))
	}
	return fmt.Sprint(v)
}

// lastUnhealthy is the newest Warning event "Unhealthy" about the pod's
// container that says a readiness probe failed.
func lastUnhealthy(pod, container string, events []Object) Object {
	var best Object
	var bestAt time.Time
	for _, ev := range containerEvents(pod, container, "Unhealthy", events) {
		if !strings.HasPrefix(eventMessage(ev), "Readiness probe") {
			continue
		}
		at := eventTime(ev)
		if best == nil || !at.Before(bestAt) {
			best, bestAt = ev, at
		}
	}
	return best
}

// containerEvents are the events of reason about the container of pod (or
// about the pod as a whole).
func containerEvents(pod, container, reason string, events []Object) []Object {
	var out []Object
	for _, ev := range events {
		obj, _ := nested(ev, "involvedObject")
		if obj == nil {
			obj, _ = nested(ev, "regarding")
		}
		if str(obj, "name") != pod || str(ev, "reason") != reason {
			continue
		}
		if fp := str(obj, "fieldPath"); fp != "" && fp != "spec.containers{"+container+"}" {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// killedForLiveness reports whether an event says the kubelet killed the
// container for failing its liveness probe.
func killedForLiveness(pod, container string, events []Object) bool {
	for _, ev := range containerEvents(pod, container, "Killing", events) {
		if strings.Contains(eventMessage(ev), "liveness probe") {
			return true
		}
	}
	return false
}

func eventMessage(ev Object) string {
	if m := str(ev, "message"); m != "" {
		return m
	}
	return str(ev, "note")
}

func eventTime(ev Object) time.Time {
	for _, k := range []string{"lastTimestamp", "eventTime", "firstTimestamp"} {
		if t := timeOf(ev, k); !t.IsZero() {
			return t
		}
	}
	md, _ := ev["metadata"].(Object)
	return timeOf(md, "creationTimestamp")
}

func timeOf(o Object, key string) time.Time {
	s, _ := o[key].(string)
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func conditionTime(o Object, typ string) time.Time {
	for _, v := range list(o, "status", "conditions") {
		c, _ := v.(Object)
		if str(c, "type") == typ {
			return timeOf(c, "lastTransitionTime")
		}
	}
	return time.Time{}
}

// Bounds of the lines a failing container's log gives its problem.
const (
	lastLinesMax   = 50
	lastLinesBytes = 16 << 10
)

// ContainerLastLines returns the last n lines (at most lastLinesMax, of at
// most lastLinesBytes in all) a pod's container printed: of the container
// that ended before the current one when previous (a crash loop's), else
// of the current one. It returns nothing and no error when the cluster
// keeps no log (simulated nodes). The lines are the application's own:
// the caller masks them.
func (p *Platform) ContainerLastLines(ctx context.Context, namespace, pod, container string, previous bool, n int) ([]string, error) {
	n = min(max(n, 1), lastLinesMax)
	q := url.Values{"tailLines": {fmt.Sprint(n)}, "limitBytes": {fmt.Sprint(lastLinesBytes)}}
	if container != "" {
		q.Set("container", container)
	}
	if previous {
		q.Set("previous", "true")
	}
	resp, err := p.Client.do(ctx, http.MethodGet, KindPod.path(namespace, pod)+"/log?"+q.Encode(), "", nil)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) && (se.Code == http.StatusBadRequest || se.Code == http.StatusNotFound) {
			return nil, nil // no such container (yet), or no log kept
		}
		return nil, err
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4<<10), lastLinesBytes)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, sc.Err()
}

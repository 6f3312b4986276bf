package kubernetes_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

// TestLogContainersAreTheApplicationsPodsFromTheSharedWatch deploys on the
// kwok cluster as the Studio's own account (its least-privilege Role) and
// lists web's containers: exactly the pods of its Deployment, each with
// its container, read from the environment's pod watch (a second listing
// costs no request). kwok's nodes keep no logs, so reading them is left
// to the real-node test.
func TestLogContainersAreTheApplicationsPodsFromTheSharedWatch(t *testing.T) {
	t.Parallel()
	f := asStudioAccount(t, rollingManifest, "logs-containers", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	env := platform.Env{ID: f.env.ID, Project: f.env.Project, Name: f.env.Name}
	var cs []platform.LogContainer
	eventually(t, "web's two pods to be listed", func() bool {
		var err error
		cs, err = f.platform.LogContainers(f.ctx, env, "web")
		if err != nil {
			t.Fatalf("LogContainers: %v", err)
		}
		return len(cs) == 2
	})
	pods, err := f.client.List(f.ctx, kubernetes.KindPod, f.ns, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		md, _ := p["metadata"].(kubernetes.Object)
		if n, _ := md["name"].(string); strings.HasPrefix(n, "web-") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for i, c := range cs {
		if i >= len(names) || c.Pod != names[i] || c.Container != "web" {
			t.Errorf("container %d = %s/%s, want a container web of the pods %v", i, c.Pod, c.Container, names)
		}
	}
	before := f.platform.Client.Requests.Load()
	if _, err := f.platform.LogContainers(f.ctx, env, "web"); err != nil {
		t.Fatal(err)
	}
	if n := f.platform.Client.Requests.Load() - before; n != 0 {
		t.Errorf("listing the containers again made %d API requests, want none (the pod watch knows them)", n)
	}
	if cs, err := f.platform.LogContainers(f.ctx, env, "nope"); err != nil || len(cs) != 0 {
		t.Errorf("an application that does not exist has containers %v (%v)", cs, err)
	}
}

// TestRealPodsRestartedContainerPreviousLogIsRead: on a real node, as the
// Studio's own account, a crash-looping application's container prints a
// line with a value and one on stderr, exits 2 and is restarted; its
// previous container's log is read through the pod log endpoint (both
// lines, with their times), and so is the current one's.
func TestRealPodsRestartedContainerPreviousLogIsRead(t *testing.T) {
	cluster := clustertest.StartReal(t)
	applyStudioRole(t, cluster)
	f := newFixtureOn(t, cluster, studioAccount, realManifest("logs", `      TESTAPP_STDOUT: "connecting with ${SESSION_SECRET}"
      TESTAPP_STDERR: "cannot open the config"
    command: ["/testapp", "exit", "--code", "2"]
`), "logs-previous", map[string]string{"SESSION_SECRET": secretValue})
	// The deploy's outcome is not what this test reads: without a
	// readiness probe a container counts as ready while it runs, and one
	// that exits at once is seen ready for a moment now and then (the
	// rollout then succeeds before the crash loop is reported; see
	// TestRealPodCrashLoopFailsTheRolloutWithItsExitCodeAndLastLines for
	// the failure). What follows needs only the restarted container.
	if run := f.deploy(); run.Status != store.RunFailed {
		t.Logf("the deploy %s before the crash loop was reported (%s)", run.Status, run.Reason)
	}
	env := platform.Env{ID: f.env.ID, Project: f.env.Project, Name: f.env.Name}

	var restarted platform.LogContainer
	eventually(t, "a container of web to be restarted", func() bool {
		cs, err := f.platform.LogContainers(f.ctx, env, "web")
		if err != nil {
			t.Fatalf("LogContainers: %v", err)
		}
		for _, c := range cs {
			if c.Restarts > 0 {
				restarted = c
				return true
			}
		}
		return false
	})
	read := func(previous bool) []platform.LogLine {
		t.Helper()
		ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
		defer cancel()
		var lines []platform.LogLine
		err := f.platform.ReadLogs(ctx, env, platform.LogQuery{App: "web", Previous: previous, TailLines: 100, LimitBytes: 1 << 20}, func(l platform.LogLine) error {
			if l.Pod == restarted.Pod {
				lines = append(lines, l)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("ReadLogs(previous %v): %v", previous, err)
		}
		return lines
	}
	texts := func(lines []platform.LogLine) []string {
		var out []string
		for _, l := range lines {
			out = append(out, strings.ReplaceAll(l.Text, secretValue, "<the value>"))
		}
		return out
	}
	complete := func(lines []platform.LogLine) bool {
		ts := texts(lines)
		return slices.Contains(ts, "connecting with <the value>") && slices.Contains(ts, "cannot open the config")
	}
	check := func(what string, lines []platform.LogLine) {
		t.Helper()
		for _, l := range lines {
			if l.At.IsZero() || time.Since(l.At) > 10*time.Minute || l.Container != "web" {
				t.Errorf("%s: a line at %v of container %q, want a recent time of container web", what, l.At, l.Container)
			}
		}
		if !complete(lines) {
			t.Errorf("%s of %s reads %q, want its stdout line (with the value) and its stderr line", what, restarted.Pod, texts(lines))
		}
	}
	// The kubelet may answer for a moment around a restart that it
	// cannot retrieve the previous container (its status is being
	// replaced): read until the log is there, a minute at most.
	var prev []platform.LogLine
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if prev = read(true); complete(prev) || time.Now().After(deadline) {
			break
		}
		t.Logf("the previous container's log reads %q; reading again", texts(prev))
	}
	check("the previous container's log", prev)
	// The current container printed the same, or has not started yet
	// (back-off): its log, when there is one, is read as well.
	if cur := read(false); len(cur) > 0 {
		check("the current container's log", cur)
	}
}

// TestRealPodsFollowedLogJoinsTheNextRevisionsPod: on a real node, as the
// Studio's own account, a follow of web's log hands over what its pod
// printed at start, then, after a deploy of a new revision replaces the
// pod, what the new pod prints: a pod that starts during a follow joins it.
func TestRealPodsFollowedLogJoinsTheNextRevisionsPod(t *testing.T) {
	cluster := clustertest.StartReal(t)
	applyStudioRole(t, cluster)
	m := realManifest("follow", `      TESTAPP_SAY: "one"
      TESTAPP_STDOUT: "connecting with ${SESSION_SECRET}"
    command: ["/testapp", "serve"]
`)
	f := newFixtureOn(t, cluster, studioAccount, m, "logs-follow", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	env := platform.Env{ID: f.env.ID, Project: f.env.Project, Name: f.env.Name}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	lines := make(chan platform.LogLine, 1000)
	done := make(chan error, 1)
	go func() {
		done <- f.platform.ReadLogs(ctx, env, platform.LogQuery{App: "web", TailLines: 20, Follow: true}, func(l platform.LogLine) error {
			lines <- l
			return nil
		})
	}()
	var seen []string
	wait := func(what string, ok func(platform.LogLine) bool) platform.LogLine {
		t.Helper()
		timeout := time.After(90 * time.Second)
		for {
			select {
			case l := <-lines:
				seen = append(seen, l.Pod+": "+strings.ReplaceAll(l.Text, secretValue, "<the value>"))
				if ok(l) {
					return l
				}
			case err := <-done:
				t.Fatalf("the follow ended (%v) before %s; it handed over %q", err, what, seen)
			case <-timeout:
				t.Fatalf("no %s within 90s; the follow handed over %q", what, seen)
			}
		}
	}
	first := wait("start line of the first pod", func(l platform.LogLine) bool { return l.Text == "connecting with "+secretValue })
	f.addRevision(strings.Replace(m, `TESTAPP_SAY: "one"`, `TESTAPP_SAY: "two"`, 1))
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("second deploy %s: %s", run.Status, run.Reason)
	}
	next := wait("line of the new revision's pod", func(l platform.LogLine) bool {
		return l.Pod != first.Pod && strings.HasPrefix(l.Text, "testapp: serving on")
	})
	if !next.At.After(first.At) {
		t.Errorf("the new pod's line is dated %v, before the first pod's %v", next.At, first.At)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("a follow ended by its context returned %v, want nil", err)
	}
}

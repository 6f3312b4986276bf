package kubernetes_test

// Runs on real pods (clustertest.StartReal: containerd, a kubelet and
// kube-proxy, the test application's image): only what needs a running
// container — a crash with its output, a kill for memory, an image pull,
// the scheduler's refusal, a readiness probe answered by the process, a
// release command's own output and exit code. They skip where a real node
// cannot run (not root), and fail with CI=true.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

const testApp = "registry.local/skali/testapp:latest"

// realManifest is one application of the test application's image, with
// the given lines added to it (command, environment, health, resources).
func realManifest(name, extra string) string {
	return fmt.Sprintf(`name: %s
applications:
  web:
    image: %s
    environment:
      SESSION_SECRET: "${SESSION_SECRET}"
%s    ports:
      http:
        port: 8080
    deployment:
      rollout:
        strategy: rolling
        timeout: 3m
`, name, testApp, extra)
}

func newRealFixture(t *testing.T, manifest, envName string) *fixture {
	t.Helper()
	return newFixtureOn(t, clustertest.StartReal(t), "", manifest, envName, map[string]string{"SESSION_SECRET": secretValue})
}

// stepLog is the stored log of the run (what its page shows), masked.
func (f *fixture) stepLog(run *store.Run) string {
	f.t.Helper()
	return f.runLog(run, `text`)
}

// stepLogAt is the stored log of the run with each line's time (what a
// failure message shows).
func (f *fixture) stepLogAt(run *store.Run) string {
	f.t.Helper()
	return f.runLog(run, `to_char(at AT TIME ZONE 'UTC', 'HH24:MI:SS.MS') || ' ' || text`)
}

// runLog is the run's stored log lines, each as line (an SQL expression
// of run_log_lines' columns).
func (f *fixture) runLog(run *store.Run, line string) string {
	f.t.Helper()
	rows, err := f.db.Pool.Query(f.ctx, `SELECT `+line+` FROM run_log_lines WHERE run_id = $1 ORDER BY position, n`, run.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		b.WriteString(s + "\n")
	}
	return b.String()
}

// deployFails deploys, and checks the run failed well before the
// rollout's 3-minute deadline with a reason holding each of want.
func (f *fixture) deployFails(within time.Duration, want ...string) *store.Run {
	f.t.Helper()
	started := time.Now()
	run := f.deploy()
	took := time.Since(started)
	if run.Status != store.RunFailed {
		f.t.Logf("the deploy started at %s; its log:\n%s", started.UTC().Format("15:04:05.000"), f.stepLogAt(run))
		time.Sleep(3 * time.Second)
		f.t.Logf("its pods 3 s later:\n%s", f.podStates())
		f.t.Fatalf("deploy %s: %s, want failed", run.Status, run.Reason)
	}
	f.t.Logf("failed in %s: %s", took.Round(100*time.Millisecond), run.Reason)
	if took > within {
		f.t.Errorf("the deploy failed after %s, want within %s of Kubernetes reporting it", took.Round(time.Second), within)
	}
	for _, w := range want {
		if !strings.Contains(run.Reason, w) {
			f.t.Errorf("reason %q lacks %q", run.Reason, w)
		}
	}
	f.checkNoPlaintext()
	return run
}

// podStates is each pod of the fixture's namespace with its containers'
// states, last states and restart counts (what a failure message shows).
func (f *fixture) podStates() string {
	pods, err := f.client.List(f.ctx, kubernetes.KindPod, f.ns, "")
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, pod := range pods {
		fmt.Fprintf(&b, "%s created %v phase %v\n", str(pod, "metadata", "name"), at(pod, "metadata", "creationTimestamp"), at(pod, "status", "phase"))
		css, _ := at(pod, "status", "containerStatuses").([]any)
		for _, cs := range css {
			fmt.Fprintf(&b, "  %v restarts %v state %v last %v\n", at(cs, "name"), at(cs, "restartCount"), at(cs, "state"), at(cs, "lastState"))
		}
	}
	return b.String()
}

// The container exits at once. It has a readiness probe: without one, a
// container counts as ready once it started, and a busy kubelet that saw
// it running can report its end later than the 2 s the rollout waits then
// (rolloutSettle): it did once with three test packages and the cluster
// on two cores, and the deploy succeeded. With the probe, the rollout can
// end only by what the kubelet reports of the crashes, however late.
func TestRealPodCrashLoopFailsTheRolloutWithItsExitCodeAndLastLines(t *testing.T) {
	f := newRealFixture(t, realManifest("crash", `      TESTAPP_STDOUT: "connecting with ${SESSION_SECRET}"
      TESTAPP_STDERR: "cannot open the config"
    command: ["/testapp", "exit", "--code", "2"]
    health:
      readiness:
        http:
          port: http
          path: /readyz
`), "crashloop")
	run := f.deployFails(90*time.Second, "crash looping", "exited with code 2", "web: pod web-")
	log := f.stepLog(run)
	if !strings.Contains(log, "cannot open the config") {
		t.Errorf("the step's log lacks the container's last lines:\n%s", log)
	}
	// The value the app printed is in the log masked.
	if !strings.Contains(log, "connecting with ") {
		t.Errorf("the step's log lacks the line that printed the value:\n%s", log)
	}
}

// The container has a readiness probe it never answers (allocate serves
// nothing): the rollout can only end by the kill being reported, however
// late a busy kubelet reports it. Without a probe, a container counts as
// settled after running 2 s (rolloutSettle), and on two busy cores the
// kubelet reported this kill up to 1.7 s after the start, once more than
// 2 s (CI).
func TestRealPodPastItsMemoryLimitFailsTheRolloutWithTheLimit(t *testing.T) {
	f := newRealFixture(t, realManifest("oom", `    command: ["/testapp", "allocate", "--mib", "96"]
    resources:
      limits:
        memory: 32MB
    health:
      readiness:
        http:
          port: http
          path: /readyz
`), "oomkilled")
	f.deployFails(90*time.Second, "killed for memory", "memory limit of 32MB")
}

func TestRealPodWhoseImageCannotBePulledFailsTheRollout(t *testing.T) {
	f := newRealFixture(t, strings.Replace(realManifest("nope", ""), testApp, "registry.local/skali/nope:1", 1), "imagepull")
	f.deployFails(90*time.Second, "image cannot be pulled", "registry.local/skali/nope:1", "not found")
}

func TestRealPodThatNoNodeCanRunFailsTheRolloutWithTheSchedulersMessage(t *testing.T) {
	f := newRealFixture(t, realManifest("big", `    resources:
      requests:
        cpu: 64
`), "unschedulable")
	f.deployFails(60*time.Second, "waiting for room", "Insufficient cpu")
}

// The deadline's verdict is the cluster's (its progress deadline, 15 s)
// or, when a busy controller is later than the step's own 20 s, the
// Studio's: either way the reason says which probe fails and how.
func TestRealPodNeverReadyFailsAtTheDeadlineWithItsProbe(t *testing.T) {
	m := strings.Replace(realManifest("never", `    command: ["/testapp", "serve", "--never-ready"]
    health:
      readiness:
        http:
          port: http
          path: /readyz
`), "timeout: 3m", "timeout: 20s", 1)
	f := newRealFixture(t, m, "neverready")
	run := f.deployFails(90*time.Second, "fails its readiness probe GET /readyz on port 8080", "statuscode: 503")
	if !strings.Contains(run.Reason, "has timed out progressing") && !strings.Contains(run.Reason, "did not become ready within its rollout timeout of 20s") {
		t.Errorf("reason %q names neither deadline", run.Reason)
	}
}

func TestRealReleaseCommandThatExits3LogsItsOutputAndCode(t *testing.T) {
	m := realManifest("release", `      TESTAPP_STDOUT: "migrating to 7 as ${SESSION_SECRET}"
      TESTAPP_STDERR: "error: column note is missing"
    command: ["/testapp", "serve"]
`)
	m = strings.Replace(m, "    deployment:\n", "    deployment:\n      releaseCommand:\n        command: [\"/testapp\", \"exit\", \"--code\", \"3\"]\n        timeout: 1m\n", 1)
	f := newRealFixture(t, m, "release-exit3")
	run := f.deployFails(90*time.Second, "the command exited with code 3")
	log := f.stepLog(run)
	for _, want := range []string{"migrating to 7 as ", "error: column note is missing"} {
		if !strings.Contains(log, want) {
			t.Errorf("the release step's log lacks %q:\n%s", want, log)
		}
	}
	if deps, _ := f.client.List(f.ctx, kubernetes.KindDeployment, f.ns, ""); len(deps) != 0 {
		t.Errorf("the rollout started after a failed release command")
	}
}

func TestRealRollingUpdateWithReadinessProbesServesTheNewVersion(t *testing.T) {
	m := realManifest("rolling", `      TESTAPP_SAY: "one"
    command: ["/testapp", "serve", "--ready-after", "1s"]
    health:
      readiness:
        http:
          port: http
          path: /readyz
    scaling:
      replicas:
        min: 2
        max: 2
`)
	f := newRealFixture(t, m, "rolling")
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	f.addRevision(strings.Replace(m, `TESTAPP_SAY: "one"`, `TESTAPP_SAY: "two"`, 1))
	started := time.Now()
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("second deploy %s: %s", run.Status, run.Reason)
	}
	t.Logf("the rolling update succeeded in %s", time.Since(started).Round(100*time.Millisecond))
	dep := f.get(kubernetes.KindDeployment, "web")
	if str(dep, "status", "readyReplicas") != "2" || str(dep, "status", "updatedReplicas") != "2" {
		t.Fatalf("status %v", at(dep, "status"))
	}
	pods, err := f.client.List(f.ctx, kubernetes.KindPod, f.ns, kubernetes.LabelComponent+"=application")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if at(p, "metadata", "deletionTimestamp") != nil {
			continue
		}
		if env := str(p, "spec", "containers", 0, "env"); !strings.Contains(env, "two") {
			t.Errorf("pod %s still runs the old version", str(p, "metadata", "name"))
		}
	}
}

// TestRealBlueGreenSwitchIsSeenThroughTheService asks the Service (its
// ClusterIP, from the host, a new connection each time) throughout a
// blue-green deploy: the old version answers until the switch, then only
// the new one.
func TestRealBlueGreenSwitchIsSeenThroughTheService(t *testing.T) {
	m := strings.Replace(realManifest("bluegreen", `      TESTAPP_SAY: "one"
    command: ["/testapp", "serve", "--ready-after", "2s"]
    health:
      readiness:
        http:
          port: http
          path: /readyz
`), "        strategy: rolling\n", "        strategy: blue-green\n", 1)
	f := newRealFixture(t, m, "bluegreen")
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	ip := str(f.get(kubernetes.KindService, "web"), "spec", "clusterIP")
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ask := func() string {
		resp, err := client.Get("http://" + ip + ":8080/")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if w := strings.Fields(string(b)); resp.StatusCode == http.StatusOK && len(w) > 0 {
			return w[0]
		}
		return ""
	}
	deadline := time.Now().Add(30 * time.Second)
	for ask() != "one" {
		if time.Now().After(deadline) {
			t.Fatal("the first version never answered through the Service")
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.addRevision(strings.Replace(m, `TESTAPP_SAY: "one"`, `TESTAPP_SAY: "two"`, 1))
	done := make(chan *store.Run, 1)
	go func() { done <- f.deploy() }()
	var seen []string
	var run *store.Run
	for run == nil {
		select {
		case run = <-done:
		default:
		}
		if a := ask(); a != "" && (len(seen) == 0 || seen[len(seen)-1] != a) {
			seen = append(seen, a)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if run.Status != store.RunSucceeded {
		t.Fatalf("second deploy %s: %s", run.Status, run.Reason)
	}
	deadline = time.Now().Add(15 * time.Second)
	for ask() != "two" {
		if time.Now().After(deadline) {
			t.Fatalf("after the switch the Service does not answer two (answers seen: %v)", seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; i < 20; i++ {
		if a := ask(); a != "" && a != "two" {
			t.Fatalf("after the switch the Service answered %q", a)
		}
	}
	t.Logf("answers through the Service during the deploy, in order: %v", seen)
	if len(seen) == 0 || len(seen) > 2 || seen[0] != "one" {
		t.Fatalf("answers in order %v: want the old version until the switch, then only the new one", seen)
	}
}

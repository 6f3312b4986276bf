package local

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// readAll reads q's lines (without follow).
func readAll(t *testing.T, l *Platform, env platform.Env, q platform.LogQuery) []platform.LogLine {
	t.Helper()
	var out []platform.LogLine
	if err := l.ReadLogs(context.Background(), env, q, func(line platform.LogLine) error {
		out = append(out, line)
		return nil
	}); err != nil {
		t.Fatalf("read %+v: %v", q, err)
	}
	return out
}

// TestSimulatedApplicationsPrintTheirRuntimeLogs: once rolled out, each
// replica of an application is a pod whose container prints a line every
// LogEvery, among them the lines the fault file scripts (values in their
// encodings); a crash-looping application's previous container printed
// its last lines and its exit code; a tail, a window and a byte bound
// hold; and a follow hands over new lines as they are printed, and the
// pods of a new rollout as they start.
func TestSimulatedApplicationsPrintTheirRuntimeLogs(t *testing.T) {
	const every = 20 * time.Millisecond
	const secret = "s3cr3t-Runtime-Value"
	faults := &Faults{Output: map[string]map[string][]string{OutputRuntime: {"web": {
		"connecting with password ${DB_PASSWORD}", "auth header ${DB_PASSWORD|base64}",
	}}}}
	l := &Platform{LogEvery: every, Faults: faults}
	env := platform.Env{ID: 7, Project: "p", Name: "production"}
	ctx := context.Background()

	if cs, err := l.LogContainers(ctx, env, "web"); err != nil || len(cs) != 0 {
		t.Fatalf("before any rollout web has containers %+v (%v), want none", cs, err)
	}
	if err := l.SetValues(ctx, env, map[string]string{"DB_PASSWORD": secret}); err != nil {
		t.Fatal(err)
	}
	app := &compiler.Application{Scaling: compiler.Scaling{Min: 2}}
	if err := l.Rollout(ctx, env, "web", app, Discard()); err != nil {
		t.Fatal(err)
	}
	cs, err := l.LogContainers(ctx, env, "web")
	if err != nil || len(cs) != 2 || cs[0].Pod != "web-0" || cs[1].Pod != "web-1" || cs[0].Container != "web" || !cs[0].Running || cs[0].Restarts != 0 {
		t.Fatalf("web's containers = %+v (%v), want web-0 and web-1 running, not restarted", cs, err)
	}

	// Wait until each container printed at least 12 lines.
	deadline := time.Now().Add(10 * time.Second)
	var lines []platform.LogLine
	for {
		lines = readAll(t, l, env, platform.LogQuery{App: "web"})
		if len(lines) >= 24 || time.Now().After(deadline) {
			break
		}
		time.Sleep(every)
	}
	if len(lines) < 24 {
		t.Fatalf("web printed %d lines in 10s, want at least 24 at one every %v per pod", len(lines), every)
	}
	byPod := map[string][]platform.LogLine{}
	for _, line := range lines {
		byPod[line.Pod] = append(byPod[line.Pod], line)
	}
	for _, pod := range []string{"web-0", "web-1"} {
		pl := byPod[pod]
		if len(pl) < 12 || !strings.HasPrefix(pl[0].Text, "Starting web in pod "+pod) {
			t.Fatalf("%s printed %d lines starting %q, want its start line first", pod, len(pl), pl[0].Text)
		}
		for i := 1; i < len(pl); i++ {
			if !pl[i].At.After(pl[i-1].At) {
				t.Fatalf("%s's lines are out of order: %v then %v", pod, pl[i-1].At, pl[i].At)
			}
		}
		joined := fmt.Sprint(pl)
		if !strings.Contains(joined, "connecting with password "+secret) || !strings.Contains(joined, "auth header "+base64.StdEncoding.EncodeToString([]byte(secret))) {
			t.Errorf("%s never printed its scripted lines with the value (plain and base64)", pod)
		}
	}

	// Tail, window and bytes.
	if got := readAll(t, l, env, platform.LogQuery{App: "web", TailLines: 3}); len(got) != 6 {
		t.Errorf("3 lines of tail of 2 containers: %d lines", len(got))
	}
	p0 := byPod["web-0"]
	since, until := p0[3].At, p0[7].At
	for _, line := range readAll(t, l, env, platform.LogQuery{App: "web", Since: since, Until: until}) {
		if line.At.Before(since) || !line.At.Before(until) {
			t.Errorf("a line at %v is outside the window [%v, %v)", line.At, since, until)
		}
	}
	if got := readAll(t, l, env, platform.LogQuery{App: "web", Since: since, Until: until}); len(got) != 8 {
		t.Errorf("the window of 4 lines per pod holds %d lines, want 8", len(got))
	}
	bytes := map[string]int{}
	for _, line := range readAll(t, l, env, platform.LogQuery{App: "web", LimitBytes: 100}) {
		bytes[line.Pod] += len(line.Text) + 1
	}
	if bytes["web-0"] == 0 || bytes["web-0"] > 100 || bytes["web-1"] > 100 {
		t.Errorf("a bound of 100 bytes per container read %v bytes", bytes)
	}

	// No previous container until one restarted.
	if got := readAll(t, l, env, platform.LogQuery{App: "web", Previous: true}); len(got) != 0 {
		t.Errorf("web never restarted, yet its previous log has %d lines", len(got))
	}
	code := 3
	faults.Set(func(f *Faults) {
		f.Runtime = map[string]*RuntimeFault{"web": {State: platform.StateCrashLooping, Restarts: 2, ExitCode: &code, Lines: []string{"panic: lost ${DB_PASSWORD}"}}}
	})
	cs, _ = l.LogContainers(ctx, env, "web")
	if cs[0].Restarts != 2 {
		t.Errorf("web-0 restarted %d times, want 2", cs[0].Restarts)
	}
	prev := readAll(t, l, env, platform.LogQuery{App: "web", Previous: true})
	if len(prev) != 2*(prevLines+2) {
		t.Fatalf("the previous containers printed %d lines, want %d", len(prev), 2*(prevLines+2))
	}
	last := prev[prevLines+1]
	if last.Pod != "web-0" || last.Text != "web exited with code 3" || prev[prevLines].Text != "panic: lost "+secret {
		t.Errorf("web-0's previous container ends %q, %q; want its fault's line and its exit code", prev[prevLines].Text, last.Text)
	}
	if !last.At.Before(cs[0].Started) {
		t.Errorf("the previous container's last line (%v) is after the current one started (%v)", last.At, cs[0].Started)
	}

	// Follow: new lines as they come, then a new rollout's pods.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan platform.LogLine, 1000)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- l.ReadLogs(fctx, env, platform.LogQuery{App: "web", TailLines: 1, Follow: true}, func(line platform.LogLine) error {
			got <- line
			return nil
		})
	}()
	waitLine := func(what string, ok func(platform.LogLine) bool) platform.LogLine {
		t.Helper()
		timeout := time.After(10 * time.Second)
		var seen []string
		for {
			select {
			case line := <-got:
				if ok(line) {
					return line
				}
				seen = append(seen, line.Pod+" "+line.Text)
			case <-timeout:
				t.Fatalf("no %s within 10s; saw %d lines: %q", what, len(seen), seen[max(0, len(seen)-5):])
			}
		}
	}
	waitLine("line printed after the follow began", func(line platform.LogLine) bool { return line.At.After(start) })
	if err := l.Rollout(ctx, env, "web", &compiler.Application{Scaling: compiler.Scaling{Min: 3}}, Discard()); err != nil {
		t.Fatal(err)
	}
	waitLine("line of the new pod web-2", func(line platform.LogLine) bool { return line.Pod == "web-2" })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("a follow ended by its context returned %v, want nil", err)
	}
}

// Discard is platform.Discard (a short name for the tests).
func Discard() platform.Output { return platform.Discard }

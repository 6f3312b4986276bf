package runs_test

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/events/payload"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
)

// logSecret has characters that each encoding writes differently.
const logSecret = "p@ss w0rd/+Sess10n=ü-never-shown"

// encodings are the three forms the release command prints the value in.
func encodings(v string) map[string]string {
	return map[string]string{"raw": v, "base64": base64.StdEncoding.EncodeToString([]byte(v)), "url": url.QueryEscape(v)}
}

// leaks names the encodings of v found in text (never the text itself).
func leaks(text []byte, v string) []string {
	var found []string
	for name, form := range encodings(v) {
		if bytes.Contains(text, []byte(form)) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	return found
}

// TestReleaseCommandPrintingAValueInThreeEncodingsStoresOnlyMaskedLines
// makes the release command print SESSION_SECRET as it is, in base64 and
// URL-encoded (the local platform's fault-file output): the stored lines
// and every event that streamed them say •••• in its place.
func TestReleaseCommandPrintingAValueInThreeEncodingsStoresOnlyMaskedLines(t *testing.T) {
	t.Parallel()
	values := map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": logSecret}
	f := newFixture(t, wiki("10m"), values)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) {
		fs.Output = map[string]map[string][]string{
			"release": {"web": {
				"SESSION_SECRET=${SESSION_SECRET}",
				"header: Basic ${SESSION_SECRET|base64}",
				"connecting to https://db/?password=${SESSION_SECRET|url}&ssl=1",
				"Applying 0001_initial... OK",
			}},
			"build": {"web": {"Step 3/7 : ARG TOKEN=${SESSION_SECRET}"}},
		}
	})
	run := f.deploy(runs.DeployRequest{})
	if res := f.execute(run.ID); !res.Finished {
		t.Fatalf("the run waits until %v", res.WaitUntil)
	}
	if got := f.run(run.ID); got.Status != store.RunSucceeded {
		t.Fatalf("status %s (%s), want succeeded", got.Status, got.Reason)
	}
	if f.local.ReceivedValues(f.env.ID)["SESSION_SECRET"] != logSecret {
		t.Fatal("the platform was not handed the value, so nothing printed it")
	}

	lines, err := f.db.RunLog(f.ctx, run.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	release, _ := f.checkpoint(run.ID, runs.KindRelease)
	var releaseText []string
	for _, l := range lines {
		if found := leaks([]byte(l.Text), logSecret); len(found) > 0 {
			t.Errorf("stored line %d holds the value (%s)", l.N, strings.Join(found, ", "))
		}
		if l.Position == release.Position {
			releaseText = append(releaseText, l.Text)
		}
	}
	want := []string{
		"$ /app/wiki migrate up",
		"SESSION_SECRET=••••",
		"header: Basic ••••",
		"connecting to https://db/?password=••••&ssl=1",
		"Applying 0001_initial... OK",
		"exit status 0",
	}
	// What was stored is not printed: it may hold the value.
	if len(releaseText) != len(want) {
		t.Errorf("the release command wrote %d lines, want %d: %q", len(releaseText), len(want), want)
	}
	for i := range min(len(releaseText), len(want)) {
		if releaseText[i] != want[i] {
			t.Errorf("release command's line %d is not %q", i+1, want[i])
		}
	}
	build, _ := f.checkpoint(run.ID, runs.KindBuild)
	buildLines, err := f.db.RunLog(f.ctx, run.ID, build.Position)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(buildLines, func(l store.LogLine) bool { return l.Text == "Step 3/7 : ARG TOKEN=••••" }) {
		t.Errorf("the build's lines lack its masked output line")
	}
	for _, kind := range []string{runs.KindRollout, runs.KindIssueTLS} {
		cp, _ := f.checkpoint(run.ID, kind)
		if l, err := f.db.RunLog(f.ctx, run.ID, cp.Position); err != nil || len(l) == 0 {
			t.Errorf("%s wrote no log line (%v)", cp.Name, err)
		}
	}

	// The events that streamed the lines carry them masked, every line
	// once, in order.
	var streamed []int64
	for _, e := range f.events(run.ID) {
		if found := leaks(e.Payload, logSecret); len(found) > 0 {
			t.Errorf("event %d holds the value (%s)", e.Seq, strings.Join(found, ", "))
		}
		p, err := payload.DecodeRun(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if p.Log == nil {
			continue
		}
		for i, l := range p.Log.Lines {
			if l.N != p.Log.First+int64(i) || lines[l.N-1].Text != l.Text || lines[l.N-1].Position != p.Log.Position {
				t.Errorf("event %d line %d differs from the stored line", e.Seq, l.N)
			}
			streamed = append(streamed, l.N)
		}
	}
	if len(streamed) != len(lines) || !slices.IsSorted(streamed) {
		t.Errorf("events streamed %d lines, want each of the %d stored lines once, in order", len(streamed), len(lines))
	}
}

// TestAFailedStepsLastLineIsWhereTheRunStopped: the run's heading links to
// the last line the failed step wrote.
func TestAFailedStepsLastLineIsWhereTheRunStopped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) { fs.Release = map[string]string{"web": "exit status 3"} })
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed {
		t.Fatalf("status %s, want failed", got.Status)
	}
	release, _ := f.checkpoint(run.ID, runs.KindRelease)
	lines, err := f.db.RunLog(f.ctx, run.ID, release.Position)
	if err != nil || len(lines) == 0 {
		t.Fatalf("the failed release command wrote no line (%v)", err)
	}
	last := lines[len(lines)-1]
	if last.Text != "failed: exit status 3" {
		t.Errorf("the failed command's last line = %q, want its failure", last.Text)
	}
	if det := runs.DecodeRunDetail(got.Detail); det.StoppedLine != last.N {
		t.Errorf("the run stopped at line %d, want the release command's last line %d", det.StoppedLine, last.N)
	}
}

// changeEvents returns the run's events that change it: its events without
// those that carry log lines (whose number depends on how the lines were
// batched).
func (f *fixture) changeEvents(id int64) []store.RunEvent {
	f.t.Helper()
	var out []store.RunEvent
	for _, e := range f.events(id) {
		if !payload.CarriesLog(e.Payload) {
			out = append(out, e)
		}
	}
	return out
}

package views_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// A waiting certificate checkpoint reads as one row per attempt with its
// reason, and the current wait with its countdown.
func TestWaitingCertificateCheckpointShowsTheRetry(t *testing.T) {
	now := time.Date(2026, 3, 2, 13, 11, 0, 0, time.UTC)
	failed := time.Date(2026, 3, 2, 13, 3, 0, 0, time.UTC)
	next := failed.Add(time.Hour)
	detail, _ := json.Marshal(runs.CheckpointDetail{TLS: &runs.TLSDetail{
		Route: "web / public", Domain: "wiki.example.test", Policy: "automatic", State: "waiting",
		Attempt: 1, Failures: 1, LastFailureAt: &failed, LastFailure: "403 urn:ietf:params:acme:error:unauthorized", NextRetryAt: &next,
		Attempts: []runs.TLSAttempt{{Number: 1, At: failed, Outcome: "failed", Reason: "403 urn:ietf:params:acme:error:unauthorized", NextRetryAt: &next}},
	}})
	env := &store.Environment{Project: "team-wiki", Name: "production"}
	run := &store.Run{ID: 7, Kind: "deploy", Status: store.RunWaiting}
	cp := store.Checkpoint{RunID: 7, Position: 6, Kind: runs.KindIssueTLS, Name: "Issue TLS certificate · web / public", Status: store.CheckpointWaiting, Detail: detail}
	var buf bytes.Buffer
	if err := views.CheckpointRow(views.NewCheckpointView(env, run, cp, now)).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{`id="checkpoint-6"`, "next retry at 14:03 UTC (<time data-countdown datetime=\"2026-03-02T14:03:00Z\" title=\"2026-03-02 14:03:00 UTC\">in 52 min</time>)", "attempt 1", "403 urn:ietf:params:acme:error:unauthorized",
		"retry at 14:03 UTC", "Consecutive failures", "Estimated next retry"} {
		if !strings.Contains(html, want) {
			t.Errorf("checkpoint row lacks %q:\n%s", want, html)
		}
	}
}

// A failed run's heading links to the checkpoint it failed at, and a
// checkpoint it never reached reads "not run".
func TestFailedRunLinksToItsFailedStepAndMarksTheRestNotRun(t *testing.T) {
	now := time.Date(2026, 3, 2, 13, 11, 0, 0, time.UTC)
	at := 4
	detail, _ := json.Marshal(runs.RunDetail{StoppedAt: &at, StoppedName: "Release command web"})
	env := &store.Environment{Project: "team-wiki", Name: "production"}
	run := &store.Run{ID: 7, Kind: "deploy", Status: store.RunFailed, Reason: "The release command of web failed: exit status 3", Detail: detail}
	var buf bytes.Buffer
	if err := views.RunHeading(views.NewRunView(env, run, now, false)).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if html := buf.String(); !strings.Contains(html, `href="#checkpoint-4"`) || !strings.Contains(html, "Go to the failed step: Release command web") {
		t.Errorf("the heading does not link to the failed step:\n%s", html)
	}
	buf.Reset()
	cp := store.Checkpoint{RunID: 7, Position: 5, Kind: runs.KindRollout, Name: "Roll out web", Status: store.CheckpointNotRun}
	if err := views.CheckpointRow(views.NewCheckpointView(env, run, cp, now)).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if html := buf.String(); !strings.Contains(html, ">not run</span>") {
		t.Errorf("a checkpoint never reached does not read not run:\n%s", html)
	}
}

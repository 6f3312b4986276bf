package runs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
)

// holdingRelease holds release commands until told to go on: started is
// closed when the first one starts, proceed by go.
type holdingRelease struct {
	platform.Platform
	started chan struct{}
	proceed chan struct{}
	once    sync.Once
	goOnce  sync.Once
}

func (h *holdingRelease) Release(ctx context.Context, env platform.Env, app string, a *compiler.Application, cmd *compiler.ReleaseCommand, key platform.ReleaseKey, out platform.Output) error {
	h.once.Do(func() { close(h.started) })
	<-h.proceed
	return h.Platform.Release(ctx, env, app, a, cmd, key, out)
}

// goOn lets the held release commands go on (once; later calls do
// nothing), so a test that fails while one is held lets it end too.
func (h *holdingRelease) goOn() { h.goOnce.Do(func() { close(h.proceed) }) }

// awaitStart waits up to a minute for the first release command of the
// execution of run (whose end done reports) to start.
func (h *holdingRelease) awaitStart(f *fixture, runID int64, done <-chan error) {
	f.t.Helper()
	select {
	case <-h.started:
	case err := <-done:
		got := f.run(runID)
		f.t.Fatalf("the execution ended (%v) before its release command: run %s (%s)", err, got.Status, got.Reason)
	case <-time.After(time.Minute):
		got := f.run(runID)
		f.t.Fatalf("no release command started within a minute: run %s (%s)", got.Status, got.Reason)
	}
}

// awaitEnd waits up to a minute for the execution of run, whose release
// command went on, to end without an error.
func awaitEnd(f *fixture, runID int64, done <-chan error) {
	f.t.Helper()
	select {
	case err := <-done:
		if err != nil {
			f.t.Fatal(err)
		}
	case <-time.After(time.Minute):
		got := f.run(runID)
		f.t.Fatalf("the execution did not end within a minute of its release command: run %s (%s)", got.Status, got.Reason)
	}
}

func TestCancelLetsARunningReleaseCommandFinishThenStops(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	hold := &holdingRelease{Platform: f.local, started: make(chan struct{}), proceed: make(chan struct{})}
	svc := runs.NewService(f.db, f.vault, hold, f.clock.Now, nil)
	run, err := svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := svc.Runner.Execute(context.Background(), run.ID)
		done <- err
	}()
	t.Cleanup(hold.goOn)
	hold.awaitStart(f, run.ID, done)
	if _, err := svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	hold.goOn()
	awaitEnd(f, run.ID, done)
	got := f.run(run.ID)
	if got.Status != store.RunCancelled || got.Reason != "Cancelled before Issue TLS certificate · web / public." {
		t.Fatalf("run %s %q", got.Status, got.Reason)
	}
	if cp, _ := f.checkpoint(run.ID, runs.KindRelease); cp.Status != store.CheckpointSucceeded {
		t.Fatalf("the release command was stopped: %s", cp.Status)
	}
	if f.reloadEnv().ActiveRevisionID != nil {
		t.Fatal("a cancelled run activated its revision")
	}
	var n int
	f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM audit_events WHERE action = 'run.cancel_requested'`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d cancel audit records", n)
	}
	if _, err := svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("cancelling a finished run: %v", err)
	}
}

func TestCancelBeforeTheRunStarts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	run := f.deploy(runs.DeployRequest{})
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	if got := f.run(run.ID); got.Status != store.RunCancelled {
		t.Fatalf("run %s", got.Status)
	}
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Status != store.CheckpointNotRun {
			t.Fatalf("%s is %s, want not-run", cp.Name, cp.Status)
		}
	}
	if det, first := runs.DecodeRunDetail(f.run(run.ID).Detail), f.checkpoints(run.ID)[0]; det.StoppedAt == nil || *det.StoppedAt != first.Position || det.StoppedName != first.Name {
		t.Fatalf("stopped at %v %q, want the first checkpoint", det.StoppedAt, det.StoppedName)
	}
}

// TestCancelledRunSummarySaysTheCertificateIssuedMeanwhile: a deploy
// waits on a certificate in backoff, Check now issues it, then the deploy
// is cancelled: its summary says the certificate was issued, not pending.
func TestCancelledRunSummarySaysTheCertificateIssuedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("100h"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) { fs.Issuance = map[string]string{"wiki.test": "403"} })
	run := f.deploy(runs.DeployRequest{})
	if res := f.execute(run.ID); res.Finished {
		t.Fatal("the run does not wait")
	}
	f.faults.Set(func(fs *local.Faults) { fs.Issuance = nil })
	results, err := f.svc.CheckNow(f.ctx, store.Actor{}, f.reloadEnv(), "wiki.test")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Run != nil {
			f.execute(r.Run.ID)
		}
	}
	if c := f.certificate("wiki.test"); c == nil || c.State != "issued" {
		t.Fatalf("Check now did not issue the certificate: %+v", c)
	}
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	summary := runs.DecodeRunDetail(got.Detail).Summary
	if got.Status != store.RunCancelled || !strings.Contains(summary, "wiki.test  cert issued") || strings.Contains(summary, "cert pending") {
		t.Fatalf("run %s, summary:\n%s", got.Status, summary)
	}
	for _, cp := range f.checkpoints(run.ID) {
		if cp.Status == store.CheckpointPending {
			t.Errorf("%s is still pending after the run was cancelled", cp.Name)
		}
	}
}

func TestCancelAWaitingRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("100h"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) { fs.Issuance = map[string]string{"wiki.test": "403"} })
	run := f.deploy(runs.DeployRequest{})
	if res := f.execute(run.ID); res.Finished {
		t.Fatal("the run does not wait")
	}
	if _, err := f.svc.Cancel(f.ctx, store.Actor{}, f.reloadEnv(), run.ID); err != nil {
		t.Fatal(err)
	}
	f.execute(run.ID)
	got := f.run(run.ID)
	cp, _ := f.checkpoint(run.ID, runs.KindIssueTLS)
	if got.Status != store.RunCancelled || cp.Status != store.CheckpointSkipped || cp.Warning != "cancelled while waiting" {
		t.Fatalf("run %s %q, checkpoint %s %q", got.Status, got.Reason, cp.Status, cp.Warning)
	}
}

func (h *holdingRelease) Unwrap() platform.Platform { return h.Platform }

package runs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// stubPlatform is a third platform as a newcomer would write one: only
// the Platform interface, no capability, nothing deployed anywhere.
type stubPlatform struct{ rollouts []string }

func (*stubPlatform) Kind() string { return "stub" }
func (*stubPlatform) ProvisionDatabase(context.Context, platform.Env, string, *compiler.Database, platform.Output) error {
	return nil
}
func (*stubPlatform) ProvisionBucket(context.Context, platform.Env, string, *compiler.Bucket, platform.Output) error {
	return nil
}
func (*stubPlatform) BucketBytes(context.Context, platform.Env, string) (int64, error) { return 0, nil }
func (*stubPlatform) Build(_ context.Context, _ platform.Env, _ string, a *compiler.Application, _ platform.Output) (string, error) {
	return a.Image, nil
}
func (*stubPlatform) Release(context.Context, platform.Env, string, *compiler.Application, *compiler.ReleaseCommand, platform.ReleaseKey, platform.Output) error {
	return nil
}
func (*stubPlatform) ReleaseOutcome(context.Context, platform.Env, platform.ReleaseKey) (platform.ReleaseOutcome, error) {
	return platform.ReleaseOutcome{State: platform.ReleaseNotStarted}, nil
}
func (s *stubPlatform) Rollout(_ context.Context, _ platform.Env, app string, _ *compiler.Application, out platform.Output) error {
	s.rollouts = append(s.rollouts, app)
	out.Line("stub: " + app + " rolled out nowhere")
	return nil
}
func (*stubPlatform) Probe(context.Context, string) platform.ProbeResult {
	return platform.ProbeResult{}
}
func (*stubPlatform) Issue(context.Context, platform.Env, string, time.Time, platform.Output) (*platform.IssuedCertificate, platform.Issuance, error) {
	return nil, platform.Issuance{}, errors.New("the stub platform issues no certificates")
}
func (*stubPlatform) Prune(context.Context, platform.Env, []platform.RemovedService, platform.Output) error {
	return nil
}

// TestAPlatformWithoutCapabilitiesDeploysAndRefusesBackupsInOneSentence:
// a platform that implements only platform.Platform runs a whole deploy
// (database, bucket, volume, rollout) through the same runner, and what
// it lacks (backups) is refused with the one sentence of
// platform.NotSupported, before anything is stored.
func TestAPlatformWithoutCapabilitiesDeploysAndRefusesBackupsInOneSentence(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backupManifest, nil)
	stub := &stubPlatform{}
	svc := runs.NewService(f.db, f.vault, stub, f.clock.Now, nil)
	run, err := svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := svc.Runner.Execute(f.ctx, run.ID); err != nil || !res.Finished {
		t.Fatalf("execute: %+v %v", res, err)
	}
	if r := f.run(run.ID); r.Status != store.RunSucceeded {
		t.Fatalf("the stub's deploy %s: %s", r.Status, r.Reason)
	}
	if len(stub.rollouts) != 1 || stub.rollouts[0] != "api" {
		t.Errorf("rollouts on the stub: %v, want [api]", stub.rollouts)
	}

	want := "The Stub platform does not take backups in this version of the Studio; nothing was done."
	err = svc.SetBackupTarget(f.ctx, store.Actor{}, t.TempDir())
	var br *runs.BackupRefusal
	if !errors.As(err, &br) || br.Message != want || br.Field != "target" {
		t.Fatalf("setting a backup target on the stub: %v; want the refusal %q on the target field", err, want)
	}
	if target, err := f.db.BackupTarget(f.ctx); err != nil || target != "" {
		t.Errorf("the refused target was stored: %q (%v)", target, err)
	}
}

package runs_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
)

func wiki(rollout string) string { return strings.Replace(wikiManifest, "ROLLOUT", rollout, 1) }

var wikiValues = map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "s3cr3t-value-never-shown"}

func TestFirstDeployIssuesCertificatesAndActivates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	run := f.deploy(runs.DeployRequest{})
	if res := f.execute(run.ID); !res.Finished {
		t.Fatalf("the run waits until %v", res.WaitUntil)
	}
	got := f.run(run.ID)
	if got.Status != store.RunSucceeded {
		t.Fatalf("status %s (%s), want succeeded", got.Status, got.Reason)
	}
	var names []string
	for _, cp := range f.checkpoints(run.ID) {
		names = append(names, cp.Name+"="+cp.Status)
	}
	want := []string{
		"Check values=succeeded", "Provision database data=succeeded", "Provision bucket attachments=succeeded",
		"Build web=succeeded", "Release command web=succeeded",
		"Issue TLS certificate · web / public=succeeded", "Issue TLS certificate · web / public alias www.wiki.test=succeeded",
		"Roll out web (blue-green)=succeeded", "Activate revision 1=succeeded",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("checkpoints:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if env := f.reloadEnv(); env.ActiveRevisionID == nil || *env.ActiveRevisionID != *run.RevisionID {
		t.Fatalf("active revision %v, want %d", env.ActiveRevisionID, *run.RevisionID)
	}
	_, d := f.checkpoint(run.ID, runs.KindRelease)
	if strings.Join(d.WaitedFor, ",") != "bucket attachments,database data" {
		t.Fatalf("release waited for %q", d.WaitedFor)
	}
	// The certificate is a real X.509 certificate from the development CA.
	cert := f.certificate("wiki.test")
	if cert.State != store.CertIssued || cert.Serial == "" || cert.NotBefore == nil || cert.NotAfter == nil {
		t.Fatalf("certificate %+v", cert)
	}
	block, _ := pem.Decode([]byte(cert.CertificatePEM))
	x, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(f.local.CA.Cert)
	if _, err := x.Verify(x509.VerifyOptions{DNSName: "wiki.test", Roots: pool, CurrentTime: start}); err != nil {
		t.Fatalf("certificate does not verify: %v", err)
	}
	_, d = f.checkpoint(run.ID, runs.KindIssueTLS)
	if d.TLS.Issuance == nil || d.TLS.Issuance.ChallengeResult != "valid" || !strings.Contains(d.TLS.Issuance.ChallengeURL, "/.well-known/acme-challenge/") ||
		len(d.TLS.Addresses) != 1 || d.TLS.Addresses[0].Answer != runs.AnsweredHere {
		t.Fatalf("TLS detail %+v", d.TLS)
	}
	// Every change is an event numbered without gaps; the last one is the
	// run's end, and no event holds a value's plaintext.
	evs := f.events(run.ID)
	last := decodeEvent(t, evs[len(evs)-1])
	if last.Run.Status != "succeeded" || last.Checkpoint != nil {
		t.Fatalf("last event %+v", last)
	}
	for _, e := range evs {
		if strings.Contains(string(e.Payload), "s3cr3t") {
			t.Fatalf("event %d holds a value", e.Seq)
		}
	}
	if strings.Contains(string(got.Detail), "s3cr3t") {
		t.Fatal("the run's detail holds a value")
	}
}

func TestDeferredRouteThenArrivalRecordsTwoReconcileRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", nobody)
	f.resolver.Set("www.wiki.test", here)
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunSucceededWithWarnings {
		t.Fatalf("status %s (%s), want succeeded-with-warnings", got.Status, got.Reason)
	}
	cp, d := f.checkpoint(run.ID, runs.KindIssueTLS)
	if cp.Status != store.CheckpointSkipped || cp.Warning != "TLS deferred: wiki.test is not pointing here yet" {
		t.Fatalf("checkpoint %s %q", cp.Status, cp.Warning)
	}
	if len(d.TLS.Addresses) != 1 || d.TLS.Addresses[0].Address != nobody || d.TLS.Addresses[0].Answer != runs.NoAnswerRefused {
		t.Fatalf("addresses %+v", d.TLS.Addresses)
	}
	det := runs.DecodeRunDetail(got.Detail)
	for _, want := range []string{"succeeded · with warnings", "cert deferred · domain not pointing here yet", "warning: TLS deferred: wiki.test", "1 route deferred"} {
		if !strings.Contains(det.Summary, want) {
			t.Fatalf("summary lacks %q:\n%s", want, det.Summary)
		}
	}
	// The alias points here: it is issued on its own, never held back.
	if c := f.certificate("www.wiki.test"); c.State != store.CertIssued {
		t.Fatalf("alias certificate %s", c.State)
	}
	if env := f.reloadEnv(); env.ActiveRevisionID == nil {
		t.Fatal("a deferred route kept the revision from activating")
	}
	if c := f.certificate("wiki.test"); c.State != store.CertDeferred {
		t.Fatalf("certificate %s, want deferred", c.State)
	}

	// Nothing changes while the domain points elsewhere.
	if err := f.svc.Reconcile(f.ctx); err != nil {
		t.Fatal(err)
	}
	if runs, _ := f.db.Runs(f.ctx, f.env.ID, 10); len(runs) != 1 {
		t.Fatalf("%d runs after an idle reconcile", len(runs))
	}
	// The domain arrives: an arrival run and an issuance run.
	f.resolver.Set("wiki.test", here)
	if err := f.svc.Reconcile(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ExecuteUnfinished(f.ctx); err != nil {
		t.Fatal(err)
	}
	all, _ := f.db.Runs(f.ctx, f.env.ID, 10)
	if len(all) != 3 || all[0].Kind != "reconcile" || all[1].Kind != "reconcile" {
		t.Fatalf("runs %+v", all)
	}
	arrival, issuance := all[1], all[0]
	if arrival.Status != store.RunSucceeded || issuance.Status != store.RunSucceeded {
		t.Fatalf("arrival %s, issuance %s (%s)", arrival.Status, issuance.Status, issuance.Reason)
	}
	if cp, d := f.checkpoint(arrival.ID, runs.KindProbe); d.Probe == nil || d.Probe.Verdict != runs.PointsHere || !strings.Contains(cp.Name, "wiki.test") {
		t.Fatalf("arrival checkpoint %+v", d)
	}
	if c := f.certificate("wiki.test"); c.State != store.CertIssued || c.Serial == "" {
		t.Fatalf("certificate after arrival %+v", c)
	}
	// The environment's events announced the service states.
	evs, _ := f.db.EnvironmentEventsAfter(f.ctx, f.env.ID, 0, 100)
	text := ""
	for _, e := range evs {
		text += string(e.Payload) + "\n"
	}
	for _, want := range []string{`"state": "DNS pending"`, `"state": "issued"`, `"type": "run.started"`, `"type": "run.finished"`} {
		if !strings.Contains(text, want) {
			t.Fatalf("environment events lack %s:\n%s", want, text)
		}
	}
}

func TestPartialAndAnotherServerDefer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here, nobody)
	f.resolver.Set("www.wiki.test", otherEdge)
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	cps := f.checkpoints(run.ID)
	var tls []runs.TLSDetail
	for _, cp := range cps {
		if cp.Kind == runs.KindIssueTLS {
			if cp.Status != store.CheckpointSkipped {
				t.Fatalf("%s is %s, want skipped", cp.Name, cp.Status)
			}
			tls = append(tls, *runs.DecodeCheckpointDetail(cp.Detail).TLS)
		}
	}
	if tls[0].Verdict != runs.PointsPartial || len(tls[0].Addresses) != 2 ||
		tls[0].Addresses[0].Answer != runs.AnsweredHere || tls[0].Addresses[1].Answer != runs.NoAnswerRefused {
		t.Fatalf("partial: %+v", tls[0])
	}
	if tls[1].Verdict != runs.PointsElsewhere || tls[1].Addresses[0].Answer != runs.AnsweredOther {
		t.Fatalf("another server: %+v", tls[1])
	}
	if got := runs.DecodeRunDetail(f.run(run.ID).Detail); got.Deferred != 2 || !strings.Contains(got.Summary, "2 routes deferred") {
		t.Fatalf("run detail %+v", got)
	}
}

func TestRenamedRouteKeepsServingTheOldCertificate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	f.setValue("APP_DOMAIN", "docs.test")
	f.resolver.Set("docs.test", nobody)
	f.resolver.Set("www.docs.test", nobody)
	run := f.deploy(runs.DeployRequest{Redeploy: true})
	f.execute(run.ID)
	cp, d := f.checkpoint(run.ID, runs.KindIssueTLS)
	if cp.Status != store.CheckpointSkipped || d.TLS.Domain != "docs.test" || d.TLS.IssuedFor != "wiki.test" {
		t.Fatalf("renamed route: %s %+v", cp.Status, d.TLS)
	}
	if s := runs.DecodeRunDetail(f.run(run.ID).Detail).Summary; !strings.Contains(s, "issued for wiki.test") {
		t.Fatalf("summary:\n%s", s)
	}
	// Renamed again: the reconciler stops probing docs.test, which nothing uses.
	f.setValue("APP_DOMAIN", "notes.test")
	f.execute(f.deploy(runs.DeployRequest{Redeploy: true}).ID)
	if _, err := f.db.CertificateFor(f.ctx, f.env.ID, "docs.test"); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("docs.test is still tracked: %v", err)
	}
	if c := f.certificate("wiki.test"); c.State != store.CertIssued {
		t.Fatalf("the issued certificate of wiki.test was dropped: %s", c.State)
	}
}

func TestIssuanceBackoffDoublesToThirtyTwoHours(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("100h"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) {
		fs.Issuance = map[string]string{"wiki.test": "ACME server answered 403 for the HTTP-01 challenge"}
	})
	run := f.deploy(runs.DeployRequest{})
	now := start
	for i, want := range []time.Duration{1, 2, 4, 8, 16, 32, 32} {
		res := f.execute(run.ID)
		if res.Finished {
			t.Fatalf("failure %d finished the run: %s", i+1, f.run(run.ID).Reason)
		}
		if got := res.WaitUntil.Sub(now); got != want*time.Hour {
			t.Fatalf("after failure %d the retry is in %s, want %dh", i+1, got, want)
		}
		cp, d := f.checkpoint(run.ID, runs.KindIssueTLS)
		if cp.Status != store.CheckpointWaiting || d.TLS.Failures != i+1 || d.TLS.Attempt != i+1 ||
			d.TLS.LastFailure != "ACME server answered 403 for the HTTP-01 challenge" || !d.TLS.NextRetryAt.Equal(res.WaitUntil) {
			t.Fatalf("after failure %d: %s %+v", i+1, cp.Status, d.TLS)
		}
		if got := f.run(run.ID).Status; got != store.RunWaiting {
			t.Fatalf("run is %s while it waits", got)
		}
		now = res.WaitUntil
		f.clock.Set(now)
	}
	// 63h + 32h: the next retry (127h) falls after the 100h deadline.
	if res := f.execute(run.ID); !res.Finished {
		t.Fatalf("the eighth failure waits until %v", res.WaitUntil)
	}
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "ACME server answered 403") {
		t.Fatalf("run %s: %s", got.Status, got.Reason)
	}
	_, d := f.checkpoint(run.ID, runs.KindIssueTLS)
	if len(d.TLS.Attempts) != 8 {
		t.Fatalf("%d attempts recorded, want 8", len(d.TLS.Attempts))
	}
}

func TestFailureAfterTheDeadlineFailsPromptlyAndALateIssuanceActivates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) { fs.Issuance = map[string]string{"wiki.test": "connection reset by peer"} })
	run := f.deploy(runs.DeployRequest{})
	if res := f.execute(run.ID); !res.Finished {
		t.Fatal("a failure whose retry falls after the deadline waits")
	}
	got := f.run(run.ID)
	if got.Status != store.RunFailed || got.Reason != "Issue TLS certificate for wiki.test failed: connection reset by peer" {
		t.Fatalf("run %s: %q", got.Status, got.Reason)
	}
	if f.reloadEnv().ActiveRevisionID != nil {
		t.Fatal("a failed run activated its revision")
	}
	// The retry falls due; the certificate is issued; the first
	// deployment, still converging, becomes active.
	f.faults.Set(func(fs *local.Faults) { fs.Issuance = nil })
	f.clock.Set(start.Add(59 * time.Minute))
	if err := f.svc.Reconcile(f.ctx); err != nil {
		t.Fatal(err)
	}
	if ids, _ := f.db.UnfinishedRuns(f.ctx); len(ids) != 0 {
		t.Fatal("the reconciler retried before the backoff ended")
	}
	f.clock.Set(start.Add(time.Hour))
	if err := f.svc.Reconcile(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ExecuteUnfinished(f.ctx); err != nil {
		t.Fatal(err)
	}
	if env := f.reloadEnv(); env.ActiveRevisionID == nil || *env.ActiveRevisionID != *run.RevisionID {
		t.Fatal("the late issuance did not activate the first deployment")
	}
}

func TestRedeployBypassesBackoffOncePerFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) { fs.Issuance = map[string]string{"wiki.test": "no route to the challenge"} })
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	if c := f.certificate("wiki.test"); c.Failures != 1 {
		t.Fatalf("failures %d", c.Failures)
	}
	// Redeploying after fixing DNS requests a fresh issuance at once.
	f.clock.Set(start.Add(5 * time.Minute))
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	_, d := f.checkpoint(run.ID, runs.KindIssueTLS)
	if d.TLS.Attempt != 2 || !strings.Contains(d.TLS.Note, "once") {
		t.Fatalf("the redeploy did not bypass the backoff: %+v", d.TLS)
	}
	c := f.certificate("wiki.test")
	if c.Failures != 2 || c.BypassedFailures != 1 {
		t.Fatalf("certificate %+v", c)
	}
	// The bypass went to failure 1; a run that meets failure 1's state again
	// (a restart re-executing the step before it was recorded) could not
	// bypass it, and a reconcile never bypasses.
	f.clock.Set(start.Add(10 * time.Minute))
	if err := f.svc.Reconcile(f.ctx); err != nil {
		t.Fatal(err)
	}
	if ids, _ := f.db.UnfinishedRuns(f.ctx); len(ids) != 0 {
		t.Fatal("the reconciler bypassed the backoff")
	}
}

func TestRateLimitWindowIsHonoured(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) { fs.RateLimit = map[string]string{"wiki.test": "3h"} })
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	c := f.certificate("wiki.test")
	if c.RateLimitedUntil == nil || !c.RateLimitedUntil.Equal(start.Add(3*time.Hour)) || !c.NextRetryAt.Equal(start.Add(3*time.Hour)) {
		t.Fatalf("certificate %+v", c)
	}
	f.faults.Set(func(fs *local.Faults) { fs.RateLimit = nil })
	// Check now retries a certificate in backoff, but not inside the CA's window.
	f.clock.Set(start.Add(2 * time.Hour))
	if _, err := f.svc.CheckNow(f.ctx, store.Actor{}, f.reloadEnv(), "wiki.test"); err != nil {
		t.Fatal(err)
	}
	f.svc.ExecuteUnfinished(f.ctx)
	if c := f.certificate("wiki.test"); c.State != store.CertFailed || c.Attempts != 1 {
		t.Fatalf("an attempt inside the rate-limit window: %+v", c)
	}
	f.clock.Set(start.Add(3 * time.Hour))
	if _, err := f.svc.CheckNow(f.ctx, store.Actor{}, f.reloadEnv(), ""); err != nil {
		t.Fatal(err)
	}
	f.svc.ExecuteUnfinished(f.ctx)
	if c := f.certificate("wiki.test"); c.State != store.CertIssued {
		t.Fatalf("after the window: %+v", c)
	}
}

func TestCheckNowRetriesABackoffWithAWarning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) { fs.Issuance = map[string]string{"wiki.test": "timeout during connect"} })
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	f.faults.Set(func(fs *local.Faults) { fs.Issuance = nil })
	f.clock.Set(start.Add(10 * time.Minute))
	results, err := f.svc.CheckNow(f.ctx, store.Actor{}, f.reloadEnv(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Run == nil {
		t.Fatalf("results %+v", results)
	}
	f.svc.ExecuteUnfinished(f.ctx)
	cp, _ := f.checkpoint(results[0].Run.ID, runs.KindIssueTLS)
	if cp.Status != store.CheckpointSucceeded || !strings.Contains(cp.Warning, "CA rate limits still apply") {
		t.Fatalf("check now: %s %q", cp.Status, cp.Warning)
	}
}

// TestCheckNowOnAnArrivedDomainMakesOneRun: one Check now click for a
// deferred domain that points here now makes one reconcile run, which
// records the arrival and issues the certificate (the reconciler on its
// own records them as two runs).
func TestCheckNowOnAnArrivedDomainMakesOneRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", nobody)
	f.resolver.Set("www.wiki.test", here)
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	f.resolver.Set("wiki.test", here)
	if _, err := f.svc.CheckNow(f.ctx, store.Actor{}, f.reloadEnv(), "wiki.test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ExecuteUnfinished(f.ctx); err != nil {
		t.Fatal(err)
	}
	all, _ := f.db.Runs(f.ctx, f.env.ID, 10)
	if len(all) != 2 || all[0].Kind != "reconcile" || all[0].Status != store.RunSucceeded {
		t.Fatalf("runs after one Check now: %+v, want the deploy and one reconcile run", all)
	}
	cps := f.checkpoints(all[0].ID)
	if len(cps) != 2 || cps[0].Kind != runs.KindProbe || cps[1].Kind != runs.KindIssueTLS || cps[1].Status != store.CheckpointSucceeded {
		t.Fatalf("checkpoints %+v, want the arrival and the issuance", cps)
	}
	if c := f.certificate("wiki.test"); c.State != store.CertIssued {
		t.Fatalf("certificate %s after Check now", c.State)
	}
}

func TestReleaseCommandFailureActivatesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) {
		fs.Release = map[string]string{"web": "exit status 3: relation \"pages\" already exists"}
	})
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "The release command of web failed: exit status 3") {
		t.Fatalf("run %s %q", got.Status, got.Reason)
	}
	for _, cp := range f.checkpoints(run.ID) {
		if (cp.Kind == runs.KindIssueTLS || cp.Kind == runs.KindRollout || cp.Kind == runs.KindActivate) && cp.Status != store.CheckpointNotRun {
			t.Fatalf("%s is %s after the release command failed, want not-run", cp.Name, cp.Status)
		}
	}
	release, _ := f.checkpoint(run.ID, runs.KindRelease)
	if det := runs.DecodeRunDetail(got.Detail); det.StoppedAt == nil || *det.StoppedAt != release.Position || det.StoppedName != release.Name {
		t.Fatalf("stopped at %v %q, want the release command's checkpoint %d", det.StoppedAt, det.StoppedName, release.Position)
	}
	if f.reloadEnv().ActiveRevisionID != nil {
		t.Fatal("a failed release command activated the revision")
	}
}

func TestDeployRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.execute(f.deploy(runs.DeployRequest{}).ID)

	refusal := func(req runs.DeployRequest) *runs.DeployRefusal {
		t.Helper()
		_, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), req)
		var r *runs.DeployRefusal
		if !errors.As(err, &r) {
			t.Fatalf("deploy %+v: %v, want a refusal", req, err)
		}
		return r
	}
	if r := refusal(runs.DeployRequest{}); r.Field != "redeploy" {
		t.Fatalf("redeploy without redeploy=1: %+v", r)
	}
	// Removing the bucket destroys data: typed confirmation.
	f.addRevision(strings.Replace(strings.Replace(wiki("10m"), "      S3_BUCKET: \"{{buckets.attachments.name}}\"\n", "", 1),
		"buckets:\n  attachments:\n    quotas:\n      storage: 50GB\n", "", 1))
	if r := refusal(runs.DeployRequest{}); r.Field != "confirm" {
		t.Fatalf("destructive deploy without confirmation: %+v", r)
	}
	if r := refusal(runs.DeployRequest{Confirm: "staging"}); r.Field != "confirm" {
		t.Fatalf("destructive deploy with the wrong name: %+v", r)
	}
	// A database version change is refused whatever is typed.
	f.addRevision(strings.Replace(wiki("10m"), "version: 17", "version: 18", 1))
	if r := refusal(runs.DeployRequest{Confirm: "production"}); !strings.Contains(r.Message, "version of a live database cannot change") {
		t.Fatalf("version change: %+v", r)
	}
	// A confirmed destructive deploy starts, and says so in the audit log.
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{Revision: 2, Confirm: "production"})
	if err != nil {
		t.Fatal(err)
	}
	var detail string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT detail::text FROM audit_events WHERE action = 'deploy.started' ORDER BY id DESC LIMIT 1`).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(detail, `"confirmation": true`) || !strings.Contains(detail, `"revision": 2`) {
		t.Fatalf("audit detail %s", detail)
	}
	// One deploy at a time.
	if _, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{Revision: 1, Redeploy: true}); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("second deploy while run %d is unfinished: %v", run.ID, err)
	}
}

func TestMissingValuesRefuseTheDeploy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test"})
	_, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), runs.DeployRequest{})
	var r *runs.DeployRefusal
	if !errors.As(err, &r) || !strings.Contains(r.Message, "SESSION_SECRET") {
		t.Fatalf("deploy without SESSION_SECRET: %v", err)
	}
}

func TestADomainHereThatCannotBeIssuedFailsAtTheRolloutDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), wikiValues)
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) { fs.RateLimit = map[string]string{"wiki.test": "3h"} })
	f.execute(f.deploy(runs.DeployRequest{}).ID)
	// A redeploy inside the CA's window cannot bypass it: it waits for the
	// rollout deadline and fails there with the issuance reason.
	f.clock.Set(start.Add(5 * time.Minute))
	run := f.deploy(runs.DeployRequest{})
	res := f.execute(run.ID)
	if res.Finished || !res.WaitUntil.Equal(start.Add(15*time.Minute)) {
		t.Fatalf("the run waits until %v, want the deadline %v", res.WaitUntil, start.Add(15*time.Minute))
	}
	f.clock.Set(res.WaitUntil)
	if res := f.execute(run.ID); !res.Finished {
		t.Fatal("the run waits past its deadline")
	}
	got := f.run(run.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Reason, "failed at the rollout deadline: urn:ietf:params:acme:error:rateLimited") {
		t.Fatalf("run %s %q", got.Status, got.Reason)
	}
	if c := f.certificate("wiki.test"); c.Attempts != 1 {
		t.Fatalf("%d attempts inside the rate-limit window", c.Attempts)
	}
}

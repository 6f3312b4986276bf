package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestWebhookEventsAreRecordedWithTheirChange: a certificate issued or
// failing, and a backup alarm raised and cleared, each record one delivery
// per endpoint that chose the event (none for one that did not, or for a
// repeat of the same state), in the transaction of the change; the
// endpoint's creation is audited and its secret is stored sealed.
func TestWebhookEventsAreRecordedWithTheirChange(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)
	db.Now = func() time.Time { return now }
	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: store.GenerateKey()})
	if err != nil {
		t.Fatal(err)
	}
	vault := store.NewVault(db, keys)
	p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: "wiki", Source: "name: wiki", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:x"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	certs, secret, err := vault.CreateWebhookEndpoint(ctx, store.Actor{}, env, store.NewWebhookEndpoint{URL: "https://hooks.example.test/certs",
		Events: []string{store.WebhookCertificateIssued, store.WebhookCertificateFailed}, Format: store.WebhookFormatStandard})
	if err != nil {
		t.Fatal(err)
	}
	// Every environment, backup alarms only.
	alarms, _, err := vault.CreateWebhookEndpoint(ctx, store.Actor{}, nil, store.NewWebhookEndpoint{URL: "https://ops.example.test/alarms",
		Events: []string{store.WebhookBackupAlarmRaised, store.WebhookBackupAlarmCleared}, Format: store.WebhookFormatSlack})
	if err != nil {
		t.Fatal(err)
	}
	var plain, audited int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM installation_settings WHERE position($1 in value) > 0),
		(SELECT count(*) FROM audit_events WHERE action = 'webhook.created' AND target IN ('https://hooks.example.test/…', 'https://ops.example.test/…'))`, secret[len("whsec_"):]).Scan(&plain, &audited); err != nil {
		t.Fatal(err)
	}
	if plain != 0 || audited != 2 {
		t.Errorf("secret stored in plain text %d times (want 0); %d webhook.created audit records naming the host only (want 2: chat services put credentials in the path)", plain, audited)
	}
	if got, err := vault.WebhookSecret(ctx, certs.ID); err != nil || got != secret {
		t.Errorf("the sealed secret does not open to the one shown (err %v)", err)
	}

	events := func(ep *store.WebhookEndpoint) []string {
		t.Helper()
		ds, err := db.WebhookDeliveries(ctx, []int64{ep.ID}, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := len(ds) - 1; i >= 0; i-- {
			out = append(out, ds[i].Event+" "+ds[i].Data.Project+"/"+ds[i].Data.Environment)
		}
		return out
	}
	run, err := db.CreateRun(ctx, store.Actor{}, env, store.NewRun{EnvironmentID: env.ID, Kind: "reconcile",
		Checkpoints: []store.NewCheckpoint{{Kind: "issue-tls", Name: "wiki.example.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	notAfter := now.Add(90 * 24 * time.Hour)
	for _, c := range []store.Certificate{
		{Domain: "wiki.example.test", State: store.CertFailed, Reason: "403 unauthorized"},
		{Domain: "wiki.example.test", State: store.CertFailed, Reason: "403 unauthorized"}, // a retry failing again: nothing new
		{Domain: "wiki.example.test", State: store.CertIssued, Serial: "01", NotAfter: &notAfter},
		{Domain: "wiki.example.test", State: store.CertIssued, Serial: "01", NotAfter: &notAfter}, // the same certificate: nothing new
		{Domain: "wiki.example.test", State: store.CertDeferred},
	} {
		if _, err := db.ApplyRunChange(ctx, store.RunChange{RunID: run.ID, Certificate: &c, ServiceState: c.State}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"certificate.failed wiki/production", "certificate.issued wiki/production"}
	if got := events(certs); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("certificate endpoint deliveries %v, want %v", got, want)
	}

	// A schedule with no backup for over twice its interval is in alarm.
	if err := db.SetBackupSchedule(ctx, store.Actor{}, env, "0 3 * * *", "7d", 7*24*time.Hour, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, err := db.SyncBackupAlarmWebhooks(ctx); err != nil || n != 0 {
		t.Fatalf("alarms changed %d (%v) before any is due, want 0", n, err)
	}
	now = now.Add(49 * time.Hour)
	for range 2 { // the second look finds nothing new
		if _, err := db.SyncBackupAlarmWebhooks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RemoveBackupSchedule(ctx, store.Actor{}, env); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SyncBackupAlarmWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	want = []string{"backup.alarm_raised wiki/production", "backup.alarm_cleared wiki/production"}
	if got := events(alarms); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("alarm endpoint deliveries %v, want %v", got, want)
	}
	if got := events(certs); len(got) != 2 {
		t.Errorf("the certificate endpoint heard of %d events, want only its 2", len(got))
	}
}

package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestHealthIsStoredOnceAndAnnouncedOncePerChange: replicas syncing the
// same report at once store it once, with one environment event; a crash
// loop reported again and again (restarts climbing) records one
// app.unhealthy, its recovery one app.recovered, and a rollout in between
// neither; the state's since survives a report that does not know it.
func TestHealthIsStoredOnceAndAnnouncedOncePerChange(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
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
	if _, _, err := vault.CreateWebhookEndpoint(ctx, store.Actor{}, env, store.NewWebhookEndpoint{URL: "https://hooks.example.test/health",
		Events: []string{store.WebhookAppUnhealthy, store.WebhookAppRecovered}, Format: store.WebhookFormatStandard}); err != nil {
		t.Fatal(err)
	}
	report := func(state platform.AppState, ready, restarts int, since time.Time) platform.EnvironmentHealth {
		return platform.EnvironmentHealth{Reported: true, Apps: []platform.AppHealth{{Name: "web", State: state, Ready: ready, Desired: 2, Restarts: restarts, Since: since}}}
	}
	deliveries := func() map[string]int {
		rows, err := db.Pool.Query(ctx, `SELECT event, count(*) FROM webhook_deliveries GROUP BY event`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var e string
			var n int
			if err := rows.Scan(&e, &n); err != nil {
				t.Fatal(err)
			}
			out[e] = n
		}
		return out
	}
	events := func() int64 {
		seq, err := db.LastEnvironmentEventSeq(ctx, env.ID)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}

	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	// Four replicas report the same running state at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrote := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			changed, err := db.SyncHealth(ctx, env.ID, report(platform.StateRunning, 2, 0, start))
			if err != nil {
				t.Error(err)
			}
			if changed {
				mu.Lock()
				wrote++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wrote != 1 || events() != 1 {
		t.Fatalf("4 replicas reporting one state: %d writes and %d events, want 1 and 1", wrote, events())
	}

	crash := start.Add(time.Minute)
	for restarts := 1; restarts <= 5; restarts++ {
		if _, err := db.SyncHealth(ctx, env.ID, report(platform.StateCrashLooping, 0, restarts, crash.Add(time.Duration(restarts)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.HealthOf(ctx, env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Level != platform.HealthDown || got.Report.Apps[0].Restarts != 5 || !got.Report.Apps[0].Since.Equal(crash.Add(time.Second)) {
		t.Errorf("stored %s, %d restarts, since %v; want down, 5, since the first report of the crash loop %v", got.Level, got.Report.Apps[0].Restarts, got.Report.Apps[0].Since, crash.Add(time.Second))
	}
	if d := deliveries(); d[store.WebhookAppUnhealthy] != 1 || d[store.WebhookAppRecovered] != 0 {
		t.Errorf("a crash loop reported 5 times recorded %v, want one app.unhealthy", d)
	}
	// Rolling out a fix is not yet a recovery; running is.
	for _, st := range []platform.AppState{platform.StateRollingOut, platform.StateRunning, platform.StateRunning} {
		if _, err := db.SyncHealth(ctx, env.ID, report(st, 2, 5, time.Time{})); err != nil {
			t.Fatal(err)
		}
	}
	if d := deliveries(); d[store.WebhookAppUnhealthy] != 1 || d[store.WebhookAppRecovered] != 1 {
		t.Errorf("after the recovery %v, want one app.unhealthy and one app.recovered", d)
	}
	if got, _ := db.HealthOf(ctx, env.ID); got.Level != platform.HealthHealthy {
		t.Errorf("level %s after the recovery, want healthy", got.Level)
	}
}

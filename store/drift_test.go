package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestDriftIsStoredOnceAndAnnouncedOncePerNewDrift: replicas syncing the
// same drift at once store it once, with one environment event and one
// drift.detected; the same drift reported again writes nothing and keeps
// when it was first seen; a second field drifting is announced alone; the
// drift to another value is announced again, its texts bounded; the
// drift undone clears it with one more event and no webhook.
func TestDriftIsStoredOnceAndAnnouncedOncePerNewDrift(t *testing.T) {
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
	if _, _, err := vault.CreateWebhookEndpoint(ctx, store.Actor{}, env, store.NewWebhookEndpoint{URL: "https://hooks.example.test/drift",
		Events: []string{store.WebhookDriftDetected}, Format: store.WebhookFormatStandard}); err != nil {
		t.Fatal(err)
	}
	webhooks := func() []store.WebhookData {
		rows, err := db.Pool.Query(ctx, `SELECT data FROM webhook_deliveries WHERE event = $1 ORDER BY id`, store.WebhookDriftDetected)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []store.WebhookData
		for rows.Next() {
			var body []byte
			if err := rows.Scan(&body); err != nil {
				t.Fatal(err)
			}
			var d store.WebhookData
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
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
	scaled := platform.Drift{App: "web", Kind: platform.DriftReplicas, Object: "Deployment web", Field: "replicas", Now: "0", Applied: "3"}

	// Four replicas see the same scale at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrote := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			changed, err := db.SyncDrift(ctx, env.ID, []platform.Drift{scaled})
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
	if wrote != 1 || events() != 1 || len(webhooks()) != 1 {
		t.Fatalf("4 replicas seeing one drift: %d writes, %d events, %d drift.detected; want 1, 1, 1", wrote, events(), len(webhooks()))
	}
	first, err := db.DriftOf(ctx, env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0].Now != "0" || first[0].Applied != "3" || first[0].Since.IsZero() {
		t.Fatalf("stored %+v, want web's replicas 0 where the Studio applied 3, with when it was seen", first)
	}
	if wh := webhooks()[0]; len(wh.Drift) != 1 || wh.Drift[0].Object != "Deployment web" || wh.Path != "/projects/wiki/environments/production" {
		t.Errorf("drift.detected carries %+v, want web's replicas and the environment's page", wh)
	}

	// The watch ticks again with the same drift (a platform since that
	// differs changes nothing): nothing is written.
	again := scaled
	again.Since = time.Now().Add(time.Hour)
	if changed, err := db.SyncDrift(ctx, env.ID, []platform.Drift{again}); err != nil || changed {
		t.Fatalf("the same drift again: changed %v (%v), want nothing written", changed, err)
	}

	// The image drifts too: one more event and one webhook, for the image
	// alone; the replicas keep their since.
	image := platform.Drift{App: "web", Kind: platform.DriftImage, Object: "Deployment web", Field: "image of web", Now: "nginx:1.27", Applied: "registry.local/web:1"}
	if changed, err := db.SyncDrift(ctx, env.ID, []platform.Drift{image, scaled}); err != nil || !changed {
		t.Fatalf("a new drift: changed %v (%v), want written", changed, err)
	}
	if wh := webhooks(); len(wh) != 2 || len(wh[1].Drift) != 1 || wh[1].Drift[0].Kind != platform.DriftImage {
		t.Errorf("drift.detected after the image drifted: %+v, want a second one naming the image only", wh)
	}
	got, _ := db.DriftOf(ctx, env.ID)
	if len(got) != 2 || !got[1].Since.Equal(first[0].Since) {
		t.Errorf("stored %+v, want the image and the replicas, the replicas since %v", got, first[0].Since)
	}

	// What a platform reports is bounded: an image reference of 10 kB is
	// stored cut short.
	long := image
	long.Now = strings.Repeat("x", 10000)
	if _, err := db.SyncDrift(ctx, env.ID, []platform.Drift{long, scaled}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.DriftOf(ctx, env.ID); len(got) != 2 || got[0].Kind != platform.DriftImage || len(got[0].Now) > 400 || !strings.HasSuffix(got[0].Now, "…") {
		t.Errorf("an image of 10000 bytes stored as %+v, want it cut short", got)
	}
	if wh := webhooks(); len(wh) != 3 {
		t.Errorf("the image drifting to another value sent %d drift.detected in all, want 3", len(wh))
	}

	// Restored: the drift is cleared, with an event and no webhook.
	before := events()
	if changed, err := db.SyncDrift(ctx, env.ID, nil); err != nil || !changed {
		t.Fatalf("drift undone: changed %v (%v), want written", changed, err)
	}
	if got, _ := db.DriftOf(ctx, env.ID); len(got) != 0 || events() != before+1 || len(webhooks()) != 3 {
		t.Errorf("after the restore: drift %+v, %d new events, %d webhooks; want none, 1, still 3", got, events()-before, len(webhooks()))
	}
}

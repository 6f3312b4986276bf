package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestRunChangesAppendEventsOfTheStreamedShape checks the payloads that the
// live pages read: a run-level change carries only "run", a checkpoint
// change also "checkpoint"; the environment hears when a run starts and
// finishes and when a service's state changes; a change guarded by a
// status the checkpoint no longer has changes nothing and appends nothing.
func TestRunChangesAppendEventsOfTheStreamedShape(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: "wiki", Source: "name: wiki", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:x"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.CreateRun(ctx, store.Actor{}, env, store.NewRun{EnvironmentID: env.ID, Kind: "deploy",
		Checkpoints: []store.NewCheckpoint{{Kind: "check-values", Name: "Check values"}, {Kind: "issue-tls", Name: "Issue TLS certificate · web / public"}}})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(c store.RunChange) bool {
		t.Helper()
		ok, err := db.ApplyRunChange(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	apply(store.RunChange{RunID: run.ID, Status: store.RunRunning})
	apply(store.RunChange{RunID: run.ID, Checkpoint: &store.CheckpointChange{Position: 2, Status: "skipped", Warning: "TLS deferred: wiki.test is not pointing here yet"},
		Certificate: &store.Certificate{Domain: "wiki.test", Route: "web / public", State: store.CertDeferred}, ServiceState: "DNS pending"})
	if apply(store.RunChange{RunID: run.ID, Checkpoint: &store.CheckpointChange{Position: 2, Status: "succeeded", From: []string{"running"}}}) {
		t.Fatal("a change guarded by a status the checkpoint no longer has was applied")
	}
	apply(store.RunChange{RunID: run.ID, Status: store.RunSucceededWithWarnings, Detail: map[string]any{"summary": "1 route deferred"}})

	evs, err := db.RunEventsAfter(ctx, run.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"run": {"reason": "", "status": "pending", "summary": ""}}`,
		`{"run": {"reason": "", "status": "running", "summary": ""}}`,
		`{"run": {"reason": "", "status": "running", "summary": ""}, "checkpoint": {"kind": "issue-tls", "name": "Issue TLS certificate · web / public", "status": "skipped", "warning": "TLS deferred: wiki.test is not pointing here yet", "position": 2}}`,
		`{"run": {"reason": "", "status": "succeeded-with-warnings", "summary": "1 route deferred"}}`,
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) || string(e.Payload) != want[i] {
			t.Errorf("event %d (seq %d) = %s\nwant %s", i+1, e.Seq, e.Payload, want[i])
		}
	}
	if evs[2].Checkpoint == nil || *evs[2].Checkpoint != 2 || evs[1].Checkpoint != nil {
		t.Errorf("checkpoint positions of the events: %v %v", evs[1].Checkpoint, evs[2].Checkpoint)
	}
	envEvs, err := db.EnvironmentEventsAfter(ctx, env.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range envEvs {
		var p struct {
			Type string `json:"type"`
			Run  struct {
				ID     int64  `json:"id"`
				Kind   string `json:"kind"`
				Status string `json:"status"`
			} `json:"run"`
			Service *struct{ Domain, State string } `json:"service"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Run.ID != run.ID || p.Run.Kind != "deploy" || e.RunID == nil || *e.RunID != run.ID {
			t.Errorf("environment event %s names run %+v", e.Payload, p.Run)
		}
		if p.Type == "service.state" && (p.Service == nil || p.Service.Domain != "wiki.test" || p.Service.State != "DNS pending") {
			t.Errorf("service event %s", e.Payload)
		}
		types = append(types, p.Type)
	}
	if got := len(types); got != 3 || types[0] != "run.started" || types[1] != "service.state" || types[2] != "run.finished" {
		t.Errorf("environment events %v, want run.started, service.state, run.finished", types)
	}
}

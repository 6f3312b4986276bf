package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
)

// TestRestoreBringsBackAnEarlierVersionAsANewOne: every replaced or
// deleted version is kept sealed; restoring v1 stores its plaintext as the
// next version, is audited by name and versions, and never leaves a
// plaintext in the audit record.
func TestRestoreBringsBackAnEarlierVersionAsANewOne(t *testing.T) {
	f := newValuesFixture(t)
	ctx := context.Background()
	for _, v := range []string{"restore-me-1", "second-2"} {
		if _, err := f.vault.SetValue(ctx, f.actor, f.env, "SESSION_SECRET", v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.vault.DeleteValue(ctx, f.actor, f.env, "SESSION_SECRET"); err != nil {
		t.Fatal(err)
	}
	earlier, err := f.db.EarlierValueVersions(ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kept []int
	for _, v := range earlier["SESSION_SECRET"] {
		kept = append(kept, v.Version)
		if v.SetBy != "Ada" {
			t.Errorf("v%d set by %q, want Ada", v.Version, v.SetBy)
		}
	}
	if len(kept) != 2 || kept[0] != 2 || kept[1] != 1 {
		t.Fatalf("kept earlier versions %v, want [2 1] (the deleted one included)", kept)
	}
	v, err := f.vault.RestoreValue(ctx, f.actor, f.env, "SESSION_SECRET", 1)
	if err != nil || v != 3 {
		t.Fatalf("restore v1: version %d, %v; want v3", v, err)
	}
	got, err := f.vault.ResolveValuesForDeploy(ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got["SESSION_SECRET"] != "restore-me-1" {
		t.Fatal("after restoring v1, the current value is not v1's")
	}
	if _, err := f.vault.RestoreValue(ctx, f.actor, f.env, "SESSION_SECRET", 3); apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("restore of the current version: %v, want a conflict", err)
	}
	if _, err := f.vault.RestoreValue(ctx, f.actor, f.env, "SESSION_SECRET", 9); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("restore of a version that never was: %v, want not found", err)
	}
	// The other environment's versions are not this one's.
	if _, err := f.vault.RestoreValue(ctx, f.actor, f.other, "SESSION_SECRET", 1); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("restore from another environment: %v, want not found", err)
	}
	recs, _, err := f.db.AuditEvents(ctx, store.AuditQuery{All: true, Action: "value.restored"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("value.restored records: %d, %v", len(recs), err)
	}
	detail, _ := json.Marshal(recs[0].Detail)
	if !strings.Contains(string(detail), `"restored":1`) || !strings.Contains(string(detail), `"version":3`) || strings.Contains(string(detail), "restore-me") {
		t.Errorf("audit detail %s, want restored 1 and version 3 and no plaintext", detail)
	}
}

// TestRotationReSealsEarlierVersions: a key rotation seals the kept
// versions again, so the retired key is needed for nothing and an earlier
// version restores with the new key alone.
func TestRotationReSealsEarlierVersions(t *testing.T) {
	oldKey, newKey := store.GenerateKey(), store.GenerateKey()
	f := newValuesFixture(t, oldKey)
	ctx := context.Background()
	for _, v := range []string{"before-rotation-1", "before-rotation-2"} {
		if _, err := f.vault.SetValue(ctx, f.actor, f.env, "TOKEN", v); err != nil {
			t.Fatal(err)
		}
	}
	rotator, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: newKey + "," + oldKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.NewVault(f.db, rotator).RotateKey(ctx, store.Actor{RequestID: "test"}, rotator.IDs()[0], nil); err != nil {
		t.Fatal(err)
	}
	newOnly, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: newKey})
	if err != nil {
		t.Fatalf("the new key alone after the rotation: %v", err)
	}
	v := store.NewVault(f.db, newOnly)
	if _, err := v.RestoreValue(ctx, f.actor, f.env, "TOKEN", 1); err != nil {
		t.Fatalf("restore v1 with the new key alone: %v", err)
	}
	got, err := v.ResolveValuesForDeploy(ctx, f.env.ID)
	if err != nil || got["TOKEN"] != "before-rotation-1" {
		t.Fatalf("after restoring v1 with the new key alone: err %v, value differs: %v", err, got["TOKEN"] != "before-rotation-1")
	}
}

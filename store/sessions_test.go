package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/skali-dev/studio/store/storetest"
)

// TestSessionTouchMovesTheExpiryAlone: a request that changed nothing in a
// session moves its idle expiry (never past its deadline), leaves its data
// as the last change wrote it, and brings back no ended session.
func TestSessionTouchMovesTheExpiryAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	s := db.Sessions()
	s.IdleTimeout = time.Hour
	deadline := time.Now().Add(24 * time.Hour)
	expiry := func(token string) (time.Time, string, bool) {
		data, found, err := s.FindCtx(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		var e time.Time
		db.Pool.QueryRow(ctx, `SELECT expiry FROM sessions s WHERE s.data = $1`, data).Scan(&e)
		return e, string(data), found
	}

	// A commit ends the session an hour from now, not at its deadline.
	if err := s.CommitCtx(ctx, "a", []byte("first"), deadline); err != nil {
		t.Fatal(err)
	}
	e1, _, _ := expiry("a")
	if d := time.Until(e1); d > time.Hour || d < 59*time.Minute {
		t.Fatalf("a committed session expires in %v, want its idle timeout of 1h", d)
	}
	// The row is made to expire sooner, as if untouched for 30 minutes.
	db.Pool.Exec(ctx, `UPDATE sessions SET expiry = now() + interval '30 minutes'`)
	if err := s.Touch(ctx, "a", deadline); err != nil {
		t.Fatal(err)
	}
	e2, data, _ := expiry("a")
	if d := time.Until(e2); d < 59*time.Minute || data != "first" {
		t.Errorf("after a touch: expires in %v with data %q, want 1h and the data unchanged", d, data)
	}
	// Never past the deadline.
	db.Pool.Exec(ctx, `UPDATE sessions SET expiry = now() + interval '1 minute'`)
	if err := s.Touch(ctx, "a", time.Now().Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if e3, _, _ := expiry("a"); time.Until(e3) > 10*time.Minute {
		t.Errorf("a touch moved the expiry %v away, past the deadline 10 minutes away", time.Until(e3))
	}
	// An ended session stays ended.
	if err := s.DeleteCtx(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Touch(ctx, "a", deadline); err != nil {
		t.Fatal(err)
	}
	if _, _, found := expiry("a"); found {
		t.Error("a touch brought a deleted session back")
	}
}

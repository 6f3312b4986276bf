package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SessionStore keeps scs sessions in PostgreSQL, so that every replica sees
// every session and a restart signs nobody out. It implements scs.CtxStore.
//
// Sessions are stored under the SHA-256 of their token, never the token:
// a dump of the database or a read of the table yields no cookie that signs
// anyone in. The token has 256 random bits, so an unsalted hash is enough.
//
// A session's expiry is the sooner of its absolute deadline and IdleTimeout
// after its last request. The idle part is kept here rather than by scs: scs
// with an idle timeout rewrites the whole session at the end of every
// request, so a request that read it before another changed it (a page's
// live read beside a form's post) wrote the old data back, losing the
// post's message or bringing back a session signed out meanwhile. A request
// that changes nothing only moves the expiry (Touch).
type SessionStore struct {
	db *DB
	// IdleTimeout ends a session this long after its last request (0:
	// only the deadline ends it).
	IdleTimeout time.Duration
}

// Sessions returns the session store on db.
func (db *DB) Sessions() *SessionStore { return &SessionStore{db: db} }

// sessionKey is what a session is stored under: the SHA-256 of its token.
func sessionKey(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// FindCtx returns the data of an unexpired session.
func (s *SessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	var data []byte
	err := s.db.Pool.QueryRow(ctx, `SELECT data FROM sessions WHERE token_hash = $1 AND expiry > now()`, sessionKey(token)).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: find session: %w", err)
	}
	return data, true, nil
}

// CommitCtx saves a session's data until expiry (its deadline), or until
// IdleTimeout from now when that is sooner.
func (s *SessionStore) CommitCtx(ctx context.Context, token string, data []byte, expiry time.Time) error {
	expiry = s.idleExpiry(expiry)
	_, err := s.db.Pool.Exec(ctx, `
		INSERT INTO sessions (token_hash, data, expiry) VALUES ($1, $2, $3)
		ON CONFLICT (token_hash) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry`,
		sessionKey(token), data, expiry.UTC())
	if err != nil {
		return fmt.Errorf("store: commit session: %w", err)
	}
	return nil
}

// idleExpiry is the sooner of deadline and IdleTimeout from now.
func (s *SessionStore) idleExpiry(deadline time.Time) time.Time {
	if s.IdleTimeout > 0 {
		if idle := time.Now().Add(s.IdleTimeout); idle.Before(deadline) {
			return idle
		}
	}
	return deadline
}

// Touch records a request of a session that changed nothing in it: its
// expiry moves to the sooner of deadline and IdleTimeout from now. Its data
// is left as it is, and a session that was ended meanwhile stays ended. A
// session whose expiry moved less than a hundredth of IdleTimeout ago is
// not written again.
func (s *SessionStore) Touch(ctx context.Context, token string, deadline time.Time) error {
	if s.IdleTimeout <= 0 {
		return nil
	}
	expiry := s.idleExpiry(deadline)
	_, err := s.db.Pool.Exec(ctx, `UPDATE sessions SET expiry = $2 WHERE token_hash = $1 AND expiry > now() AND expiry < $3`,
		sessionKey(token), expiry.UTC(), expiry.Add(-s.IdleTimeout/100).UTC())
	if err != nil {
		return fmt.Errorf("store: touch session: %w", err)
	}
	return nil
}

// DeleteCtx ends a session.
func (s *SessionStore) DeleteCtx(ctx context.Context, token string) error {
	if _, err := s.db.Pool.Exec(ctx, `DELETE FROM sessions WHERE token_hash = $1`, sessionKey(token)); err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}

// Find implements scs.Store for callers without a context.
func (s *SessionStore) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}

// Commit implements scs.Store.
func (s *SessionStore) Commit(token string, data []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, data, expiry)
}

// Delete implements scs.Store.
func (s *SessionStore) Delete(token string) error {
	return s.DeleteCtx(context.Background(), token)
}

// DeleteExpired removes sessions past their expiry and returns how many.
func (s *SessionStore) DeleteExpired(ctx context.Context) (int64, error) {
	tag, err := s.db.Pool.Exec(ctx, `DELETE FROM sessions WHERE expiry <= now()`)
	if err != nil {
		return 0, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}

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
type SessionStore struct {
	db *DB
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

// CommitCtx saves a session's data until expiry.
func (s *SessionStore) CommitCtx(ctx context.Context, token string, data []byte, expiry time.Time) error {
	_, err := s.db.Pool.Exec(ctx, `
		INSERT INTO sessions (token_hash, data, expiry) VALUES ($1, $2, $3)
		ON CONFLICT (token_hash) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry`,
		sessionKey(token), data, expiry.UTC())
	if err != nil {
		return fmt.Errorf("store: commit session: %w", err)
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

package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"github.com/skali-dev/studio/humanize"
	"time"

	"github.com/skali-dev/studio/apperr"
)

// LoginTokenTTL is how long a local sign-in link stays valid.
const LoginTokenTTL = 15 * time.Minute

// CreateLoginToken makes a one-time local sign-in token (256 random bits)
// valid for LoginTokenTTL. Only its hash is stored, so a database dump does
// not sign anybody in.
func (db *DB) CreateLoginToken(ctx context.Context) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	_, err := db.Pool.Exec(ctx, `INSERT INTO login_tokens (token_hash, expires_at) VALUES ($1, $2)`,
		sum[:], db.Now().Add(LoginTokenTTL).UTC())
	if err != nil {
		return "", fmt.Errorf("store: create login token: %w", err)
	}
	return token, nil
}

// UseLoginToken consumes a local sign-in token: it succeeds once, within its
// lifetime, and fails with an apperr.Unauthorized error that says why otherwise.
func (db *DB) UseLoginToken(ctx context.Context, token string) error {
	sum := sha256.Sum256([]byte(token))
	now := db.Now().UTC()
	tag, err := db.Pool.Exec(ctx, `
		UPDATE login_tokens SET used_at = $2
		WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2`, sum[:], now)
	if err != nil {
		return fmt.Errorf("store: use login token: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var used bool
	var expires time.Time
	err = db.Pool.QueryRow(ctx, `SELECT used_at IS NOT NULL, expires_at FROM login_tokens WHERE token_hash = $1`, sum[:]).Scan(&used, &expires)
	switch {
	case err != nil:
		return apperr.Errorf(apperr.Unauthorized, "This sign-in link is not valid. Run 'studio login-link' for a new one.")
	case used:
		return apperr.Errorf(apperr.Unauthorized, "This sign-in link has already been used. Run 'studio login-link' for a new one.")
	default:
		return apperr.Errorf(apperr.Unauthorized, "This sign-in link expired at %s. Run 'studio login-link' for a new one.", humanize.HourMinute(expires))
	}
}

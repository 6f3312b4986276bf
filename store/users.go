package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skali-dev/studio/apperr"
)

// LocalIssuer is the issuer of the built-in local administrator, who signs in
// with a one-time link instead of an identity provider.
const LocalIssuer = "local"

// User is a person who signs in to the Studio.
type User struct {
	ID         int64
	Issuer     string
	Subject    string
	Email      string
	Name       string
	IsAdmin    bool
	CreatedAt  time.Time
	LastSignIn *time.Time
}

// DisplayName is the name to show for the user: the name, else the email,
// else the subject.
func (u *User) DisplayName() string { return displayName(u.Name, u.Email, u.Subject) }

// displayName is the one rule for showing a person: the name, else the
// email, else the subject. displayNameOf is the same rule in SQL.
func displayName(name, email, subject string) string {
	switch {
	case name != "":
		return name
	case email != "":
		return email
	}
	return subject
}

// displayNameOf is a SQL expression for the display name of the user whose
// id is in column, or ” when there is none (the user was deleted).
func displayNameOf(column string) string {
	return `COALESCE((SELECT CASE WHEN u.name <> '' THEN u.name WHEN u.email <> '' THEN u.email ELSE u.subject END
		FROM users u WHERE u.id = ` + column + `), '')`
}

// userDisplayName is displayNameOf for a list joined with users u (LEFT
// JOIN users u ON u.id = ...): one join instead of a lookup per row.
const userDisplayName = `COALESCE(CASE WHEN u.name <> '' THEN u.name WHEN u.email <> '' THEN u.email ELSE u.subject END, '')`

const userColumns = `id, issuer, subject, email, name, is_admin, created_at, last_sign_in_at`

// scanUser scans userColumns and then extra.
func scanUser(row pgx.Row, extra ...any) (*User, error) {
	var u User
	err := row.Scan(append([]any{&u.ID, &u.Issuer, &u.Subject, &u.Email, &u.Name, &u.IsAdmin, &u.CreatedAt, &u.LastSignIn}, extra...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No such user.")
	}
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// UserByID returns the user with the id, or a apperr.NotFound error. Its
// IsAdmin follows the configured list of installation admins
// (SetInstallationAdmins).
func (db *DB) UserByID(ctx context.Context, id int64) (*User, error) {
	var verified bool
	u, err := scanUser(db.Pool.QueryRow(ctx, `SELECT `+userColumns+`, email_verified FROM users WHERE id = $1`, id), &verified)
	if err != nil {
		return nil, fmt.Errorf("store: user by id: %w", err)
	}
	db.applyAdmins(u, verified)
	return u, nil
}

// UpsertSignIn records a sign-in of the identity issuer+subject whose email
// is known to be theirs (the built-in administrator): it creates the user on
// first sign-in, refreshes email, name and admin flag, and stamps the
// sign-in time.
func (db *DB) UpsertSignIn(ctx context.Context, issuer, subject, email, name string, isAdmin bool) (*User, error) {
	u, err := upsertSignIn(ctx, db.Pool, issuer, subject, email, name, true, isAdmin)
	if err != nil {
		return nil, fmt.Errorf("store: record sign-in: %w", err)
	}
	return u, nil
}

// upsertSignIn is the insert-or-refresh of a sign-in that UpsertSignIn and
// SignInOIDC share.
func upsertSignIn(ctx context.Context, q querier, issuer, subject, email, name string, emailVerified, isAdmin bool) (*User, error) {
	return scanUser(q.QueryRow(ctx, `
		INSERT INTO users (issuer, subject, email, name, email_verified, is_admin, last_sign_in_at)
		VALUES ($1, $2, $3, $4, $5, $6, now())
		ON CONFLICT (issuer, subject) DO UPDATE
		SET email = EXCLUDED.email, name = EXCLUDED.name, email_verified = EXCLUDED.email_verified,
		    is_admin = EXCLUDED.is_admin, last_sign_in_at = now()
		RETURNING `+userColumns, issuer, subject, email, name, emailVerified, isAdmin))
}

// PendingIssuer is the issuer of a pending user: someone an environment admin
// added by email before they ever signed in. Their row is keyed by the email
// and is claimed by the first identity-provider sign-in with that (verified)
// email, so the memberships granted in advance carry over.
const PendingIssuer = ""

// Pending reports whether the user was added by email and has not signed in yet.
func (u *User) Pending() bool { return u.Issuer == PendingIssuer }

// OIDCSignIn is an identity an OpenID provider vouched for.
type OIDCSignIn struct {
	Issuer, Subject, Email, Name string
	// EmailVerified is true only when the provider said so (the
	// email_verified claim); an unverified email never claims a pending
	// user nor a membership granted to that address.
	EmailVerified bool
	IsAdmin       bool
}

// SignInOIDC records a sign-in through an OpenID provider. The user is
// issuer+subject; on their first sign-in a pending user with the same
// verified email is claimed (keeping its memberships) instead of creating a
// new row. Email, name and the admin flag are refreshed every time.
func (db *DB) SignInOIDC(ctx context.Context, s OIDCSignIn) (*User, error) {
	var u *User
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE issuer = $1 AND subject = $2)`,
			s.Issuer, s.Subject).Scan(&exists); err != nil {
			return err
		}
		if !exists && s.EmailVerified && s.Email != "" {
			// Claim the pending user of this email, if there is one.
			if _, err := tx.Exec(ctx, `
				UPDATE users SET issuer = $1, subject = $2
				WHERE id = (SELECT id FROM users WHERE issuer = '' AND lower(email) = lower($3) ORDER BY id LIMIT 1)`,
				s.Issuer, s.Subject, s.Email); err != nil {
				return err
			}
		}
		var err error
		u, err = upsertSignIn(ctx, tx, s.Issuer, s.Subject, s.Email, s.Name, s.EmailVerified, s.IsAdmin)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: record sign-in: %w", err)
	}
	return u, nil
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
func (u *User) DisplayName() string {
	switch {
	case u.Name != "":
		return u.Name
	case u.Email != "":
		return u.Email
	}
	return u.Subject
}

const userColumns = `id, issuer, subject, email, name, is_admin, created_at, last_sign_in_at`

func scanUser(row pgx.Row) (*User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Issuer, &u.Subject, &u.Email, &u.Name, &u.IsAdmin, &u.CreatedAt, &u.LastSignIn)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, Errorf(NotFound, "No such user.")
	}
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// UserByID returns the user with the id, or a NotFound error.
func (db *DB) UserByID(ctx context.Context, id int64) (*User, error) {
	u, err := scanUser(db.Pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("store: user by id: %w", err)
	}
	return u, nil
}

// UpsertSignIn records a sign-in of the identity issuer+subject: it creates
// the user on first sign-in, refreshes email, name and admin flag from the
// identity provider, and stamps the sign-in time.
func (db *DB) UpsertSignIn(ctx context.Context, issuer, subject, email, name string, isAdmin bool) (*User, error) {
	u, err := scanUser(db.Pool.QueryRow(ctx, `
		INSERT INTO users (issuer, subject, email, name, is_admin, last_sign_in_at)
		VALUES ($1, $2, $3, $4, $5, now())
		ON CONFLICT (issuer, subject) DO UPDATE
		SET email = EXCLUDED.email, name = EXCLUDED.name, is_admin = EXCLUDED.is_admin, last_sign_in_at = now()
		RETURNING `+userColumns, issuer, subject, email, name, isAdmin))
	if err != nil {
		return nil, fmt.Errorf("store: record sign-in: %w", err)
	}
	return u, nil
}

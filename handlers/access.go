package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/skali-dev/studio/store"
)

// The access rule: who a request is, and what it may do on an environment.
// Pages (web's session middleware, then Environment), the JSON API (web's
// token middleware, then Environment) and the event streams (web/stream,
// at the handshake and at each re-check of an open stream) decide through
// these three functions and no others:
//
//   - SessionUser: a session → its user;
//   - TokenUser: an API token → its owner, while the token is usable;
//   - RoleOn: a user (and the token they act with) → their role on an
//     environment.

// ErrSessionEnded is SessionUser's answer for a session past its absolute
// lifetime, counted from sign-in (which token renewal does not reset).
var ErrSessionEnded = errors.New("handlers: the session has passed its lifetime")

// SessionUser returns the user of the session loaded in ctx and when they
// signed in: nil (and no error) for an anonymous session, ErrSessionEnded
// for one past SessionLifetime, and the store's error (NotFound when the
// user is gone) when the user cannot be read.
func (b *Base) SessionUser(ctx context.Context) (*store.User, time.Time, error) {
	// Only the user's id and the sign-in time live in the session.
	id := b.Sessions.GetInt64(ctx, sessionUserID)
	if id == 0 {
		return nil, time.Time{}, nil
	}
	signedIn := time.UnixMilli(b.Sessions.GetInt64(ctx, sessionSignedIn))
	if b.SessionEnded(signedIn) {
		return nil, signedIn, ErrSessionEnded
	}
	u, err := b.DB.UserByID(ctx, id)
	if err != nil {
		return nil, signedIn, err
	}
	return u, signedIn, nil
}

// SessionEnded reports whether a session signed in at signedIn is past its
// absolute lifetime (never, with SessionLifetime zero).
func (b *Base) SessionEnded(signedIn time.Time) bool {
	return b.SessionLifetime > 0 && time.Since(signedIn) > b.SessionLifetime
}

// TokenUser returns the owner of the API token t, who acts with it, while
// t is neither revoked nor expired (Unauthorized, saying which, otherwise;
// NotFound when the owner is gone).
func (b *Base) TokenUser(ctx context.Context, t *store.Token) (*store.User, error) {
	if err := t.Usable(b.DB.Now()); err != nil {
		return nil, err
	}
	return b.DB.UserByID(ctx, t.UserID)
}

// RoleOn returns u's role on the environment, capped by the scope of the
// API token t when u acts with one (t nil for a session): a token acts with
// the least of its scope and its owner's current role, checked at every
// use, so an owner who loses a role takes it from their tokens at once.
func (b *Base) RoleOn(ctx context.Context, u *store.User, t *store.Token, environmentID int64) (store.Role, error) {
	role, err := b.DB.EnvironmentRole(ctx, u, environmentID)
	if err != nil || t == nil {
		return role, err
	}
	return store.MinRole(role, t.RoleOn(environmentID)), nil
}

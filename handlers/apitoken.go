package handlers

import (
	"context"

	"github.com/skali-dev/studio/store"
)

type tokenKey struct{}

// WithToken returns ctx carrying the API token a request authenticated
// with; its owner is the request's user (WithUser).
func WithToken(ctx context.Context, t *store.Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// CurrentToken returns the API token of the request, or nil for a request
// made in a browser session.
func CurrentToken(ctx context.Context) *store.Token {
	t, _ := ctx.Value(tokenKey{}).(*store.Token)
	return t
}

// tokenProjectRole is the highest role a token grants on any environment of
// the project (RoleOn each).
func (b *Base) tokenProjectRole(ctx context.Context, u *store.User, t *store.Token, project string) (store.Role, error) {
	best := store.RoleNone
	for _, g := range t.Scope {
		if g.Project != project {
			continue
		}
		r, err := b.RoleOn(ctx, u, t, g.EnvironmentID)
		if err != nil {
			return store.RoleNone, err
		}
		if r.Includes(best) {
			best = r
		}
	}
	return best, nil
}

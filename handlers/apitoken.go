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

// tokenCap lowers role to what the request's token grants on the
// environment: a token acts with the least of its scope and its owner's
// current role, checked at every use, so an owner who loses a role takes
// it from their tokens at once.
func tokenCap(ctx context.Context, environmentID int64, role store.Role) store.Role {
	t := CurrentToken(ctx)
	if t == nil {
		return role
	}
	return store.MinRole(role, t.RoleOn(environmentID))
}

// tokenProjectRole is the highest role a token grants on any environment of
// the project, each capped by its owner's current role there.
func (b *Base) tokenProjectRole(ctx context.Context, u *store.User, t *store.Token, project string) (store.Role, error) {
	best := store.RoleNone
	for _, g := range t.Scope {
		if g.Project != project {
			continue
		}
		own, err := b.DB.EnvironmentRole(ctx, u, g.EnvironmentID)
		if err != nil {
			return store.RoleNone, err
		}
		if r := store.MinRole(own, g.Role); r.Includes(best) {
			best = r
		}
	}
	return best, nil
}

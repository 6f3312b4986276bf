package handlers

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
)

// ActorOf returns who acts in r, for audit records.
func ActorOf(r *http.Request) store.Actor {
	a := store.Actor{User: CurrentUser(r.Context()), RequestID: RequestID(r.Context())}
	if t := CurrentToken(r.Context()); t != nil {
		a.Token = t.Name
	}
	return a
}

// RequireAdmin fails with Forbidden unless the user is an installation admin.
func RequireAdmin(r *http.Request) error {
	if u := CurrentUser(r.Context()); u == nil || !u.IsAdmin {
		return apperr.Errorf(apperr.Forbidden, "Only installation admins can do this.")
	}
	return nil
}

// Environment loads the environment named by the {project} and {env} route
// parameters and checks that the user holds at least want on it. This is the
// one place where environment actions are authorized: a user without a role
// is refused like one with too small a role (403), so the page does not tell
// outsiders which environments exist.
func (b *Base) Environment(r *http.Request, want store.Role) (*store.Environment, store.Role, error) {
	ctx := r.Context()
	u := CurrentUser(ctx)
	if u == nil {
		return nil, store.RoleNone, apperr.Errorf(apperr.Unauthorized, "Sign in first.")
	}
	env, err := b.DB.EnvironmentByName(ctx, chi.URLParam(r, "project"), chi.URLParam(r, "env"))
	if err != nil {
		if apperr.CodeOf(err) == apperr.NotFound && !u.IsAdmin {
			return nil, store.RoleNone, apperr.Errorf(apperr.Forbidden, "You do not have access to this environment.")
		}
		return nil, store.RoleNone, err
	}
	t := CurrentToken(ctx)
	role, err := b.RoleOn(ctx, u, t, env.ID)
	if err != nil {
		return nil, store.RoleNone, err
	}
	if role == store.RoleNone && t != nil && t.RoleOn(env.ID) == store.RoleNone {
		// Out of the token's scope: say so, unless its owner has no role
		// there either.
		if own, err := b.RoleOn(ctx, u, nil, env.ID); err == nil && own != store.RoleNone {
			return nil, role, apperr.Errorf(apperr.Forbidden, "The token %s may not act on %s/%s: it is not in its scope.", t.Name, env.Project, env.Name)
		}
	}
	if role == store.RoleNone {
		return nil, role, apperr.Errorf(apperr.Forbidden, "You do not have access to this environment. An environment admin can add you.")
	}
	if !role.Includes(want) {
		return nil, role, apperr.Errorf(apperr.Forbidden, "This needs the %s role on %s/%s; you are a %s.", want, env.Project, env.Name, role)
	}
	return env, role, nil
}

// project loads the project of the {project} route parameter and the user's
// highest role on it. Outsiders get 403 whether or not it exists, so the
// answer does not tell them which projects exist.
func (b *Base) project(r *http.Request) (*store.Project, store.Role, error) {
	ctx := r.Context()
	u := CurrentUser(ctx)
	if u == nil {
		return nil, store.RoleNone, apperr.Errorf(apperr.Unauthorized, "Sign in first.")
	}
	p, err := b.DB.ProjectByName(ctx, chi.URLParam(r, "project"))
	if err != nil {
		if apperr.CodeOf(err) == apperr.NotFound && !u.IsAdmin {
			return nil, store.RoleNone, apperr.Errorf(apperr.Forbidden, "You do not have access to this project.")
		}
		return nil, store.RoleNone, err
	}
	role, err := b.DB.ProjectRole(ctx, u, p.ID)
	if t := CurrentToken(ctx); t != nil && err == nil {
		role, err = b.tokenProjectRole(ctx, u, t, p.Name)
	}
	if err != nil {
		return nil, store.RoleNone, err
	}
	if role == store.RoleNone {
		return nil, role, apperr.Errorf(apperr.Forbidden, "You do not have access to this project. An environment admin can add you.")
	}
	return p, role, nil
}

// RunOf returns run number id of env, or NotFound when there is none
// there: the run page and the run's event stream check a run the same way,
// after Environment checked the viewer's role.
func (b *Base) RunOf(ctx context.Context, env *store.Environment, id int64) (*store.Run, error) {
	if id < 1 {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	run, err := b.DB.RunByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if run.EnvironmentID != env.ID {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	return run, nil
}

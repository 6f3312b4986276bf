// Package handlers holds one file per resource of the Studio. A handler
// parses the request, checks the actor's role, calls store, compiler and
// runs, and renders a view or redirects with 303 See Other. Handlers return
// errors; web maps them to status codes and error pages in one place.
package handlers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/a-h/templ"
	"github.com/alexedwards/scs/v2"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Func is a handler that may fail; web turns the error into a page.
type Func func(w http.ResponseWriter, r *http.Request) error

// Base holds what every handler needs. Handlers embed a *Base.
type Base struct {
	DB       *store.DB
	Sessions *scs.SessionManager
	Logger   *slog.Logger
	// OIDC is true when an OpenID provider is configured; without one,
	// only the local administrator can sign in.
	OIDC bool
	// SessionLifetime ends a session this long after sign-in, however
	// active (SessionUser); zero never ends one.
	SessionLifetime time.Duration
}

type ctxKey int

const (
	userKey ctxKey = iota
	requestIDKey
)

// WithUser returns ctx carrying the signed-in user.
func WithUser(ctx context.Context, u *store.User) context.Context {
	return context.WithValue(ctx, userKey, u)
}

// CurrentUser returns the signed-in user, or nil for an anonymous request.
func CurrentUser(ctx context.Context) *store.User {
	u, _ := ctx.Value(userKey).(*store.User)
	return u
}

// WithRequestID returns ctx carrying the request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID returns the request id of ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// Session keys. Only identifiers and times live in sessions, never secrets.
const (
	sessionUserID    = "user_id"
	sessionSignedIn  = "signed_in_at_ms"
	sessionFlash     = "flash"
	sessionFlashKind = "flash_kind"
	// sessionAfterLogin holds the path an anonymous visitor asked for.
	sessionAfterLogin = "after_login"
)

// Flash queues a one-time message for the next page the user sees.
func (b *Base) Flash(ctx context.Context, kind, message string) {
	b.Sessions.Put(ctx, sessionFlash, message)
	b.Sessions.Put(ctx, sessionFlashKind, kind)
}

// Chrome builds the layout model of a page: title, navigation, the signed-in
// user and the pending flash message (which it consumes).
func (b *Base) Chrome(r *http.Request, title, nav string) views.Chrome {
	c := views.Chrome{Title: title, Nav: nav}
	if u := CurrentUser(r.Context()); u != nil {
		c.User = &views.UserChip{Name: u.DisplayName(), Email: u.Email, IsAdmin: u.IsAdmin}
		// The audit log is for admins; others would only meet a 403 there.
		ok, err := b.DB.AdministersAnyEnvironment(r.Context(), u)
		if err != nil {
			b.Logger.Warn("navigation: audit access", "request_id", RequestID(r.Context()), "err", err)
		}
		c.User.SeesAudit = ok
		waiting, err := b.DB.WaitingForApproval(r.Context(), u)
		if err != nil {
			b.Logger.Warn("navigation: approvals", "request_id", RequestID(r.Context()), "err", err)
		}
		c.User.Approvals = len(waiting)
	}
	// A page's script never reads a whole page again (it reads the page's
	// …/live parts, which have no chrome), so the message is the page's.
	if b.Sessions != nil {
		if msg := b.Sessions.PopString(r.Context(), sessionFlash); msg != "" {
			c.Flash = &views.Flash{Kind: b.Sessions.PopString(r.Context(), sessionFlashKind), Message: msg}
		}
	}
	return c
}

// Render writes component with status. It renders into a buffer first so a
// failing component never leaves half a page behind.
func Render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// SeeOther answers a successful post with 303 See Other to url.
func SeeOther(w http.ResponseWriter, r *http.Request, url string) error {
	http.Redirect(w, r, url, http.StatusSeeOther)
	return nil
}

// ParseForm parses the posted form. A body over the limit keeps its
// *http.MaxBytesError (413); anything else unreadable, such as a broken
// %-escape, is the sender's mistake (400), never a 500.
func ParseForm(r *http.Request) error {
	err := r.ParseForm()
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return err
	}
	return apperr.Errorf(apperr.Invalid, "The form could not be read. Go back and send it again.")
}

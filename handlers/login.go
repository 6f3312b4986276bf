package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// LocalAdmin is the identity of the built-in local administrator.
var LocalAdmin = struct{ Subject, Name, Email string }{Subject: "admin", Name: "Local administrator", Email: ""}

// Login signs people in and out: the sign-in page, the local one-time link
// and sign-out. OIDC sign-in lives in oidc.go.
type Login struct {
	*Base
	// LocalEnabled allows the one-time local sign-in link.
	LocalEnabled bool
	// OIDCEnabled shows the identity provider's button.
	OIDCEnabled bool
}

// NewLogin returns the sign-in handlers.
func NewLogin(b *Base, localEnabled, oidcEnabled bool) *Login {
	return &Login{Base: b, LocalEnabled: localEnabled, OIDCEnabled: oidcEnabled}
}

// ShowLoginPage renders the sign-in page.
func (h *Login) ShowLoginPage(w http.ResponseWriter, r *http.Request) error {
	if CurrentUser(r.Context()) != nil {
		return SeeOther(w, r, "/")
	}
	return Render(w, r, http.StatusOK, views.Login(views.LoginPage{
		Chrome:       h.Chrome(r, "Sign in", ""),
		OIDCEnabled:  h.OIDCEnabled,
		LocalEnabled: h.LocalEnabled,
	}))
}

// SignInLocal consumes a one-time link and signs in the local administrator.
func (h *Login) SignInLocal(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if !h.LocalEnabled {
		return store.Errorf(store.NotFound, "Local sign-in is turned off on this installation.")
	}
	if err := h.DB.UseLoginToken(ctx, r.URL.Query().Get("token")); err != nil {
		if aerr := h.DB.Audit(ctx, store.AuditEvent{Action: "sign-in.failed", Target: "local", RequestID: RequestID(ctx),
			Detail: map[string]any{"reason": store.ErrorMessage(err)}}); aerr != nil {
			h.Logger.Error("audit failed sign-in", "request_id", RequestID(ctx), "err", aerr)
		}
		return h.renderFailure(w, r, http.StatusUnauthorized, store.ErrorMessage(err))
	}
	u, err := h.DB.UpsertSignIn(ctx, store.LocalIssuer, LocalAdmin.Subject, LocalAdmin.Email, LocalAdmin.Name, true)
	if err != nil {
		return err
	}
	if err := h.StartSession(r, u); err != nil {
		return err
	}
	return SeeOther(w, r, h.AfterSignIn(ctx))
}

// renderFailure shows the sign-in page with a sentence saying why signing
// in failed.
func (h *Login) renderFailure(w http.ResponseWriter, r *http.Request, status int, message string) error {
	return Render(w, r, status, views.Login(views.LoginPage{
		Chrome:       h.Chrome(r, "Sign in", ""),
		OIDCEnabled:  h.OIDCEnabled,
		LocalEnabled: h.LocalEnabled,
		Error:        message,
	}))
}

// StartSession signs u in on this request's session: a fresh session token
// (so a token planted before sign-in is worthless), the user id and the
// sign-in time from which the absolute lifetime is counted, and an audit record.
func (b *Base) StartSession(r *http.Request, u *store.User) error {
	ctx := r.Context()
	if err := b.Sessions.RenewToken(ctx); err != nil {
		return err
	}
	b.Sessions.Put(ctx, sessionUserID, u.ID)
	b.Sessions.Put(ctx, sessionSignedIn, time.Now().UnixMilli())
	id := u.ID
	return b.DB.Audit(ctx, store.AuditEvent{ActorID: &id, Actor: u.DisplayName(), Action: "sign-in", Target: u.Issuer, RequestID: RequestID(ctx)})
}

// SignOut ends the session server-side and returns to the sign-in page.
func (h *Login) SignOut(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if u := CurrentUser(ctx); u != nil {
		id := u.ID
		if err := h.DB.Audit(ctx, store.AuditEvent{ActorID: &id, Actor: u.DisplayName(), Action: "sign-out", RequestID: RequestID(ctx)}); err != nil {
			return err
		}
	}
	if err := h.Sessions.Destroy(ctx); err != nil {
		return err
	}
	return SeeOther(w, r, "/login")
}

// AfterSignIn returns where to go after signing in: the page an anonymous
// visitor asked for (remembered by web's sign-in redirect) or the home page.
func (b *Base) AfterSignIn(ctx context.Context) string {
	next := b.Sessions.PopString(ctx, SessionAfterLogin)
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

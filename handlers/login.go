package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// The identity of the built-in local administrator (issuer store.LocalIssuer).
const (
	localAdminSubject = "admin"
	localAdminName    = "Local administrator"
)

// Login signs people in and out: the sign-in page, the local one-time link
// and sign-out. OIDC sign-in lives in oidc.go.
type Login struct {
	*Base
	// LocalEnabled allows the one-time local sign-in link.
	LocalEnabled bool
	// OIDCEnabled shows the identity provider's button.
	OIDCEnabled bool
	// Failures limits failed sign-ins per client address (local links and
	// OIDC callbacks alike).
	Failures *SignInLimiter
	// PublicURL is the address people use to reach the Studio: the page to
	// return to after signing in must be on it (see SignInTarget).
	PublicURL string
}

// NewLogin returns the sign-in handlers.
func NewLogin(b *Base, localEnabled, oidcEnabled bool, failures *SignInLimiter) *Login {
	return &Login{Base: b, LocalEnabled: localEnabled, OIDCEnabled: oidcEnabled, Failures: failures}
}

// The query parameters of the sign-in page. An anonymous visitor is sent to
// it with the page they asked for in next, rather than having it kept in a
// session: a session is created only once a sign-in is under way.
const (
	loginNext    = "next"
	loginExpired = "expired"
)

// LoginURL is the sign-in page that returns to next afterwards; expired says
// the visitor's form was refused because they were not signed in.
func LoginURL(next string, expired bool) string {
	q := url.Values{}
	if target, ok := SignInTarget(nil, next); ok && target != paths.Home {
		q.Set(loginNext, target)
	}
	if expired {
		q.Set(loginExpired, "1")
	}
	if len(q) == 0 {
		return paths.Login
	}
	return paths.Login + "?" + q.Encode()
}

// origin is the public URL that pages to return to must be on; nil (paths
// only) when it is not set or not a URL.
func (h *Login) origin() *url.URL {
	u, err := url.Parse(h.PublicURL)
	if err != nil || u.Host == "" {
		return nil
	}
	return u
}

// ShowLoginPage renders the sign-in page.
func (h *Login) ShowLoginPage(w http.ResponseWriter, r *http.Request) error {
	if CurrentUser(r.Context()) != nil {
		return SeeOther(w, r, paths.Home)
	}
	m := views.LoginPage{
		Chrome:       h.Chrome(r, "Sign in", ""),
		OIDCEnabled:  h.OIDCEnabled,
		LocalEnabled: h.LocalEnabled,
		OIDCStart:    paths.LoginOIDC,
	}
	if target, ok := SignInTarget(h.origin(), r.URL.Query().Get(loginNext)); ok && target != paths.Home {
		m.OIDCStart += "?" + url.Values{loginNext: {target}}.Encode()
	}
	if r.URL.Query().Get(loginExpired) != "" {
		m.Notice = "You are not signed in (or your session has expired), so nothing was changed. Sign in and try again."
	}
	return Render(w, r, http.StatusOK, views.Login(m))
}

// SignInLocal consumes a one-time link and signs in the local administrator.
func (h *Login) SignInLocal(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if !h.LocalEnabled {
		return apperr.Errorf(apperr.NotFound, "Local sign-in is turned off on this installation.")
	}
	// The link is checked before the limit: a valid link is unguessable, so
	// it signs in however many wrong ones came from the same address (behind
	// a proxy, that may be everybody's). The limit stops guessing only.
	if err := h.DB.UseLoginToken(ctx, r.URL.Query().Get("token")); err != nil {
		if apperr.CodeOf(err) == apperr.Internal {
			// Not a refused link but a failure to check it (the database
			// down, say): no failed sign-in to count, and web answers it.
			return err
		}
		if blocked, refused := h.refuseIfLimited(w, r); blocked {
			return refused
		}
		h.recordFailure(r, "local", map[string]any{"method": "local", "reason": apperr.Message(err)})
		return h.renderFailure(w, r, http.StatusUnauthorized, apperr.Message(err))
	}
	u, err := h.DB.UpsertSignIn(ctx, store.LocalIssuer, localAdminSubject, "", localAdminName, true)
	if err != nil {
		return err
	}
	if err := h.StartSession(r, u); err != nil {
		return err
	}
	return SeeOther(w, r, h.AfterSignIn(ctx))
}

// refuseIfLimited answers 429 with Retry-After when the client's address has
// used up its failed sign-ins; blocked says whether it did. It is asked only
// about attempts that cannot succeed, never about a valid one.
func (h *Login) refuseIfLimited(w http.ResponseWriter, r *http.Request) (blocked bool, err error) {
	wait, ok := h.Failures.Allow(ClientAddr(r))
	if ok {
		return false, nil
	}
	secs := tooManyAttempts(w, wait)
	return true, h.renderFailure(w, r, http.StatusTooManyRequests, fmt.Sprintf(
		"Too many failed sign-ins came from your address, so sign-in is paused for it. Try again in %d seconds.", secs))
}

// recordFailure counts a failed sign-in against the client's address and
// audits it (repeated failures from one address share one record).
func (h *Login) recordFailure(r *http.Request, target string, detail map[string]any) {
	ctx := r.Context()
	addr := ClientAddr(r)
	h.Failures.Take(addr)
	if err := h.DB.RecordFailedSignIn(ctx, addr, target, detail, RequestID(ctx)); err != nil {
		h.Logger.Error("audit failed sign-in", "request_id", RequestID(ctx), "err", err)
	}
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
	return SeeOther(w, r, paths.Login)
}

// AfterSignIn returns where to go after signing in: the page an anonymous
// visitor asked for (remembered when the sign-in started, already checked
// by SignInTarget, and checked again here) or the home page.
func (b *Base) AfterSignIn(ctx context.Context) string {
	target, ok := SignInTarget(nil, b.Sessions.PopString(ctx, sessionAfterLogin))
	if !ok {
		return paths.Home
	}
	return target
}

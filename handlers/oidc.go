package handlers

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/skali-dev/studio/store"
)

// OIDCConfig is how the Studio talks to its OpenID provider.
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is <public url>/login/oidc/callback.
	RedirectURL string
	// Admins are emails or subjects of installation admins (STUDIO_ADMINS).
	Admins []string
	// HTTPClient talks to the provider; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
}

// OIDCFlowTTL bounds the time between starting a sign-in and its callback:
// state, nonce and PKCE verifier are worthless after it.
const OIDCFlowTTL = 10 * time.Minute

// Session keys of a sign-in in progress. They are removed when the callback
// reads them, so each flow is single-use. They are random values that only
// bind the callback to this browser; none of them signs anybody in alone.
const (
	sessionOIDCState    = "oidc_state"
	sessionOIDCNonce    = "oidc_nonce"
	sessionOIDCVerifier = "oidc_verifier"
	sessionOIDCStarted  = "oidc_started"
)

// OIDC signs people in through the configured OpenID provider with the
// authorization-code flow, PKCE, state and nonce.
type OIDC struct {
	*Base
	login *Login
	cfg   OIDCConfig
	// Starts limits sign-ins started per client address: each one keeps a
	// short-lived session until it completes or expires.
	Starts *SignInLimiter

	mu       sync.Mutex
	provider *oidc.Provider
}

// NewOIDC returns the OpenID sign-in handlers. Provider discovery happens at
// the first sign-in and is retried until it succeeds, so a provider that is
// briefly down when the Studio starts does not stop it.
func NewOIDC(b *Base, login *Login, cfg OIDCConfig, starts *SignInLimiter) *OIDC {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &OIDC{Base: b, login: login, cfg: cfg, Starts: starts}
}

// signInError is a failed sign-in: what the person reads, the status, a
// short reason for the audit log and the detail for the server log.
type signInError struct {
	status  int
	reason  string
	message string
	err     error
}

func (e *signInError) Error() string { return e.reason + ": " + e.message }

func failSignIn(status int, reason, message string, err error) *signInError {
	return &signInError{status: status, reason: reason, message: message, err: err}
}

var errProviderUnreachable = "The identity provider could not be reached, so you cannot sign in right now. Try again in a minute; if it keeps failing, tell the person who runs this Studio."

func (h *OIDC) discover(ctx context.Context) (*oidc.Provider, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.provider != nil {
		return h.provider, nil
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, h.cfg.HTTPClient), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, h.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	h.provider = p
	return p, nil
}

func (h *OIDC) oauth2Config(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     h.cfg.ClientID,
		ClientSecret: h.cfg.ClientSecret,
		RedirectURL:  h.cfg.RedirectURL,
		Endpoint:     p.Endpoint(),
		Scopes:       []string{oidc.ScopeOpenID, "email", "profile"},
	}
}

// StartSignIn begins a sign-in: it keeps a fresh state, nonce and PKCE
// verifier in the session and sends the browser to the provider. It is a GET
// (a link) because a form post's redirect to another origin would be blocked
// by the form-action policy; it changes nothing but this flow's own state.
func (h *OIDC) StartSignIn(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p, err := h.discover(ctx)
	if err != nil {
		return h.fail(w, r, failSignIn(http.StatusServiceUnavailable, "provider_unreachable", errProviderUnreachable, err))
	}
	if wait, ok := h.Starts.Allow(ClientAddr(r)); !ok {
		secs := tooManyAttempts(w, wait)
		return h.login.renderFailure(w, r, http.StatusTooManyRequests, fmt.Sprintf(
			"Too many sign-ins were started from your address. Try again in %d seconds.", secs))
	}
	h.Starts.Take(ClientAddr(r))
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	if CurrentUser(ctx) == nil {
		// A visitor's session exists only for this sign-in: it ends with
		// the flow, so abandoned sign-ins do not pile up in the database.
		h.Sessions.SetDeadline(ctx, time.Now().Add(OIDCFlowTTL))
	}
	if target, ok := SignInTarget(h.login.origin(), r.URL.Query().Get(loginNext)); ok {
		h.Sessions.Put(ctx, sessionAfterLogin, target)
	} else {
		h.Sessions.Remove(ctx, sessionAfterLogin)
	}
	h.Sessions.Put(ctx, sessionOIDCState, state)
	h.Sessions.Put(ctx, sessionOIDCNonce, nonce)
	h.Sessions.Put(ctx, sessionOIDCVerifier, verifier)
	h.Sessions.Put(ctx, sessionOIDCStarted, time.Now().Unix())
	target := h.oauth2Config(p).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	http.Redirect(w, r, target, http.StatusSeeOther)
	return nil
}

// Callback finishes a sign-in: it checks state, exchanges the code with the
// PKCE verifier, verifies the ID token (signature, issuer, audience, expiry)
// and its nonce, records the user and starts the session.
//
// The failed-sign-in limit does not stop a callback that carries the state
// of the flow this browser started: that state is unguessable, so such a
// callback is somebody finishing their own sign-in, not guessing. Only a
// callback without it can be refused, and a failure of either kind counts.
func (h *OIDC) Callback(w http.ResponseWriter, r *http.Request) error {
	if !h.continuesFlow(r) {
		if blocked, err := h.login.refuseIfLimited(w, r); blocked {
			return err
		}
	}
	u, err := h.callback(r)
	if err != nil {
		var se *signInError
		if errors.As(err, &se) {
			return h.fail(w, r, se)
		}
		return err
	}
	if err := h.StartSession(r, u); err != nil {
		return err
	}
	return SeeOther(w, r, h.AfterSignIn(r.Context()))
}

// continuesFlow reports whether r carries the state of the sign-in that
// this browser's session started (without using the flow up).
func (h *OIDC) continuesFlow(r *http.Request) bool {
	state := h.Sessions.GetString(r.Context(), sessionOIDCState)
	got := r.URL.Query().Get("state")
	return state != "" && subtle.ConstantTimeCompare([]byte(got), []byte(state)) == 1
}

func (h *OIDC) callback(r *http.Request) (*store.User, error) {
	ctx := r.Context()
	q := r.URL.Query()
	// Take the flow out of the session first: whatever happens next, it
	// cannot be used again.
	state := h.Sessions.PopString(ctx, sessionOIDCState)
	nonce := h.Sessions.PopString(ctx, sessionOIDCNonce)
	verifier := h.Sessions.PopString(ctx, sessionOIDCVerifier)
	started := h.Sessions.GetInt64(ctx, sessionOIDCStarted)
	h.Sessions.Remove(ctx, sessionOIDCStarted)

	if code := q.Get("error"); code != "" {
		msg := "The identity provider did not sign you in"
		if code == "access_denied" {
			msg = "The identity provider refused the sign-in, or it was cancelled"
		}
		return nil, failSignIn(http.StatusUnauthorized, "provider_error",
			fmt.Sprintf("%s (%s). Try again, or ask your administrator whether you may use the Studio.", msg, plainCode(code)),
			fmt.Errorf("provider returned error %q: %q", plainCode(code), truncate(q.Get("error_description"), 200)))
	}
	if state == "" || nonce == "" || verifier == "" {
		return nil, failSignIn(http.StatusBadRequest, "no_flow",
			"This sign-in was not started in this browser, or it was already completed. Start again from the sign-in page.", nil)
	}
	if time.Since(time.Unix(started, 0)) > OIDCFlowTTL {
		return nil, failSignIn(http.StatusBadRequest, "flow_expired",
			"The sign-in took longer than 10 minutes, so it expired. Start again.", nil)
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
		return nil, failSignIn(http.StatusBadRequest, "state_mismatch",
			"The answer from the identity provider does not belong to the sign-in this browser started, so it was refused. Start again.", nil)
	}
	code := q.Get("code")
	if code == "" {
		return nil, failSignIn(http.StatusBadRequest, "no_code",
			"The identity provider sent no authorization code. Start again.", nil)
	}
	p, err := h.discover(ctx)
	if err != nil {
		return nil, failSignIn(http.StatusServiceUnavailable, "provider_unreachable", errProviderUnreachable, err)
	}
	cctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, h.cfg.HTTPClient), 15*time.Second)
	defer cancel()
	cctx = context.WithValue(cctx, oauth2.HTTPClient, h.cfg.HTTPClient)
	tok, err := h.oauth2Config(p).Exchange(cctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			if re.ErrorCode == "invalid_grant" {
				return nil, failSignIn(http.StatusBadRequest, "code_rejected",
					"The identity provider did not accept this sign-in: the code has expired or was already used. Start again.",
					fmt.Errorf("token endpoint: %s (status %d)", re.ErrorCode, re.Response.StatusCode))
			}
			return nil, failSignIn(http.StatusBadGateway, "token_error",
				"The identity provider refused to complete the sign-in. Check the Studio's client id and secret with your administrator.",
				fmt.Errorf("token endpoint: %q (status %d)", plainCode(re.ErrorCode), re.Response.StatusCode))
		}
		return nil, failSignIn(http.StatusServiceUnavailable, "provider_unreachable", errProviderUnreachable, redactURL(err))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, failSignIn(http.StatusBadGateway, "no_id_token",
			"The identity provider did not return an ID token, so nobody could be signed in.", nil)
	}
	idt, err := p.VerifierContext(cctx, &oidc.Config{ClientID: h.cfg.ClientID}).Verify(cctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		msg, reason := "The identity provider's ID token could not be verified, so the sign-in was refused.", "token_invalid"
		switch {
		case errors.As(err, &expired):
			msg, reason = "The identity provider's ID token has already expired. Check that the clocks of the Studio and the provider agree, then start again.", "token_expired"
		case strings.Contains(err.Error(), "expected audience"):
			msg, reason = "The ID token was issued for another application (wrong audience), so the sign-in was refused. Check STUDIO_OIDC_CLIENT_ID.", "wrong_audience"
		case strings.Contains(err.Error(), "different provider"):
			msg, reason = "The ID token was issued by another provider (wrong issuer), so the sign-in was refused.", "wrong_issuer"
		}
		return nil, failSignIn(http.StatusUnauthorized, reason, msg, err)
	}
	// go-oidc does not check the nonce: it binds the token to this flow.
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return nil, failSignIn(http.StatusUnauthorized, "nonce_mismatch",
			"The ID token was not issued for this sign-in (its nonce does not match), so it was refused. Start again.", nil)
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified *bool  `json:"email_verified"`
		Name          string `json:"name"`
		Username      string `json:"preferred_username"`
	}
	if err := idt.Claims(&claims); err != nil {
		return nil, failSignIn(http.StatusBadGateway, "bad_claims", "The identity provider's ID token could not be read.", err)
	}
	if idt.Subject == "" {
		return nil, failSignIn(http.StatusBadGateway, "no_subject", "The identity provider's ID token names nobody (no subject).", nil)
	}
	// Without an explicit email_verified: true the email is only a claim
	// (some providers let users type any address), so it grants nothing.
	verified := claims.EmailVerified != nil && *claims.EmailVerified
	name := claims.Name
	if name == "" {
		name = claims.Username
	}
	u, err := h.DB.SignInOIDC(ctx, store.OIDCSignIn{
		Issuer: idt.Issuer, Subject: idt.Subject, Email: claims.Email, Name: name,
		EmailVerified: verified, IsAdmin: h.isAdmin(idt.Subject, claims.Email, verified),
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// isAdmin reports whether STUDIO_ADMINS names the user by subject or by a
// verified email.
func (h *OIDC) isAdmin(subject, email string, emailVerified bool) bool {
	return store.InstallationAdmins(h.cfg.Admins).Names(subject, email, emailVerified)
}

// fail logs the detail of a failed sign-in with the request id, records it
// in the audit log and shows the sign-in page with a sentence saying what
// went wrong.
func (h *OIDC) fail(w http.ResponseWriter, r *http.Request, e *signInError) error {
	ctx := r.Context()
	attrs := []any{"request_id", RequestID(ctx), "reason", e.reason}
	if e.err != nil {
		attrs = append(attrs, "err", e.err.Error())
	}
	h.Logger.Warn("sign-in failed", attrs...)
	h.login.recordFailure(r, h.cfg.Issuer, map[string]any{"method": "oidc", "reason": e.reason})
	return h.login.renderFailure(w, r, e.status, e.message)
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// plainCode keeps an OAuth error code printable: letters, digits, _ and -,
// at most 40 characters.
func plainCode(s string) string {
	var b strings.Builder
	for _, c := range s {
		if b.Len() >= 40 {
			break
		}
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// redactURL strips the query of a URL error (a token request carries the
// code in its body, not its URL, but be safe) and keeps the cause.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		where := "the provider"
		if u, perr := url.Parse(ue.URL); perr == nil {
			u.RawQuery = ""
			where = u.String()
		}
		var ne net.Error
		if errors.As(ue.Err, &ne) && ne.Timeout() {
			return fmt.Errorf("%s %s: timeout", ue.Op, where)
		}
		return fmt.Errorf("%s %s: %v", ue.Op, where, ue.Err)
	}
	return err
}

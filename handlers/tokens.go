package handlers

import (
	"fmt"
	"github.com/skali-dev/studio/humanize"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// newTokenCookie carries a just-created token's id and secret from the post
// to the page it redirects to, for one minute and for that page only: the
// secret is never stored on the server, not even in the session.
const newTokenCookie = "studio_new_token"

// Tokens is the API tokens page: a person's tokens (every token for
// installation admins), creating one and revoking.
type Tokens struct {
	*Base
	// Secure marks the new-token cookie Secure (https).
	Secure bool
}

// NewTokens returns the tokens handlers.
func NewTokens(b *Base, secure bool) *Tokens { return &Tokens{Base: b, Secure: secure} }

// rolesUpTo lists the roles up to own, least first.
func rolesUpTo(own store.Role) []string {
	var out []string
	for _, r := range []store.Role{store.RoleViewer, store.RoleDeployer, store.RoleAdmin} {
		if own.Includes(r) {
			out = append(out, string(r))
		}
	}
	return out
}

func (h *Tokens) page(r *http.Request, picked map[string]string) (views.TokensPage, error) {
	ctx := r.Context()
	u := CurrentUser(ctx)
	m := views.TokensPage{Chrome: h.Chrome(r, "API tokens", "tokens"), ShowOwner: u.IsAdmin,
		Form: views.TokenForm{Days: strconv.Itoa(store.DefaultTokenDays)}}
	list, err := h.DB.Tokens(ctx, u.ID, u.IsAdmin)
	if err != nil {
		return m, err
	}
	now := h.DB.Now()
	for _, t := range list {
		row := views.TokenRow{ID: t.ID, Name: t.Name, Owner: t.Owner, State: "active",
			Created: views.Ago(t.CreatedAt), Expires: humanize.Date(t.ExpiresAt),
			CanRevoke: t.RevokedAt == nil}
		if t.LastUsedAt != nil {
			row.LastUsed = views.Ago(*t.LastUsedAt)
		}
		switch {
		case t.RevokedAt != nil:
			row.State = "revoked"
		case t.Expired(now):
			row.State, row.CanRevoke = "expired", false
		}
		for _, g := range t.Scope {
			row.Scope = append(row.Scope, g.Project+"/"+g.Environment+":"+string(g.Role))
		}
		m.Tokens = append(m.Tokens, row)
	}
	// A few environments are listed, the others found with the search
	// (?environments=): an installation has thousands. A re-shown form
	// keeps every environment it picked.
	m.EnvSearch = strings.TrimSpace(r.URL.Query().Get("environments"))
	grantable, total, err := h.DB.GrantableEnvironmentsMatching(ctx, u, m.EnvSearch, TokenChoicesShown)
	if err != nil {
		return m, err
	}
	m.MoreChoices, m.Searchable = total-len(grantable), total > TokenChoicesShown || m.EnvSearch != ""
	shown := map[string]bool{}
	for _, g := range grantable {
		shown[g.Project+"/"+g.Environment] = true
	}
	if len(picked) > 0 {
		all, err := h.DB.GrantableEnvironments(ctx, u)
		if err != nil {
			return m, err
		}
		for _, g := range all {
			if key := g.Project + "/" + g.Environment; picked[key] != "" && !shown[key] {
				grantable = append(grantable, g)
			}
		}
	}
	for _, g := range grantable {
		c := views.TokenChoice{Project: g.Project, Env: g.Environment, Roles: rolesUpTo(g.Role)}
		c.Picked = picked[g.Project+"/"+g.Environment]
		m.Choices = append(m.Choices, c)
	}
	return m, nil
}

// TokenChoicesShown is how many environments the token form lists at once.
const TokenChoicesShown = 25

// ShowTokensPage lists the tokens and the form; ?created=ID shows that new
// token's secret, once, from the cookie the post set.
func (h *Tokens) ShowTokensPage(w http.ResponseWriter, r *http.Request) error {
	m, err := h.page(r, nil)
	if err != nil {
		return err
	}
	if created := r.URL.Query().Get("created"); created != "" {
		if c, err := r.Cookie(newTokenCookie); err == nil {
			id, secret, _ := strings.Cut(c.Value, ".")
			if id == created {
				if t, err := h.DB.AuthenticateToken(r.Context(), secret); err == nil && strconv.FormatInt(t.ID, 10) == id &&
					t.UserID == CurrentUser(r.Context()).ID {
					m.Created = createdToken(r, h.Secure, t, secret)
				}
			}
			http.SetCookie(w, &http.Cookie{Name: newTokenCookie, Value: "", Path: paths.Tokens, MaxAge: -1,
				HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteStrictMode})
		}
	}
	return Render(w, r, http.StatusOK, views.Tokens(m))
}

// CreateToken creates a token of the signed-in person: fields name, scope
// (repeated project/env:role, each role no higher than the person's own
// there) and expires (days, default 90, at most 365). It answers 303 to
// /tokens?created=ID, which shows the secret once.
func (h *Tokens) CreateToken(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	u := CurrentUser(ctx)
	if err := ParseForm(r); err != nil {
		return err
	}
	name := strings.TrimSpace(r.PostForm.Get("name"))
	form := views.TokenForm{Name: name, Days: strings.TrimSpace(r.PostForm.Get("expires"))}
	grantable, err := h.DB.GrantableEnvironments(ctx, u)
	if err != nil {
		return err
	}
	own := map[string]store.TokenGrant{}
	for _, g := range grantable {
		own[g.Project+"/"+g.Environment] = g
	}
	picked := map[string]string{}
	var scope []store.TokenGrant
	for _, s := range r.PostForm["scope"] {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		where, roleName, ok := strings.Cut(s, ":")
		role, rerr := store.ParseRole(roleName)
		g, known := own[where]
		switch {
		case !ok || rerr != nil:
			form.ScopeError = fmt.Sprintf("%q is not a scope: write project/environment:role, with role viewer, deployer or admin.", s)
		case !known:
			form.ScopeError = fmt.Sprintf("You have no role on %s, so a token cannot act there.", where)
		case !g.Role.Includes(role):
			form.ScopeError = fmt.Sprintf("You are %s of %s, so a token cannot be %s there.", g.Role, where, role)
		case picked[where] != "":
			form.ScopeError = fmt.Sprintf("%s is named twice; give it one role.", where)
		}
		if form.ScopeError != "" {
			break
		}
		picked[where] = string(role)
		g.Role = role
		scope = append(scope, g)
	}
	if form.ScopeError == "" && len(scope) == 0 {
		form.ScopeError = "Choose at least one environment the token may act on."
	}
	form.NameError = store.TokenNameProblem(name)
	days := store.DefaultTokenDays
	if form.Days != "" {
		n, err := strconv.Atoi(form.Days)
		if err != nil || n < 1 || n > store.MaxTokenDays {
			form.DaysError = fmt.Sprintf("Enter a number of days from 1 to %d.", store.MaxTokenDays)
		}
		days = n
	}
	if form.NameError != "" || form.ScopeError != "" || form.DaysError != "" {
		m, err := h.page(r, picked)
		if err != nil {
			return err
		}
		m.Form = form
		return Render(w, r, http.StatusUnprocessableEntity, views.Tokens(m))
	}
	t, secret, err := h.DB.CreateToken(ctx, ActorOf(r), store.NewToken{Name: name, Scope: scope, Days: days})
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: newTokenCookie, Value: strconv.FormatInt(t.ID, 10) + "." + secret, Path: paths.Tokens,
		MaxAge: int((time.Minute).Seconds()), HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteStrictMode})
	return SeeOther(w, r, paths.TokenCreated(t.ID))
}

// RevokeToken revokes a token: the person's own, or any for installation
// admins. Someone else's token is "not found", so ids tell nothing.
func (h *Tokens) RevokeToken(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		return apperr.Errorf(apperr.NotFound, "No such token.")
	}
	t, err := h.DB.RevokeToken(r.Context(), ActorOf(r), id)
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", fmt.Sprintf("Revoked the token %s: it is refused from now on.", t.Name))
	return SeeOther(w, r, paths.Tokens)
}

// createdToken is what the page shows of a token just created: its secret,
// its scope, and a line that uses it at once: a deploy of the first
// environment it may deploy, or else a read of the environments it sees.
func createdToken(r *http.Request, secure bool, t *store.Token, secret string) *views.CreatedToken {
	c := &views.CreatedToken{ID: t.ID, Name: t.Name, Secret: secret}
	scheme := "http"
	if secure || r.TLS != nil {
		scheme = "https"
	}
	base := scheme + "://" + r.Host
	var deploy *store.TokenGrant
	for i, g := range t.Scope {
		c.Scope = append(c.Scope, fmt.Sprintf("%s/%s (%s)", g.Project, g.Environment, g.Role))
		if deploy == nil && g.Role.Includes(store.RoleDeployer) {
			deploy = &t.Scope[i]
		}
	}
	if deploy != nil {
		c.Command = fmt.Sprintf("export STUDIO_URL=%s STUDIO_TOKEN=%s && studio deploy --project %s --env %s --wait", base, secret, deploy.Project, deploy.Environment)
	} else {
		c.Command = fmt.Sprintf("curl -H 'Authorization: Bearer %s' %s/api/v1/environments", secret, base)
	}
	return c
}

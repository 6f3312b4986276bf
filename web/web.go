// Package web is the Studio's HTTP application: the chi router with every
// route in one place, the middleware, error pages and static files. The
// websocket streams it mounts are package stream (web/stream); who a
// request is and what it may do is the access rule of package handlers.
package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/static"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
	"github.com/skali-dev/studio/web/stream"
)

// Deps are what the application is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// PublicURL is the address people use to reach the Studio; it decides
	// the cookie's Secure flag and the OIDC redirect URL.
	PublicURL string
	// SessionIdleTimeout ends a session after this long without a request.
	SessionIdleTimeout time.Duration
	// SessionLifetime ends a session this long after sign-in, however active.
	SessionLifetime time.Duration
	// LocalLogin enables the one-time local administrator link.
	LocalLogin bool
	// OIDCIssuer, OIDCClientID and OIDCClientSecret configure sign-in
	// through an OpenID provider; an empty issuer turns it off. The
	// redirect URL is PublicURL + "/login/oidc/callback".
	OIDCIssuer       string
	OIDCClientID     string
	OIDCClientSecret string
	// Admins are the emails or subjects of installation admins (STUDIO_ADMINS).
	Admins []string
	// MaxBodyBytes caps every request body.
	MaxBodyBytes int64
	// Vault keeps values encrypted; without it values cannot be changed.
	Vault *store.Vault
	// Runs plans, starts and cancels deploys and checks domains; without
	// it those pages answer that deploys are not available.
	Runs *runs.Service
	// Edge answers /.well-known/skali-edge and ACME HTTP-01 challenges for
	// the local platform; nil serves neither.
	Edge http.Handler
	// SignInFailures limits failed sign-ins per client address (a burst,
	// then one more per interval); SignInStarts limits OIDC sign-ins
	// started per address. Zero values take the defaults below.
	SignInFailures, SignInStarts RateLimit
	// Hub fans run and environment events out to the event stream
	// websockets; without it the streams answer 500.
	Hub *events.Hub
	// Fragments renders the HTML fragments that event frames carry
	// (default: the run and environment pages' own components).
	Fragments stream.FragmentRenderer
	// Metrics records Prometheus metrics when set (see NewMetrics).
	Metrics *Metrics
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed when the sign-in limits tell clients apart; from any other
	// peer the header is ignored. None by default.
	TrustedProxies []netip.Prefix
	// APIRequests limits the JSON API's requests per token (a burst, then
	// one more per interval); zero takes DefaultAPIRequests.
	APIRequests RateLimit
}

// RateLimit is a token bucket: Burst attempts at once, then one per Every.
type RateLimit struct {
	Burst int
	Every time.Duration
}

// Defaults for Deps fields left zero.
const (
	DefaultSessionIdleTimeout = 12 * time.Hour
	DefaultSessionLifetime    = 7 * 24 * time.Hour
	DefaultMaxBodyBytes       = 4 << 20
)

// Default limits per client address: 20 failed sign-ins, then one every
// 15 seconds; 30 OIDC sign-ins started, then one every 10 seconds.
var (
	DefaultSignInFailures = RateLimit{Burst: 20, Every: 15 * time.Second}
	DefaultSignInStarts   = RateLimit{Burst: 30, Every: 10 * time.Second}
)

type app struct {
	deps     Deps
	logger   *slog.Logger
	sessions *scs.SessionManager
	// sessionStore is sessions' store, which keeps the idle timeout.
	sessionStore *store.SessionStore
	base         *handlers.Base
}

// New returns the Studio's HTTP handler.
func New(d Deps) http.Handler {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.SessionIdleTimeout == 0 {
		d.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if d.SessionLifetime == 0 {
		d.SessionLifetime = DefaultSessionLifetime
	}
	if d.MaxBodyBytes == 0 {
		d.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if d.SignInFailures.Burst == 0 {
		d.SignInFailures = DefaultSignInFailures
	}
	if d.SignInStarts.Burst == 0 {
		d.SignInStarts = DefaultSignInStarts
	}
	if d.APIRequests.Burst == 0 {
		d.APIRequests = DefaultAPIRequests
	}
	// The configured admins are the truth on every request, whatever was
	// stored at someone's last sign-in.
	d.DB.SetInstallationAdmins(d.Admins)
	https := strings.HasPrefix(d.PublicURL, "https://")

	sm := scs.New()
	// The store keeps the idle timeout (see store.SessionStore): scs's own
	// would write every session back at the end of every request.
	sessions := d.DB.Sessions()
	sessions.IdleTimeout = d.SessionIdleTimeout
	sm.Store = sessions
	sm.Lifetime = d.SessionLifetime
	sm.Cookie.Name = "studio_session"
	if https {
		// __Host- binds the cookie to this exact host, https and path /.
		sm.Cookie.Name = "__Host-studio_session"
	}
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Secure = https
	sm.Cookie.Path = "/"
	sm.Cookie.Persist = false

	a := &app{deps: d, logger: d.Logger, sessions: sm, sessionStore: sessions}
	a.base = &handlers.Base{DB: d.DB, Sessions: sm, Logger: d.Logger, OIDC: d.OIDCIssuer != "", SessionLifetime: d.SessionLifetime}
	return a.routes(https)
}

// routes is the Studio's whole route table.
func (a *app) routes(https bool) http.Handler {
	health := handlers.NewHealth(a.base)
	home := handlers.NewHome(a.base)
	validate := handlers.NewValidate(a.base)
	failures := handlers.NewSignInLimiter(a.deps.SignInFailures.Burst, a.deps.SignInFailures.Every)
	login := handlers.NewLogin(a.base, a.deps.LocalLogin, a.deps.OIDCIssuer != "", failures)
	login.PublicURL = a.deps.PublicURL
	oidcLogin := handlers.NewOIDC(a.base, login, handlers.OIDCConfig{
		Issuer:       a.deps.OIDCIssuer,
		ClientID:     a.deps.OIDCClientID,
		ClientSecret: a.deps.OIDCClientSecret,
		RedirectURL:  strings.TrimRight(a.deps.PublicURL, "/") + paths.LoginOIDCCallback,
		Admins:       a.deps.Admins,
	}, handlers.NewSignInLimiter(a.deps.SignInStarts.Burst, a.deps.SignInStarts.Every))

	cop := http.NewCrossOriginProtection()
	if u, err := url.Parse(a.deps.PublicURL); err == nil && u.Host != "" {
		_ = cop.AddTrustedOrigin(u.Scheme + "://" + u.Host)
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.logger.Warn("cross-origin request refused", "request_id", handlers.RequestID(r.Context()),
			"method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		a.renderError(w, r, http.StatusForbidden,
			"This form was sent from another site, so it was refused and nothing was changed.")
	}))

	r := chi.NewRouter()
	r.Use(requestID, a.deps.Metrics.instrument, accessLog(a.logger), a.recoverer, securityHeaders(https, ""), a.limitBody(a.deps.MaxBodyBytes))
	r.Use(clientAddress(a.deps.TrustedProxies))

	// Probes and assets need no session.
	r.Get("/healthz", health.Live)
	r.Get("/readyz", health.Ready)
	r.Handle(static.Prefix+"*", http.StripPrefix(static.Prefix, static.Handler()))
	// The JSON Schema of skali.yaml, for editors: documentation, no session.
	r.Get("/schema/skali.json", handlers.ServeSchema)
	// The local platform's edge identity and ACME challenges: public, no
	// session, never redirected.
	if a.deps.Edge != nil {
		r.Get(platform.EdgePath, a.deps.Edge.ServeHTTP)
		r.Get(platform.ChallengePrefix+"*", a.deps.Edge.ServeHTTP)
	}

	// The editor's live diagnostics: a compile of the text it sends, as
	// public as the validator's page, so it reads no session (a round trip
	// to the database per keystroke pause that the answer does not need).
	// Cross-origin posts are refused like every form's.
	r.With(cop.Handler).Post(paths.ValidateCheck, a.handle(validate.Check))

	// The JSON API (issue 27): bearer tokens only, no session, errors as
	// problem documents (web/api.go).
	a.apiRoutes(r)

	// Event stream websockets (package stream) read the session without
	// saving it, so they sit outside LoadAndSave; they check the Origin
	// themselves.
	streams := stream.New(stream.Options{Access: a.base, Hub: a.deps.Hub, Fragments: a.deps.Fragments, Runs: a.deps.Runs,
		Logger: a.logger, Metrics: a.deps.Metrics.Streams(), PublicURL: a.deps.PublicURL})
	// A run's stream also accepts an API token (web/stream/token.go).
	streamTokens := handlers.NewSignInLimiter(a.deps.APIRequests.Burst, a.deps.APIRequests.Every)
	r.With(stream.Bearer(a.authenticateToken(streamTokens))).Get("/projects/{project}/environments/{env}/runs/{run}/events", a.handle(streams.RunEvents))
	r.Get("/projects/{project}/environments/{env}/events", a.handle(streams.EnvironmentEvents))
	// An application's runtime log, followed live (web/stream/logs.go).
	r.Get("/projects/{project}/environments/{env}/apps/{app}/logs/follow", a.handle(streams.FollowAppLogs))

	r.Group(func(r chi.Router) {
		r.Use(cop.Handler, a.loadAndSave, markSession, a.authenticate)
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			a.renderError(w, r, http.StatusNotFound, "")
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			a.renderError(w, r, http.StatusMethodNotAllowed, "")
		})

		r.Get("/login", a.handle(login.ShowLoginPage))
		r.Get("/login/local", a.handle(login.SignInLocal))
		r.Post("/logout", a.handle(login.SignOut))
		// Public routes: sign-in (OIDC) and the manifest validator.
		// Every route added anywhere in this table needs a row in the role
		// table test (web/roles_test.go, routeTable): it walks this router
		// and fails for a route without one.
		r.Get("/validate", a.handle(validate.ShowValidatePage))
		r.Post("/validate", a.handle(validate.Validate))
		if a.deps.OIDCIssuer != "" {
			r.Get("/login/oidc", a.handle(oidcLogin.StartSignIn))
			r.Get("/login/oidc/callback", a.handle(oidcLogin.Callback))
		}

		r.Group(func(r chi.Router) {
			r.Use(a.requireUser)
			r.Get("/", a.handle(home.ShowHomePage))
			// Members, audit log, installation admin.
			// (Add a row to routeTable in web/roles_test.go for every route.)
			members := handlers.NewMembers(a.base)
			r.Get("/projects/{project}/environments/{env}/members", a.handle(members.ShowMembersPage))
			r.Post("/projects/{project}/environments/{env}/members", a.handle(members.AddMember))
			r.Post("/projects/{project}/environments/{env}/members/{user}/role", a.handle(members.ChangeMemberRole))
			r.Post("/projects/{project}/environments/{env}/members/{user}/remove", a.handle(members.RemoveMember))
			r.Get("/audit", a.handle(handlers.NewAudit(a.base).ShowAuditPage))
			// API tokens (issue 27): a person's own, every one for
			// installation admins.
			tokens := handlers.NewTokens(a.base, https)
			r.Get("/tokens", a.handle(tokens.ShowTokensPage))
			r.Post("/tokens", a.handle(tokens.CreateToken))
			r.Post("/tokens/{id}/revoke", a.handle(tokens.RevokeToken))

			// Projects, revisions, environments, values.
			projects := handlers.NewProjects(a.base)
			environments := handlers.NewEnvironments(a.base, a.deps.Vault)
			environments.Runs = a.deps.Runs
			values := handlers.NewValues(a.base, a.deps.Vault)
			r.Get("/projects/new", a.handle(projects.ShowNewProjectPage))
			r.Post("/projects", a.handle(projects.CreateProject))
			r.Get("/projects/{project}", a.handle(projects.ShowProjectPage))
			r.Get("/projects/{project}/revisions/new", a.handle(projects.ShowNewRevisionPage))
			r.Post("/projects/{project}/revisions", a.handle(projects.AddRevision))
			r.Post("/projects/{project}/environments", a.handle(environments.CreateEnvironment))
			r.Get("/projects/{project}/environments/{env}", a.handle(environments.ShowEnvironmentPage))
			r.Get("/projects/{project}/environments/{env}/live", a.handle(environments.ShowEnvironmentLive))
			r.Get("/projects/{project}/environments/{env}/values", a.handle(values.ShowValuesPage))
			r.Post("/projects/{project}/environments/{env}/values", a.handle(values.SetValue))
			r.Post("/projects/{project}/environments/{env}/values/import", a.handle(values.ImportValues))
			r.Get("/projects/{project}/environments/{env}/values/prune", a.handle(values.ShowPruneValuesPage))
			r.Post("/projects/{project}/environments/{env}/values/prune", a.handle(values.PruneValues))
			r.Get("/projects/{project}/environments/{env}/values/{name}/delete", a.handle(values.ShowDeleteValuePage))
			r.Post("/projects/{project}/environments/{env}/values/{name}/delete", a.handle(values.DeleteValue))
			r.Post("/projects/{project}/environments/{env}/values/{name}/restore", a.handle(values.RestoreValue))

			// Deploys, runs, Check now.
			deploys := handlers.NewDeploys(a.base, a.deps.Runs)
			runPages := handlers.NewRuns(a.base, a.deps.Runs)
			r.Get("/projects/{project}/environments/{env}/deploys/new", a.handle(deploys.ShowDeployPlanPage))
			r.Post("/projects/{project}/environments/{env}/deploys", a.handle(deploys.StartDeploy))
			r.Get("/projects/{project}/environments/{env}/runs", a.handle(runPages.ShowRunsPage))
			r.Get("/projects/{project}/environments/{env}/runs/{run}", a.handle(runPages.ShowRunPage))
			r.Get("/projects/{project}/environments/{env}/runs/{run}/log", a.handle(runPages.DownloadRunLog))
			r.Get("/projects/{project}/environments/{env}/runs/{run}/live", a.handle(runPages.ShowRunLive))
			// Runtime logs (issue 39): viewers of the environment.
			r.Get("/projects/{project}/environments/{env}/apps/{app}/logs", a.handle(handlers.NewAppLogs(a.base, a.deps.Runs).ShowAppLogsPage))
			r.Post("/projects/{project}/environments/{env}/runs/{run}/cancel", a.handle(runPages.CancelRun))
			r.Post("/projects/{project}/environments/{env}/probe", a.handle(runPages.CheckNow))
			// Protected environments (issue 40): the rule, approvals, the inbox.
			protection := handlers.NewProtection(a.base, a.deps.Runs)
			r.Get("/projects/{project}/environments/{env}/protection", a.handle(protection.ShowProtectionPage))
			r.Post("/projects/{project}/environments/{env}/protection", a.handle(protection.SetProtection))
			r.Post("/projects/{project}/environments/{env}/runs/{run}/approve", a.handle(protection.ApproveRun))
			r.Post("/projects/{project}/environments/{env}/runs/{run}/reject", a.handle(protection.RejectRun))
			r.Get("/approvals", a.handle(protection.ShowApprovalsPage))
			r.Get("/approvals/live", a.handle(protection.ShowApprovalsLive))

			// Revision pages, settings pages (with their danger zones),
			// deletions with typed confirmation, and the
			// confirmation page of removing a member.
			deletions := handlers.NewDeletions(a.base, a.deps.Runs)
			r.Get("/projects/{project}/revisions/{n}", a.handle(projects.ShowRevisionPage))
			r.Get("/projects/{project}/settings", a.handle(deletions.ShowProjectSettingsPage))
			r.Get("/projects/{project}/environments/{env}/settings", a.handle(deletions.ShowEnvironmentSettingsPage))
			r.Get("/projects/{project}/delete", a.handle(deletions.ShowDeleteProjectPage))
			r.Post("/projects/{project}/delete", a.handle(deletions.DeleteProject))
			r.Get("/projects/{project}/environments/{env}/delete", a.handle(deletions.ShowDeleteEnvironmentPage))
			r.Post("/projects/{project}/environments/{env}/delete", a.handle(deletions.DeleteEnvironment))
			r.Get("/projects/{project}/environments/{env}/members/{user}/remove", a.handle(members.ShowRemoveMemberPage))
			// Addresses that take posts answer GET too (after a failed post).
			forms := handlers.NewFormAddresses(a.base)
			r.Get("/projects", a.handle(forms.Projects))
			r.Get("/projects/{project}/revisions", a.handle(forms.Revisions))
			r.Get("/projects/{project}/environments", a.handle(forms.Environments))
			r.Get("/projects/{project}/environments/{env}/values/import", a.handle(forms.ValuesImport))
			// Backups (issue 13): the installation's target, schedules,
			// snapshots, restore and accept.
			admin := handlers.NewAdmin(a.base, a.deps.Runs)
			backups := handlers.NewBackups(a.base, a.deps.Runs)
			r.Get("/admin", a.handle(admin.ShowAdminPage))
			r.Post("/admin/backup-target", a.handle(admin.SetBackupTarget))
			r.Post("/admin/hostnames/move", a.handle(admin.MoveHostname))
			r.Get("/projects/{project}/environments/{env}/backups", a.handle(backups.ShowBackupsPage))
			r.Get("/projects/{project}/environments/{env}/backups/live", a.handle(backups.ShowBackupsLive))
			r.Post("/projects/{project}/environments/{env}/backups", a.handle(backups.TakeSnapshot))
			r.Post("/projects/{project}/environments/{env}/backups/schedule", a.handle(backups.SetSchedule))
			r.Post("/projects/{project}/environments/{env}/backups/schedule/remove", a.handle(backups.RemoveSchedule))
			r.Get("/projects/{project}/environments/{env}/backups/schedule/preview", a.handle(backups.PreviewSchedule))
			r.Post("/projects/{project}/environments/{env}/backups/accept", a.handle(backups.Accept))
			r.Post("/projects/{project}/environments/{env}/backups/drills", a.handle(backups.SetDrillSchedule))
			r.Post("/projects/{project}/environments/{env}/backups/drills/run", a.handle(backups.RunDrill))
			r.Get("/projects/{project}/environments/{env}/backups/{backup}/restore", a.handle(backups.ShowRestorePage))
			r.Post("/projects/{project}/environments/{env}/backups/{backup}/restore", a.handle(backups.Restore))
			r.Get("/projects/{project}/environments/{env}/backups/{backup}/remove", a.handle(backups.ShowRemovePage))
			r.Post("/projects/{project}/environments/{env}/backups/{backup}/remove", a.handle(backups.Remove))
			// Signed webhooks (issue 27): an environment's endpoints (its
			// admins), those of every environment (installation admins).
			webhooks := handlers.NewWebhooks(a.base, a.deps.Vault, https)
			webhooks.Runs = a.deps.Runs
			for _, base := range []string{"/projects/{project}/environments/{env}/webhooks", "/admin/webhooks"} {
				r.Get(base, a.handle(webhooks.ShowWebhooksPage))
				r.Post(base, a.handle(webhooks.AddWebhookEndpoint))
				r.Post(base+"/{id}/delete", a.handle(webhooks.DeleteWebhookEndpoint))
				r.Post(base+"/{id}/disable", a.handle(webhooks.DisableWebhookEndpoint))
				r.Post(base+"/{id}/enable", a.handle(webhooks.EnableWebhookEndpoint))
				r.Post(base+"/{id}/test", a.handle(webhooks.SendTestEvent))
				r.Post(base+"/deliveries/{delivery}/redeliver", a.handle(webhooks.Redeliver))
			}
		})
	})
	return r
}

// handle adapts a handler that returns an error: the error's code chooses
// the status and page, in this one place.
func (a *app) handle(fn handlers.Func) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		if isTooLarge(err) {
			a.renderTooLarge(w, r)
			return
		}
		code := apperr.CodeOf(err)
		if code == apperr.Internal && a.unavailable(r.Context(), err) {
			code = apperr.Unavailable
		}
		switch code {
		case apperr.Invalid:
			a.renderError(w, r, http.StatusBadRequest, apperr.Message(err))
		case apperr.NotFound:
			a.renderError(w, r, http.StatusNotFound, apperr.Message(err))
		case apperr.Conflict:
			a.renderError(w, r, http.StatusConflict, apperr.Message(err))
		case apperr.Unauthorized:
			if isAPI(r) {
				writeAPIProblem(w, r, http.StatusUnauthorized, apperr.Message(err))
				return
			}
			if stream.IsUpgrade(r) {
				// A handshake cannot follow a redirect: say it plainly.
				http.Error(w, apperr.Message(err), http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, paths.Login, http.StatusSeeOther)
		case apperr.Forbidden:
			a.renderError(w, r, http.StatusForbidden, apperr.Message(err))
		case apperr.Unavailable:
			a.logger.Warn("request failed: the database cannot be reached", "request_id", handlers.RequestID(r.Context()),
				"method", r.Method, "path", r.URL.Path, "err", err)
			a.renderUnavailable(w, r)
		default:
			a.logger.Error("request failed", "request_id", handlers.RequestID(r.Context()),
				"method", r.Method, "path", r.URL.Path, "err", err)
			a.renderError(w, r, http.StatusInternalServerError, "")
		}
	}
}

var errorTexts = map[int][2]string{
	http.StatusBadRequest:            {"That request could not be used", "Something in the request was not right. Go back and check the form."},
	http.StatusForbidden:             {"You do not have access", "Your role does not allow this. An environment admin can change your role."},
	http.StatusNotFound:              {"Page not found", "There is nothing at this address. It may have been renamed or removed."},
	http.StatusMethodNotAllowed:      {"Not allowed here", "This address does not accept that kind of request."},
	http.StatusConflict:              {"That conflicts with what is there", "Reload the page and try again."},
	http.StatusRequestEntityTooLarge: {"That was too large", "The request is larger than the Studio accepts. Manifests may be at most 1 MiB."},
	http.StatusInternalServerError:   {"Something went wrong", "Something went wrong on our side. The problem has been logged; please try again."},
	http.StatusServiceUnavailable:    {"Temporarily unavailable", unavailableMessage},
}

// renderError writes an error page; message overrides the default sentence.
func (a *app) renderError(w http.ResponseWriter, r *http.Request, status int, message string) {
	if isAPI(r) {
		writeAPIProblem(w, r, status, message)
		return
	}
	texts, ok := errorTexts[status]
	if !ok {
		texts = errorTexts[http.StatusInternalServerError]
	}
	if message == "" {
		message = texts[1]
	}
	var c views.Chrome
	if sessionLoaded(r) {
		c = a.base.Chrome(r, texts[0], "")
	} else {
		c = views.Chrome{Title: texts[0]}
		if u := handlers.CurrentUser(r.Context()); u != nil {
			c.User = &views.UserChip{Name: u.DisplayName(), Email: u.Email, IsAdmin: u.IsAdmin}
		}
	}
	m := views.ErrorPage{Chrome: c, Status: status, Heading: texts[0], Message: message, RequestID: handlers.RequestID(r.Context())}
	if err := handlers.Render(w, r, status, views.Error(m)); err != nil {
		http.Error(w, message, status)
	}
}

type sessionMarkKey struct{}

// markSession notes in the context that the session is loaded, so that an
// error page of a request refused before that point does not touch it.
func markSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionMarkKey{}, true)))
	})
}

func sessionLoaded(r *http.Request) bool {
	ok, _ := r.Context().Value(sessionMarkKey{}).(bool)
	return ok
}

package web

import (
	_ "embed"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/api"
	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/handlers"
)

// openAPIDocument is the JSON API's OpenAPI 3.1 document, written by hand.
//
//go:embed openapi.json
var openAPIDocument []byte

// apiPrefix starts every route of the JSON API.
const apiPrefix = "/api/v1"

// DefaultAPIRequests limits each API token: 300 requests at once, then
// four a second.
var DefaultAPIRequests = RateLimit{Burst: 300, Every: 250 * time.Millisecond}

// isAPI reports whether r is a request to the JSON API, whose errors are
// problem documents rather than pages.
func isAPI(r *http.Request) bool {
	return r.URL.Path == apiPrefix || strings.HasPrefix(r.URL.Path, apiPrefix+"/")
}

// writeAPIProblem answers an API request with a problem document whose
// title is the error page's heading and detail its sentence.
func writeAPIProblem(w http.ResponseWriter, r *http.Request, status int, message string) {
	texts, ok := errorTexts[status]
	if !ok {
		texts = errorTexts[http.StatusInternalServerError]
	}
	if status == http.StatusUnauthorized {
		texts = [2]string{"Not authenticated", "Send a token in the Authorization header: Authorization: Bearer TOKEN. Create one on the Tokens page."}
		w.Header().Set("WWW-Authenticate", `Bearer realm="studio"`)
	}
	if status == http.StatusTooManyRequests {
		texts = [2]string{"Too many requests", "This token sent too many requests. Wait a moment and try again."}
	}
	if message == "" {
		message = texts[1]
	}
	handlers.WriteProblem(w, r, api.Problem{Status: status, Title: texts[0], Detail: message})
}

// apiRoutes mounts the JSON API. Its requests are never
// cookie-authenticated: the session is not even loaded, so the
// cross-origin form protection has nothing to protect, and a request
// without a bearer token (a browser's, say) is refused with 401.
func (a *app) apiRoutes(r chi.Router) {
	api := handlers.NewAPI(a.base, a.deps.Runs, a.deps.Vault, a.deps.PublicURL)
	limiter := handlers.NewSignInLimiter(a.deps.APIRequests.Burst, a.deps.APIRequests.Every)
	r.Route(apiPrefix, func(r chi.Router) {
		r.NotFound(func(w http.ResponseWriter, r *http.Request) { writeAPIProblem(w, r, http.StatusNotFound, "") })
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			writeAPIProblem(w, r, http.StatusMethodNotAllowed, "")
		})
		r.Get("/openapi.json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(openAPIDocument)
		})
		r.Group(func(r chi.Router) {
			r.Use(a.authenticateToken(limiter))
			r.Get("/environments", a.handle(api.ListEnvironments))
			r.Post("/validate", a.handle(api.Validate))
			r.Post("/projects/{project}/revisions", a.handle(api.AddRevision))
			r.Get("/projects/{project}/environments/{env}/plan", a.handle(api.ShowPlan))
			r.Post("/projects/{project}/environments/{env}/deploys", a.handle(api.StartDeploy))
			r.Get("/projects/{project}/environments/{env}/runs/{run}", a.handle(api.ShowRun))
			r.Get("/projects/{project}/environments/{env}/health", a.handle(api.ShowHealth))
			r.Post("/projects/{project}/environments/{env}/runs/{run}/cancel", a.handle(api.CancelRun))
			r.Post("/projects/{project}/environments/{env}/runs/{run}/approve", a.handle(api.ApproveRun))
			r.Post("/projects/{project}/environments/{env}/runs/{run}/reject", a.handle(api.RejectRun))
			r.Get("/projects/{project}/environments/{env}/protection", a.handle(api.ShowProtection))
			r.Put("/projects/{project}/environments/{env}/protection", a.handle(api.SetProtection))
			r.Put("/projects/{project}/environments/{env}/values/{name}", a.handle(api.SetValue))
			r.Post("/projects/{project}/environments/{env}/values/import", a.handle(api.ImportValues))
			r.Post("/projects/{project}/environments/{env}/backups", a.handle(api.TakeSnapshot))
		})
	})
}

// authenticateToken authenticates an API request by its bearer token
// (never a cookie), limits its rate per token, records its use at most once
// a minute, and puts the token and its owner in the context.
func (a *app) authenticateToken(limiter *handlers.SignInLimiter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
			secret = strings.TrimSpace(secret)
			if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
				msg := ""
				if a.hasSessionCookie(r) {
					msg = "The API does not accept a browser session. Send a token in the Authorization header: Authorization: Bearer TOKEN."
				}
				writeAPIProblem(w, r, http.StatusUnauthorized, msg)
				return
			}
			t, err := a.deps.DB.AuthenticateToken(ctx, secret)
			if err != nil {
				a.apiAuthFailed(w, r, err)
				return
			}
			key := "token:" + strconv.FormatInt(t.ID, 10)
			if wait, ok := limiter.Allow(key); !ok {
				w.Header().Set("Retry-After", strconv.Itoa(max(int(wait.Seconds()+0.999), 1)))
				writeAPIProblem(w, r, http.StatusTooManyRequests, "")
				return
			}
			limiter.Take(key)
			u, err := a.base.TokenUser(ctx, t) // the access rule's token → user
			if err != nil {
				a.apiAuthFailed(w, r, err)
				return
			}
			if err := a.deps.DB.TouchToken(ctx, t.ID); err != nil {
				a.logger.Warn("record token use", "request_id", handlers.RequestID(ctx), "err", err)
			}
			next.ServeHTTP(w, r.WithContext(handlers.WithUser(handlers.WithToken(ctx, t), u)))
		})
	}
}

func (a *app) apiAuthFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch code := apperr.CodeOf(err); {
	case code == apperr.Unauthorized:
		writeAPIProblem(w, r, http.StatusUnauthorized, apperr.Message(err))
	case code == apperr.NotFound:
		writeAPIProblem(w, r, http.StatusUnauthorized, "The owner of this token no longer exists.")
	case a.unavailable(r.Context(), err):
		a.renderUnavailable(w, r)
	default:
		a.logger.Error("authenticate token", "request_id", handlers.RequestID(r.Context()), "err", err)
		writeAPIProblem(w, r, http.StatusInternalServerError, "")
	}
}

// hasSessionCookie reports whether r carries the Studio's session cookie.
func (a *app) hasSessionCookie(r *http.Request) bool {
	_, err := r.Cookie(a.sessions.Cookie.Name)
	return err == nil
}

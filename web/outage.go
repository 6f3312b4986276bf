package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// retryAfter is how long a page answered during a database outage asks
// the browser (and any client) to wait before trying again.
const retryAfter = 5 * time.Second

// unavailableMessage is the sentence of every answer given because the
// database cannot be reached.
const unavailableMessage = "The database cannot be reached right now. Nothing was changed by this request unless it says otherwise; try again in a few seconds."

// unavailable reports whether err is the database not answering: the
// driver says so (store.Unreachable), or the error is one nobody expected
// and the database does not answer a ping now. The ping is what tells a
// broken connection to the database from a failure elsewhere; it only runs
// on the path to an error page.
func (a *app) unavailable(ctx context.Context, err error) bool {
	switch code := apperr.CodeOf(err); {
	case code == apperr.Unavailable, store.Unreachable(err):
		return true
	case code != apperr.Internal:
		return false
	}
	return a.deps.DB.Ping(context.WithoutCancel(ctx)) != nil
}

// failInfrastructure answers a request that failed for a reason that is not
// the sender's: 503 when the database cannot be reached, 500 otherwise, and
// logs the error with the request id.
func (a *app) failInfrastructure(w http.ResponseWriter, r *http.Request, what string, err error) {
	if a.unavailable(r.Context(), err) {
		a.logger.Warn(what+": the database cannot be reached", "request_id", handlers.RequestID(r.Context()),
			"method", r.Method, "path", r.URL.Path, "err", err)
		a.renderUnavailable(w, r)
		return
	}
	a.logger.Error(what, "request_id", handlers.RequestID(r.Context()),
		"method", r.Method, "path", r.URL.Path, "err", err)
	a.renderError(w, r, http.StatusInternalServerError, "")
}

// renderUnavailable answers 503 with Retry-After and the one sentence. The
// page asks the database nothing: its chrome shows only the user already
// loaded, if any.
func (a *app) renderUnavailable(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	if isAPI(r) {
		writeAPIProblem(w, r, http.StatusServiceUnavailable, "")
		return
	}
	texts := errorTexts[http.StatusServiceUnavailable]
	c := views.Chrome{Title: texts[0]}
	if u := handlers.CurrentUser(r.Context()); u != nil {
		c.User = &views.UserChip{Name: u.DisplayName(), Email: u.Email, IsAdmin: u.IsAdmin}
	}
	m := views.ErrorPage{Chrome: c, Status: http.StatusServiceUnavailable, Heading: texts[0], Message: texts[1],
		RequestID: handlers.RequestID(r.Context())}
	// A page read may simply be read again; "//" would leave the Studio.
	if uri := r.URL.RequestURI(); (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.HasPrefix(uri, "/") && !strings.HasPrefix(uri, "//") {
		m.RetryURL = uri
	}
	if err := handlers.Render(w, r, http.StatusServiceUnavailable, views.Error(m)); err != nil {
		http.Error(w, texts[1], http.StatusServiceUnavailable)
	}
}

// loadAndSave is scs's LoadAndSave with the Studio's answers to a session
// store that fails. A session that cannot be loaded answers 503 when the
// database cannot be reached (500 otherwise), never a sign-in redirect. A
// session that cannot be saved once the handler has answered replaces the
// answer with that error, except after a post that went through (an unsafe
// method answered below 400): its change is committed, so its answer
// stands, without the session's changes (a flash message is lost; the
// page redirected to shows the change itself).
func (a *app) loadAndSave(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Cookie")
		var token string
		if c, err := r.Cookie(a.sessions.Cookie.Name); err == nil {
			token = c.Value
		}
		ctx, err := a.sessions.Load(r.Context(), token)
		if err != nil {
			a.failInfrastructure(w, r, "load session", err)
			return
		}
		sr := r.WithContext(ctx)
		sw := &sessionWriter{ResponseWriter: w, a: a, r: sr}
		next.ServeHTTP(sw, sr)
		if !sw.saved {
			sw.save(http.StatusOK)
		}
	})
}

// sessionWriter saves the session just before the handler's answer starts,
// so that the cookie can still be set.
type sessionWriter struct {
	http.ResponseWriter
	a *app
	r *http.Request
	// saved is set once the session was saved, or failed to be.
	saved bool
	// replaced is set when an error page went out instead of the
	// handler's answer, which is then dropped.
	replaced bool
}

func (sw *sessionWriter) save(status int) {
	sw.saved = true
	sm, ctx := sw.a.sessions, sw.r.Context()
	switch sm.Status(ctx) {
	case scs.Modified:
		token, expiry, err := sm.Commit(ctx)
		if err == nil {
			sm.WriteSessionCookie(ctx, sw.ResponseWriter, token, expiry)
			return
		}
		if wentThrough(sw.r, status) {
			sw.a.logger.Warn("the session could not be saved after a change went through; the change stands",
				"request_id", handlers.RequestID(ctx), "method", sw.r.Method, "path", sw.r.URL.Path,
				"status", status, "err", err)
			return
		}
		sw.replaced = true
		// The handler's own headers (a redirect's Location) are not the
		// error page's.
		sw.Header().Del("Location")
		sw.a.failInfrastructure(sw.ResponseWriter, sw.r, "save session", err)
	case scs.Destroyed:
		sm.WriteSessionCookie(ctx, sw.ResponseWriter, "", time.Time{})
	case scs.Unmodified:
		// A request that changed nothing moves the expiry alone: writing
		// the whole session back would undo what a request beside it
		// changed meanwhile.
		if token := sm.Token(ctx); token != "" {
			if err := sw.a.sessionStore.Touch(ctx, token, sm.Deadline(ctx)); err != nil {
				sw.a.logger.Warn("the session's idle timeout could not be moved", "request_id", handlers.RequestID(ctx),
					"method", sw.r.Method, "path", sw.r.URL.Path, "err", err)
			}
		}
	}
}

// wentThrough reports whether a request's answer says it changed something:
// a post (any unsafe method) answered below 400.
func wentThrough(r *http.Request, status int) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return status < http.StatusBadRequest
}

// WriteHeader saves the session, then writes the handler's status.
func (sw *sessionWriter) WriteHeader(code int) {
	if !sw.saved {
		sw.save(code)
	}
	if !sw.replaced {
		sw.ResponseWriter.WriteHeader(code)
	}
}

// Write saves the session, then writes the handler's bytes.
func (sw *sessionWriter) Write(b []byte) (int, error) {
	if !sw.saved {
		sw.save(http.StatusOK)
	}
	if sw.replaced {
		return len(b), nil
	}
	return sw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (sw *sessionWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

package web

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/web/stream"
)

// requestID gives every request an id: the caller's X-Request-Id when it is
// short and plain, a random one otherwise. It is echoed in the response,
// logged with every line and shown on error pages.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !plainID(id) {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(handlers.WithRequestID(r.Context(), id)))
	})
}

func plainID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer
// (the websocket upgrade needs its Hijacker).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// accessLog writes one structured line per request. It logs the path but
// never the query string: a sign-in link carries its token there.
func accessLog(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			status := rec.status
			if status == 0 {
				status = http.StatusOK
				if stream.IsUpgrade(r) {
					// The 101 went out on the hijacked connection.
					status = http.StatusSwitchingProtocols
				}
			}
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			} else if status < 400 && quietRoute(r) {
				level = slog.LevelDebug
			}
			if !logger.Enabled(r.Context(), level) {
				return
			}
			attrs := []any{
				"method", r.Method,
				"path", r.URL.Path,
				"status", status,
				"bytes", rec.bytes,
				"duration_ms", float64(time.Since(start).Microseconds()) / 1000,
				"request_id", handlers.RequestID(r.Context()),
			}
			if u := handlers.CurrentUser(r.Context()); u != nil {
				attrs = append(attrs, "user_id", u.ID)
			}
			logger.Log(r.Context(), level, "request", attrs...)
		})
	}
}

// quietRoutes are answered at every pause in typing (the live editor's
// check), so their successful requests are logged at debug level: a line
// per keystroke pause would bury the log and cost each answer a write.
// Their refusals and failures are logged as any request's; their counts
// and durations are in the metrics either way.
var quietRoutes = map[string]bool{paths.ValidateCheck: true}

// quietRoute reports whether r was routed to one of quietRoutes.
func quietRoute(r *http.Request) bool {
	rc := chi.RouteContext(r.Context())
	return rc != nil && quietRoutes[rc.RoutePattern()]
}

// recoverer turns a panic into the 500 page and logs it with its request id
// and stack.
func (a *app) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.logger.Error("panic while serving request",
				"request_id", handlers.RequestID(r.Context()),
				"panic", fmt.Sprint(v),
				"stack", string(debug.Stack()))
			a.renderError(w, r, http.StatusInternalServerError, "")
		}()
		next.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy allows only the Studio's own scripts, styles and
// connections: no inline script, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

func securityHeaders(https bool, formActions string) func(http.Handler) http.Handler {
	csp := contentSecurityPolicy + "; form-action 'self'" + formActions
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "same-origin")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
			if https {
				h.Set("Strict-Transport-Security", "max-age=31536000")
			}
			next.ServeHTTP(w, r)
		})
	}
}

// limitBody caps every request body. A declared length over the limit is
// refused at once. A body without a declared length (chunked) is read here,
// up to the limit, before any handler sees it: form parsing turns a read
// error into "the field is empty", so a handler would otherwise answer an
// over-long chunked body with a misleading complaint about its content.
func (a *app) limitBody(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				a.renderTooLarge(w, r)
				return
			}
			if r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if r.ContentLength < 0 {
				body, err := io.ReadAll(r.Body)
				if isTooLarge(err) {
					a.renderTooLarge(w, r)
					return
				}
				if err != nil {
					a.renderError(w, r, http.StatusBadRequest, "The request body could not be read. Send it again.")
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// renderTooLarge answers 413 naming the limits.
func (a *app) renderTooLarge(w http.ResponseWriter, r *http.Request) {
	a.renderError(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
		"The request is larger than the %s the Studio accepts, so nothing was changed. Manifests may be at most 1 MiB and a pasted .env file 1 MiB.",
		byteSize(a.deps.MaxBodyBytes)))
}

// byteSize writes n in the largest binary unit that divides it.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// authenticate loads the signed-in user from the session (the access
// rule's SessionUser). A session past its absolute lifetime is destroyed
// and the request goes on anonymous.
func (a *app) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		u, _, err := a.base.SessionUser(ctx)
		switch {
		case err == nil && u == nil:
			next.ServeHTTP(w, r)
			return
		case errors.Is(err, handlers.ErrSessionEnded):
			if err := a.sessions.Destroy(ctx); err != nil {
				a.logger.Warn("end expired session", "request_id", handlers.RequestID(ctx), "err", err)
			}
			a.base.Flash(ctx, "info", "Your session has ended after its maximum lifetime. Please sign in again.")
			next.ServeHTTP(w, r)
			return
		case err != nil && apperr.CodeOf(err) != apperr.NotFound && a.unavailable(ctx, err):
			// A signed-in person is not sent to sign in again because
			// the database is down: the request cannot be served, and says so.
			a.logger.Warn("load session user: the database cannot be reached", "request_id", handlers.RequestID(ctx), "err", err)
			a.renderUnavailable(w, r)
			return
		case err != nil:
			// The user is gone (or could not be read for another reason
			// while the database answers): the request goes on anonymous.
			a.logger.Warn("load session user", "request_id", handlers.RequestID(ctx), "err", err)
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(handlers.WithUser(ctx, u)))
	})
}

// requireUser sends anonymous requests to the sign-in page.
func (a *app) requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if handlers.CurrentUser(r.Context()) != nil {
			next.ServeHTTP(w, r)
			return
		}
		// Nothing is kept in a session for a visitor: the page to return to
		// travels in the sign-in URL, so anonymous requests write nothing.
		target := handlers.LoginURL("", true)
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			target = handlers.LoginURL(r.URL.EscapedPath(), false)
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
	})
}

// isTooLarge reports whether err comes from reading a body over the limit.
func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// Package stream delivers the Studio's live events over websockets: the
// run and environment event streams (a page's, or `studio runs watch`'s
// with an API token) and an application's followed runtime log. It owns
// the handshake (origin, the access rule, the upgrade), reading the
// client's control frames (read.go), encoding an event's frame once for
// every watcher (frame.go, with the fragments of fragments.go), writing
// them through a pool of writers that never wait (write.go, over
// sockwrite), the cache of access re-checks that open streams share
// (access.go) and streams followed with an API token (token.go).
//
// A page that shows a run or an environment opens a websocket to
// .../events?after=N and receives every event after sequence number N (the
// stored backlog), then live events, one JSON text frame per event:
//
//	{"seq": 7, "at": "...", "run": {...}, "checkpoint": {...}, "fragments": [{"id": "checkpoint-3", "html": "..."}]}
//
// (the event's payload with seq, at and the rendered fragments added).
//
// The streams are mounted outside the session middleware: a connection
// that stays open for hours must never write the session back (it would
// overwrite what the person's other tabs changed meanwhile) nor set a cookie
// on a hijacked connection. They read the session from the store once, and
// re-check the session and the role every streamRecheck and before the
// events they send (through a cache shared by the process's streams). Who
// the viewer is and what they may see is decided by the access rule pages
// and the API use (handlers/access.go), never restated here.
//
// The package's handlers return errors as every handler does
// (handlers.Func); the router maps them to statuses. It does not import
// package web.
package stream

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// Options configure a Server.
type Options struct {
	// Access is the access rule and the session store (its DB, Sessions
	// and SessionLifetime): the handshake and every re-check decide who
	// watches and whether they still may through it.
	Access *handlers.Base
	// Hub fans run and environment events out to the streams; without it
	// the event streams answer 500.
	Hub *events.Hub
	// Fragments renders the HTML fragments that event frames carry
	// (default: the run and environment pages' own components).
	Fragments FragmentRenderer
	// Runs follows runtime logs and says when a DNS-pending domain is
	// checked again; without it logs cannot be followed.
	Runs *runs.Service
	// Logger receives the streams' log lines (default slog.Default()).
	Logger *slog.Logger
	// Metrics records the streams' Prometheus metrics when set.
	Metrics *Metrics
	// PublicURL is the address people use to reach the Studio: its origin
	// may open streams (as may the request's own host).
	PublicURL string
}

// Timings of event streams; variables so tests may shorten them.
var (
	// streamPing is how often a stream pings its client.
	streamPing = newAtomicDuration(30 * time.Second)
	// streamPongWait is how long a stream waits for any frame (a pong
	// answers each ping) before it closes the connection as dead.
	streamPongWait = newAtomicDuration(75 * time.Second)
	// streamRecheck is how often an idle stream re-checks that the session
	// and the role still allow it.
	streamRecheck = 30 * time.Second
	// accessCacheTTL is how long an access check's answer is reused, by
	// every stream of the same session and environment.
	accessCacheTTL = 2 * time.Second
	// streamWriteWait bounds each write to a client.
	streamWriteWait = newAtomicDuration(10 * time.Second)
)

// atomicDuration is a setting tests may change while streams read it.
type atomicDuration struct{ atomic.Int64 }

func newAtomicDuration(d time.Duration) *atomicDuration {
	a := &atomicDuration{}
	a.Store(int64(d))
	return a
}

func (a *atomicDuration) get() time.Duration { return time.Duration(a.Load()) }

// Close codes beyond RFC 6455's, in the range for applications.
const (
	// closeAccessRemoved: the session ended or the role was removed; the
	// page should not reconnect.
	closeAccessRemoved = 4403
)

// Server serves the event stream websockets and followed logs.
type Server struct {
	base      *handlers.Base
	runs      *runs.Service
	logger    *slog.Logger
	hub       *events.Hub
	fragments FragmentRenderer
	metrics   *Metrics
	upgrader  websocket.Upgrader
	origins   map[string]bool
	access    *accessCache
	writers   *frameWriters
}

// New returns a Server configured by o.
func New(o Options) *Server {
	s := &Server{
		base: o.Access, runs: o.Runs, logger: o.Logger, hub: o.Hub, fragments: o.Fragments, metrics: o.Metrics,
		origins: map[string]bool{},
		access:  &accessCache{entries: map[accessKey]*accessEntry{}},
		writers: newFrameWriters(),
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.metrics.followHub(s.hub)
	if s.fragments == nil {
		pf := pageFragments{now: s.base.DB.Now, activeRelease: s.base.DB.ActiveReleaseRun, releases: newReleaseCache()}
		if s.runs != nil {
			pf.nextCheck = s.runs.NextAutomaticCheck
		}
		s.fragments = pf
	}
	if u, err := url.Parse(o.PublicURL); err == nil && u.Host != "" {
		s.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		// Clients send nothing but control frames: a small read buffer,
		// and the write buffers come from a pool shared by all streams
		// (event frames are written as built bytes, without one).
		ReadBufferSize:  128,
		WriteBufferSize: 4096,
		WriteBufferPool: &sync.Pool{},
		// The origin is checked (and logged) before Upgrade is called.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	return s
}

// originAllowed accepts a handshake without Origin (not a browser, so not a
// cross-site request) or from the Studio's own origin; it refuses another
// site's origin and "null" (sandboxed frames, file: pages).
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if s.origins[strings.ToLower(u.Scheme+"://"+u.Host)] {
		return true
	}
	return strings.EqualFold(u.Host, r.Host)
}

// IsUpgrade reports whether r asks for a websocket: the router answers
// such a request's refusal plainly (a handshake cannot follow a redirect)
// and counts its 101, which went out on the hijacked connection.
func IsUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// viewer is who watches a stream, as read from the session.
type viewer struct {
	user       *store.User
	token      string
	signedInAt time.Time
}

// readSession returns who watches: the API token's owner when the
// handshake was authenticated with one (token.go), else the user of the
// session the request's cookie names, loaded from the store without
// touching it (no commit, no cookie); nil when anonymous, or when the
// session has ended or its user is gone.
func (s *Server) readSession(r *http.Request) (*viewer, error) {
	if v := tokenViewer(r); v != nil {
		return v, nil
	}
	c, err := r.Cookie(s.base.Sessions.Cookie.Name)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	ctx, err := s.base.Sessions.Load(r.Context(), c.Value)
	if err != nil {
		return nil, err
	}
	u, signedIn, err := s.base.SessionUser(ctx)
	switch {
	case errors.Is(err, handlers.ErrSessionEnded), apperr.CodeOf(err) == apperr.NotFound:
		return nil, nil
	case err != nil:
		return nil, err
	case u == nil:
		return nil, nil
	}
	return &viewer{user: u, token: c.Value, signedInAt: signedIn}, nil
}

// RunEvents serves GET .../runs/{run}/events?after=N.
func (s *Server) RunEvents(w http.ResponseWriter, r *http.Request) error {
	return s.serve(w, r, true)
}

// EnvironmentEvents serves GET .../environments/{env}/events?after=N.
func (s *Server) EnvironmentEvents(w http.ResponseWriter, r *http.Request) error {
	return s.serve(w, r, false)
}

// streamNumbers reads the {run} of a run stream and ?after=N, each within
// the range of its column (runs.id is a bigint; a run's event sequence an
// integer, an environment's a bigint), before any query and before the
// upgrade: a number beyond it is an answer, not a stream that fails.
func streamNumbers(r *http.Request, runStream bool) (runID, after int64, err error) {
	seqBits := 64
	if runStream {
		seqBits = 32
		runID, err = strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
		if err != nil || runID <= 0 {
			return 0, 0, apperr.Errorf(apperr.NotFound, "There is no such run.")
		}
	}
	if q := r.URL.Query().Get("after"); q != "" {
		after, err = strconv.ParseInt(q, 10, seqBits)
		if err != nil || after < 0 {
			limit := "9223372036854775807"
			if runStream {
				limit = "2147483647"
			}
			return 0, 0, apperr.Errorf(apperr.Invalid, "after must be a sequence number from 0 to %s.", limit)
		}
	}
	return runID, after, nil
}

// admission is a stream's handshake as admit checked it.
type admission struct {
	v   *viewer
	env *store.Environment
	// r is the request with its user.
	r *http.Request
	// checked is when the session and the role were checked.
	checked time.Time
}

// admit checks a stream's handshake, before any upgrade: its origin, then
// what check reads of the request (its numbers, before any query), the
// session (or API token) and the viewer's role on the environment. Every
// websocket of the Studio is admitted here.
func (s *Server) admit(r *http.Request, check func() error) (*admission, error) {
	if !s.originAllowed(r) {
		s.logger.Warn("event stream refused: foreign origin", "request_id", handlers.RequestID(r.Context()), "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		return nil, apperr.Errorf(apperr.Forbidden, "This page may only be watched from the Studio itself.")
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	checked := accessCheckedAt(r) // the session and role checks below, or the token's
	v, err := s.readSession(r)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, apperr.Errorf(apperr.Unauthorized, "Sign in first.")
	}
	r = r.WithContext(handlers.WithUser(r.Context(), v.user))
	env, _, err := s.base.Environment(r, store.RoleViewer)
	if err != nil {
		return nil, err
	}
	return &admission{v: v, env: env, r: r, checked: checked}, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, runStream bool) error {
	ctx := r.Context()
	reqID := handlers.RequestID(ctx)
	var runID, after int64
	ad, err := s.admit(r, func() (err error) {
		runID, after, err = streamNumbers(r, runStream)
		return err
	})
	if err != nil {
		return err
	}
	v, env, r, checked := ad.v, ad.env, ad.r, ad.checked
	stream := events.EnvironmentStream(env.ID)
	if runStream {
		if _, err := s.base.RunOf(ctx, env, runID); err != nil {
			return err
		}
		stream = events.RunStream(runID)
	}
	if !IsUpgrade(r) {
		return apperr.Errorf(apperr.Invalid, "This address is a websocket: open it from the page that shows the run.")
	}
	if s.hub == nil {
		return errors.New("stream: event streams have no hub")
	}

	// Subscribe before upgrading, so a failure is still an HTTP answer.
	sub, err := s.hub.Subscribe(context.WithoutCancel(ctx), stream, after)
	if err != nil {
		return err
	}
	conn, err := s.upgrader.Upgrade(hijacker(w), r, nil)
	if err != nil {
		// Upgrade has answered the client already.
		sub.Close()
		s.logger.Info("event stream handshake failed", "request_id", reqID, "err", err)
		return nil
	}
	st := &liveStream{
		s: s, conn: conn, sub: sub, token: v.token, userID: v.user.ID, signedInAt: v.signedInAt,
		envID: env.ID, streamID: stream.ID, kind: stream.Kind.String(), requestID: reqID,
	}
	// The handshake has just checked what the stream's access checks ask
	// again: its answer starts the cache's entry, so that the first check
	// after accessCacheTTL is answered while it refreshes in the
	// background, not with a database round trip before an event's frame.
	s.access.seed(accessKey{token: st.token, userID: st.userID, envID: st.envID}, checked)
	// The backlog is read and written from the request's goroutine. Then it
	// ends (and the server's buffers with it): an idle stream is its reader
	// goroutine and a timer, and a writer goroutine runs only while there
	// are events to write. Until the backlog is out, this goroutine is the
	// writer: a kick (the client leaving, say) must not start another.
	st.writing.Store(true)
	st.start()
	if err := st.catchUp(ctx); err != nil {
		st.stop(err)
		return nil
	}
	sub.SetNotify(st.kick)
	st.writing.Store(false)
	st.kick()
	return nil
}

// hijacker finds the http.Hijacker under middleware's response wrappers
// (gorilla/websocket asserts the interface instead of using
// http.ResponseController).
func hijacker(w http.ResponseWriter) http.ResponseWriter {
	for {
		if _, ok := w.(http.Hijacker); ok {
			return w
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

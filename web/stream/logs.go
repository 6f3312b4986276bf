package stream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/views"
)

// Following an application's runtime log (issue 39): the logs page opens
// a websocket to .../apps/{app}/logs/follow?after=T (the newest line it
// shows; q as the page's search) and receives every newer line of the
// application's pods, new pods included, as JSON text frames:
//
//	{"lines": [{"at": "14:03:07.250", "datetime": "...", "pod": "web-0", "container": "web", "text": "..."}], "dropped": 0}
//
// The handshake is admitted as every stream's is (Server.admit: origin,
// session, viewer role), and the stream re-checks access through the same
// cache before each frame and every streamRecheck. Lines are masked by the
// service (runs.Service.FollowAppLogs) before they reach this file.

const (
	// logFrameEvery gathers the lines of a burst into one frame.
	logFrameEvery = 50 * time.Millisecond
	// logFrameLines bounds a frame; logPendingLines the lines waiting for
	// a slow client (past it the oldest are dropped, and the frame says
	// how many).
	logFrameLines   = 500
	logPendingLines = 5000
)

// logFrame is one frame of a followed log.
type logFrame struct {
	Lines   []views.RuntimeLineView `json:"lines"`
	Dropped int                     `json:"dropped,omitempty"`
}

// FollowAppLogs serves GET .../apps/{app}/logs/follow.
func (s *Server) FollowAppLogs(w http.ResponseWriter, r *http.Request) error {
	ad, err := s.admit(r, nil)
	if err != nil {
		return err
	}
	if s.runs == nil {
		return apperr.Errorf(apperr.Unavailable, "Runtime logs are not available on this Studio.")
	}
	req, err := handlers.LogRequestOf(ad.r, s.base.DB.Now())
	if err != nil {
		return err
	}
	if req.Previous || !req.Until.IsZero() {
		return apperr.Errorf(apperr.Invalid, "Only a log that grows can be followed: leave out previous and until.")
	}
	if err := s.runs.CheckAppLogs(r.Context(), ad.env, req.App); err != nil {
		return err
	}
	if !IsUpgrade(r) {
		return apperr.Errorf(apperr.Invalid, "This address is a websocket: open it from the application's logs page.")
	}
	conn, err := s.upgrader.Upgrade(hijacker(w), r, nil)
	if err != nil {
		s.logger.Info("log stream handshake failed", "request_id", handlers.RequestID(r.Context()), "err", err)
		return nil
	}
	defer conn.Close()
	key := accessKey{token: ad.v.token, userID: ad.v.user.ID, envID: ad.env.ID}
	s.access.seed(key, ad.checked)

	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	// The reader: pongs and the client's close.
	conn.SetReadLimit(512)
	_ = conn.SetReadDeadline(time.Now().Add(streamPongWait.get()))
	conn.SetPongHandler(func(string) error {
		return conn.SetReadDeadline(time.Now().Add(streamPongWait.get()))
	})
	go func() {
		defer cancel()
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()

	var mu sync.Mutex
	var pending []platform.LogLine
	dropped := 0
	wake := make(chan struct{}, 1)
	followErr := make(chan error, 1)
	go func() {
		followErr <- s.runs.FollowAppLogs(ctx, ad.env, req, func(l platform.LogLine) error {
			mu.Lock()
			if len(pending) >= logPendingLines {
				pending = pending[1:]
				dropped++
			}
			pending = append(pending, l)
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
			return nil
		})
	}()

	closeWith := func(code int, text string) {
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	}
	ping := time.NewTicker(streamPing.get())
	defer ping.Stop()
	recheck := time.NewTicker(streamRecheck)
	defer recheck.Stop()
	allowed := func(fresh bool) bool {
		if s.base.SessionEnded(ad.v.signedInAt) {
			return false
		}
		ok, err := s.access.allowed(key, s.checkAccess, fresh)
		return ok || err != nil // a database error is not a reason to close
	}
	for {
		select {
		case <-ctx.Done():
			closeWith(websocket.CloseGoingAway, "")
			return nil
		case err := <-followErr:
			if err != nil && ctx.Err() == nil {
				msg := apperr.Message(err)
				if apperr.CodeOf(err) == apperr.Internal {
					s.logger.Warn("log stream ended", "request_id", handlers.RequestID(r.Context()), "err", err)
				}
				closeWith(websocket.CloseInternalServerErr, clipClose(msg))
			}
			return nil
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(streamWriteWait.get())); err != nil {
				return nil
			}
		case <-recheck.C:
			if !allowed(true) {
				closeWith(closeAccessRemoved, "access removed")
				return nil
			}
		case <-wake:
			// Gather the rest of a burst into the same frame.
			select {
			case <-ctx.Done():
				continue
			case <-time.After(logFrameEvery):
			}
			if !allowed(false) {
				closeWith(closeAccessRemoved, "access removed")
				return nil
			}
			for {
				mu.Lock()
				n := min(len(pending), logFrameLines)
				batch := pending[:n:n]
				f := logFrame{Lines: make([]views.RuntimeLineView, 0, n), Dropped: dropped}
				pending, dropped = pending[n:], 0
				mu.Unlock()
				// The pods' lines, in the order they were printed.
				slices.SortStableFunc(batch, func(a, b platform.LogLine) int { return a.At.Compare(b.At) })
				for _, l := range batch {
					f.Lines = append(f.Lines, views.NewRuntimeLine(l))
				}
				if n == 0 && f.Dropped == 0 {
					break
				}
				b, err := json.Marshal(f)
				if err != nil {
					return err
				}
				_ = conn.SetWriteDeadline(time.Now().Add(streamWriteWait.get()))
				if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
					if !errors.Is(err, websocket.ErrCloseSent) {
						s.logger.Info("log stream: write failed", "request_id", handlers.RequestID(r.Context()), "err", err)
					}
					return nil
				}
			}
		}
	}
}

// clipClose bounds a close frame's reason (125 bytes in all).
func clipClose(s string) string {
	if len(s) <= 120 {
		return s
	}
	cut := 117
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}

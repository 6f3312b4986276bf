package events

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skali-dev/studio/store"
)

// listen keeps the dedicated LISTEN connection up until the hub closes.
func (h *Hub) listen() {
	defer close(h.done)
	failures := 0
	for h.ctx.Err() == nil {
		start := time.Now()
		connected, err := h.listenOnce()
		if h.ctx.Err() != nil {
			return
		}
		if connected && time.Since(start) > 10*time.Second {
			failures = 0 // it was up a while: this is a new outage, retry soon
		}
		failures++
		h.logger.Warn("event hub: LISTEN connection lost; reconnecting", "err", err, "attempt", failures)
		sleep(h.ctx, backoff(failures))
	}
}

// listenOnce connects and listens until the connection fails or the hub
// closes; connected says it got as far as connecting.
func (h *Hub) listenOnce() (connected bool, err error) {
	cfg := h.db.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "skali-studio-events"
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	cancel()
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	// The wait is ended by a read deadline (what pgx does itself on a
	// cancelled context), not by passing a context: pgx watches a
	// cancellable context with a goroutine and a callback registered for
	// every call, which would cost every notification more than handling
	// it does. A timeout leaves the connection whole. The deadline is set
	// when the hub stops and, while the loop waits, when a stream is
	// followed or left (see topicsChangedLocked).
	raw := conn.PgConn().Conn()
	wake := func() { _ = raw.SetReadDeadline(time.Now()) }
	stop := context.AfterFunc(h.ctx, wake)
	defer stop()
	h.mu.Lock()
	h.wake = wake
	h.changed = true // a new connection listens to every followed stream
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.wake, h.waiting, h.channels = nil, false, 0
		for _, t := range h.topics {
			t.listened = false // the next connection listens again
		}
		h.mu.Unlock()
	}()
	// channels are the streams this connection LISTENs to; of those,
	// unfollowed are the runs it could not mark as followed yet.
	ls := &listenState{channels: map[Stream]bool{}, unfollowed: map[Stream]bool{}}
	defer func() {
		if ls.retry != nil {
			ls.retry.Stop()
		}
	}()
	for {
		// Clear a deadline first, then look: a wake-up that comes after
		// the look finds the loop waiting (or about to) and ends that wait.
		_ = raw.SetReadDeadline(time.Time{})
		if err := h.ctx.Err(); err != nil {
			return true, err
		}
		listen, leave := h.channelChanges(ls)
		if len(listen) > 0 || len(leave) > 0 {
			if err := h.changeChannels(conn, ls, listen, leave); err != nil {
				return true, err
			}
			continue
		}
		n, err := conn.WaitForNotification(context.Background())
		h.mu.Lock()
		h.waiting = false
		h.mu.Unlock()
		if pgconn.Timeout(err) {
			continue // woken: see above
		}
		if err != nil {
			return true, err
		}
		at := time.Now()
		h.heard.Add(1)
		stream, seq, body, ok := parseNotification(n.Channel, n.Payload)
		if !ok {
			h.logger.Warn("event hub: malformed notification", "channel", n.Channel)
			continue
		}
		var notice *store.RunNotice
		if body != "" && stream.Kind == RunEvents {
			if notice, err = store.DecodeRunNotice(body); err != nil {
				// Read the event from the table instead.
				h.logger.Warn("event hub: notification's event unreadable", "channel", n.Channel, "err", err)
			}
		}
		h.notified(stream, seq, notice, at)
	}
}

// maxChannelChanges bounds the LISTEN statements, and the UNLISTEN
// statements, sent in one round trip.
const maxChannelChanges = 256

// channelChanges returns the followed streams whose channel the connection
// does not listen to yet (or was not read again since), and the channels
// it listens to that no followed stream needs any more. With neither, it
// marks the listener as waiting, under the same lock.
func (h *Hub) channelChanges(ls *listenState) (listen, leave []Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.changed {
		h.waiting = true // nothing to compare: no scan per notification
		return nil, nil
	}
	// A run not marked as followed yet is tried again when its retry is
	// due, not at every change of other streams.
	retry := h.followRetryDue
	h.followRetryDue = false
	for s, t := range h.topics {
		if len(listen) == maxChannelChanges {
			break
		}
		if !t.listened && (retry || !ls.unfollowed[s]) {
			listen = append(listen, s)
		}
	}
	for s := range ls.channels {
		if len(leave) == maxChannelChanges {
			break
		}
		if _, ok := h.topics[s]; !ok {
			leave = append(leave, s)
		}
	}
	h.waiting = len(listen) == 0 && len(leave) == 0
	// Once these are done, another look finds nothing, unless a list was
	// cut short or topics change meanwhile (which sets changed again).
	h.changed = len(listen) == maxChannelChanges || len(leave) == maxChannelChanges
	return listen, leave
}

// listenState is what the LISTEN connection listens to and follows.
type listenState struct {
	channels   map[Stream]bool // the channels it LISTENs to
	unfollowed map[Stream]bool // runs among them it could not mark as followed yet
	retries    int             // consecutive tries that left a run unfollowed
	retry      *time.Timer     // sets followRetryDue, while unfollowed has runs
}

// changeChannels LISTENs to the channels of listen and UNLISTENs those of
// leave, in one round trip, then reads each stream of listen again from
// its cursor: an event committed before its channel was listened to (and
// after its starting point) was announced to nobody here, and is
// delivered now.
//
// A run's stream is also marked as followed, so that its events are
// announced at all (with the event itself), and unmarked when left: in the
// same round trip, after the (UN)LISTEN statements. Marking never waits
// (store.TryFollowRunsSQL): a run that an open transaction appended to
// while nobody followed it cannot be marked until that transaction ends,
// so it stays unread and is tried again a little later, while every other
// stream goes on. The round trip's LISTENs take effect when it ends, and
// the read comes after, so that read has every event no notification
// brings.
func (h *Hub) changeChannels(conn *pgx.Conn, ls *listenState, listen, leave []Stream) error {
	var sql strings.Builder
	var marks []string
	for _, s := range leave {
		sql.WriteString("UNLISTEN " + pgx.Identifier{s.channel()}.Sanitize() + ";")
		if s.Kind == RunEvents && !ls.unfollowed[s] {
			marks = append(marks, store.UnfollowRunSQL(s.ID)+";")
		}
	}
	listens := false
	var follow []int64
	for _, s := range listen {
		if !ls.channels[s] {
			sql.WriteString("LISTEN " + pgx.Identifier{s.channel()}.Sanitize() + ";")
			listens = true
		}
		if s.Kind == RunEvents && (!ls.channels[s] || ls.unfollowed[s]) {
			follow = append(follow, s.ID)
		}
	}
	for _, m := range marks {
		sql.WriteString(m)
	}
	if len(follow) > 0 {
		sql.WriteString(store.TryFollowRunsSQL(follow))
	}
	// marked holds each run tried, and whether it was marked.
	marked := make(map[int64]bool, len(follow))
	for _, id := range follow {
		marked[id] = false
	}
	if sql.Len() > 0 {
		if listens && h.beforeListen != nil {
			h.beforeListen()
		}
		// No arguments: the simple protocol, which takes several
		// statements at once.
		results, err := conn.PgConn().Exec(h.ctx, sql.String()).ReadAll()
		if err != nil {
			return err
		}
		if len(follow) > 0 && len(results) > 0 {
			for _, row := range results[len(results)-1].Rows {
				if id, err := strconv.ParseInt(string(row[0]), 10, 64); err == nil {
					marked[id] = true
				}
			}
		}
	}
	for _, s := range leave {
		delete(ls.channels, s)
		delete(ls.unfollowed, s)
	}
	failed := false
	for _, s := range listen {
		ls.channels[s] = true
		if s.Kind != RunEvents {
			continue
		}
		if ok, tried := marked[s.ID]; ok || !tried {
			delete(ls.unfollowed, s)
		} else {
			ls.unfollowed[s] = true
			failed = true
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.channels = len(ls.channels)
	for _, s := range listen {
		if t, ok := h.topics[s]; ok && !ls.unfollowed[s] {
			t.listened = true
			t.dirty = true
			h.kickLocked(t)
		}
	}
	switch {
	case failed:
		// Try again once the appending transaction may have ended: one
		// timer per connection, whatever the runs waiting.
		ls.retries++
		d := followRetry(ls.retries)
		if ls.retry == nil {
			ls.retry = time.AfterFunc(d, func() {
				h.mu.Lock()
				defer h.mu.Unlock()
				h.followRetryDue = true
				h.topicsChangedLocked()
			})
		} else {
			ls.retry.Reset(d)
		}
	case len(ls.unfollowed) == 0:
		ls.retries = 0
		if ls.retry != nil {
			ls.retry.Stop()
		}
	}
	return nil
}

// followRetry is how long the listener waits before it tries again to mark
// a run that a transaction holds unannounced: 5 ms, doubling, at most 1 s.
func followRetry(n int) time.Duration {
	return min(time.Second, 5*time.Millisecond<<min(n-1, 8))
}

// topicsChangedLocked tells the listener that a stream was followed or
// left, ending its wait, so that it listens to the stream's channel or
// leaves it.
func (h *Hub) topicsChangedLocked() {
	h.changed = true
	if h.waiting && h.wake != nil {
		h.waiting = false
		h.wake()
	}
}

// parseNotification reads a notification of channel "<prefix><id>" with
// payload "<id>:<seq>", or "<id>:<seq>:<body>" (body: a store.RunNotice).
func parseNotification(channel, payload string) (stream Stream, seq int64, body string, ok bool) {
	var kind StreamKind
	var idText string
	if rest, ok := strings.CutPrefix(channel, store.RunEventsChannelPrefix); ok {
		kind, idText = RunEvents, rest
	} else if rest, ok := strings.CutPrefix(channel, store.EnvironmentEventsChannelPrefix); ok {
		kind, idText = EnvironmentEvents, rest
	} else {
		return Stream{}, 0, "", false
	}
	payloadID, rest, ok := strings.Cut(payload, ":")
	if !ok || payloadID != idText {
		return Stream{}, 0, "", false
	}
	seqText, body, _ := strings.Cut(rest, ":")
	id, err1 := strconv.ParseInt(idText, 10, 64)
	seq, err2 := strconv.ParseInt(seqText, 10, 64)
	if err1 != nil || err2 != nil {
		return Stream{}, 0, "", false
	}
	return Stream{Kind: kind, ID: id}, seq, body, true
}

// A checkpoint change, from the store to the browser, hop by hop:
//
//  1. store/runs.go          DB.ApplyRunChange updates the checkpoint and the
//     run and, in the same transaction, calls appendRunEvent;
//  2. store/runevents.go     the one append statement stores the event and
//     NOTIFYs "<id>:<seq>:<RunNotice>" (the event, the run's changing
//     columns, the checkpoint's row) on run_events.<id>;
//  3. events/listener.go     the hub's LISTEN connection receives it
//     (parseNotification, store.DecodeRunNotice);
//  4. events/topic.go        Hub.notified makes the Event from the notice
//     and the topic's cached run and environment (a gap, a notice too
//     large or a read under way: Hub.fetch reads the table instead) and
//     queues it for every subscriber (Subscription.push, subscription.go);
//  5. web/stream/write.go   once the hub lets go of its lock, it kicks
//     the stream (liveStream.kick, web/stream/live.go): a run watched by
//     a few is written right there, a busier one by the pool of writers
//     (one sockwrite.Writer call for a round of streams: one io_uring
//     submission where the kernel allows it, web/stream/sockwrite);
//     either takes the queue (Subscription.Poll), checks access from the
//     cache when due (web/stream/access.go; its own goroutine when the
//     cache has no answer) and writes every queued frame without waiting;
//  6. web/stream/frame.go   the frame's bytes, header included, built
//     once per event for every watcher: payload + seq + at + fragments;
//  7. views/run_live.go      RunFragments renders the run page's own
//     components (models in views/run_build.go) — called through
//     web/stream/fragments.go, never through handlers;
//  8. static/js/live.js      swaps the fragments in place by id.

// Package events is the live-event stream: the hub that follows runs' and
// environments' event streams through PostgreSQL LISTEN/NOTIFY (listener.go),
// one topic per followed stream (topic.go) and the subscriptions that hand
// its events out exactly once and in order (subscription.go). The event
// format itself is package payload; events are appended with their
// notification by the store, in the transaction of the change they record.
// Nothing here knows about pages.
package events

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/skali-dev/studio/store"
)

// StreamKind says which table a stream's events live in.
type StreamKind uint8

// The kinds of event stream.
const (
	// RunEvents is the events of one run (run_events).
	RunEvents StreamKind = iota + 1
	// EnvironmentEvents is the events of one environment (environment_events).
	EnvironmentEvents
)

func (k StreamKind) String() string {
	switch k {
	case RunEvents:
		return "run"
	case EnvironmentEvents:
		return "environment"
	}
	return "unknown"
}

// Stream names one ordered event stream: a run's or an environment's.
type Stream struct {
	Kind StreamKind
	ID   int64
}

// RunStream is the event stream of the run.
func RunStream(runID int64) Stream { return Stream{Kind: RunEvents, ID: runID} }

// EnvironmentStream is the event stream of the environment.
func EnvironmentStream(environmentID int64) Stream {
	return Stream{Kind: EnvironmentEvents, ID: environmentID}
}

// Event is one stored event of a stream as the hub hands it out. Live events
// are shared by every subscriber of the stream in this process: treat them
// as read-only, and use Memo for anything derived from them (such as the
// encoded websocket frame) so it is computed once, not once per subscriber.
type Event struct {
	Stream Stream
	Seq    int64
	At     time.Time
	// Checkpoint is the checkpoint position a run event concerns (nil for
	// a run-level change and for environment events).
	Checkpoint *int
	// RunID is the run an environment event concerns, if any.
	RunID *int64
	// Payload is the event as stored: a payload.RunChanged (a run's
	// stream) or payload.EnvironmentChanged, encoded.
	Payload json.RawMessage
	// Notified is when this process received the notification that led to
	// reading the event; zero for events read as backlog.
	Notified time.Time

	// The stream's state as stored when the event was read (in the same
	// round trip, after the event), so that a frame is rendered without
	// another: shared by the events of one read. For a run event, the run,
	// its environment and the event's checkpoint (nil for a run-level
	// change); for an environment event, the environment, its newest runs
	// (at most HubOptions.LatestRuns), the run the event concerns (Run, if any) and,
	// for a change of a service's state, the certificate of its domain.
	Run           *store.Run
	Environment   *store.Environment
	CheckpointNow *store.Checkpoint
	LatestRuns    []store.Run
	Certificate   *store.Certificate

	memoOnce sync.Once
	memo     any
}

// Memo returns f's result, calling f only for the first caller of this
// event; later callers (other subscribers of a live event) get the same
// value.
func (e *Event) Memo(f func() any) any {
	e.memoOnce.Do(func() { e.memo = f() })
	return e.memo
}

// channel is the PostgreSQL channel the stream's events are announced on.
func (s Stream) channel() string {
	if s.Kind == EnvironmentEvents {
		return store.EnvironmentEventsChannel(s.ID)
	}
	return store.RunEventsChannel(s.ID)
}

package events_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// newRun inserts a project, an environment and a deploy run with plain SQL
// and returns the environment and run ids.
func newRun(t testing.TB, db *store.DB) (envID, runID int64) {
	t.Helper()
	err := db.Pool.QueryRow(context.Background(), `
		WITH p AS (INSERT INTO projects (name) VALUES ('wiki-' || md5(random()::text)) RETURNING id),
		     e AS (INSERT INTO environments (project_id, name) SELECT id, 'production' FROM p RETURNING id),
		     r AS (INSERT INTO runs (environment_id, kind) SELECT id, 'deploy' FROM e RETURNING id, environment_id)
		SELECT environment_id, id FROM r`).Scan(&envID, &runID)
	if err != nil {
		t.Fatal(err)
	}
	return envID, runID
}

func appendEvents(t testing.TB, db *store.DB, runID int64, n int) {
	t.Helper()
	for i := range n {
		pos := i % 5
		if _, err := db.AppendRunEvent(context.Background(), runID, &pos, map[string]any{"run": map[string]any{"status": "running"}}); err != nil {
			t.Error(err)
			return
		}
	}
}

func newHub(t testing.TB, db *store.DB, opts events.HubOptions) *events.Hub {
	t.Helper()
	h := events.NewHub(db, opts)
	t.Cleanup(h.Close)
	waitFor(t, "the hub to connect", h.ConnectedForTest)
	return h
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// collect reads sub until it has the event numbered upTo and checks that
// it got every event after from, in order, exactly once.
func collect(ctx context.Context, sub *events.Subscription, from, upTo int64) error {
	want := from + 1
	for want <= upTo {
		evs, err := sub.Next(ctx)
		if err != nil {
			return fmt.Errorf("after %d, waiting for %d: %w", from, want, err)
		}
		for _, e := range evs {
			if e.Seq != want {
				return fmt.Errorf("after %d: got seq %d, want %d", from, e.Seq, want)
			}
			want++
		}
	}
	return nil
}

// TestHubReplayThenLiveExactlyOnce subscribes many watchers from random
// starting points while events are appended, so that the live events race
// every watcher's backlog read: each must see every event after its
// starting point exactly once, in order.
func TestHubReplayThenLiveExactlyOnce(t *testing.T) {
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	h := newHub(t, db, events.HubOptions{PageSize: 7})
	const before, during, watchers = 15, 60, 40
	appendEvents(t, db, runID, before)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { appendEvents(t, db, runID, during) })
	for range watchers {
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			after := rand.Int64N(before + during/2)
			sub, err := h.Subscribe(ctx, events.RunStream(runID), after)
			if err != nil {
				t.Error(err)
				return
			}
			defer sub.Close()
			if err := collect(ctx, sub, after, before+during); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := h.Subscribers(); n != 0 {
		t.Errorf("%d subscriptions left open", n)
	}
}

// TestHubClosesSubscriberThatNeverReads checks that a subscriber whose queue
// overflows is closed with ErrSlowSubscriber while the others get every
// event: a hub that waited for the stuck subscriber would never hand them
// out, and the readers would give up after a minute.
func TestHubClosesSubscriberThatNeverReads(t *testing.T) {
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	h := newHub(t, db, events.HubOptions{QueueLimit: 16})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stuck, err := h.Subscribe(ctx, events.RunStream(runID), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	var wg sync.WaitGroup
	for range 5 {
		sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			// A reader that is closed for falling behind (possible on a
			// loaded machine) resumes from its last event, as a client does.
			for {
				err := collect(ctx, sub, sub.Last(), 40)
				sub.Close()
				if !errors.Is(err, events.ErrSlowSubscriber) {
					if err != nil {
						t.Errorf("%v; hub: %s", err, h.DebugState())
					}
					return
				}
				if sub, err = h.Subscribe(ctx, events.RunStream(runID), sub.Last()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	appendEvents(t, db, runID, 40)
	wg.Wait()
	// The readers may finish from their backlog before the hub has handed
	// every event out: wait for the stuck queue to overflow.
	waitFor(t, "the subscriber that never reads to be closed", func() bool { return stuck.Err() != nil })
	_, err = stuck.Next(ctx)
	if !errors.Is(err, events.ErrSlowSubscriber) {
		t.Errorf("the subscriber that never read got %v, want ErrSlowSubscriber", err)
	}
}

// TestHubSubscriberCatchingUpDuringABurstIsNotBehind: a subscriber that
// joins while events pour in reads them as backlog, and the same events
// arrive live meanwhile. Those already read must not count against its
// queue's limit: only a subscriber that is really that far behind the
// stream is closed.
func TestHubSubscriberCatchingUpDuringABurstIsNotBehind(t *testing.T) {
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	h := newHub(t, db, events.HubOptions{QueueLimit: 10, PageSize: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	waitFor(t, "the hub to listen", h.QuietForTest)
	queued := func(n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d live events to be queued", n), func() bool { return sub.QueuedForTest() >= n || sub.Err() != nil })
	}
	want := int64(1)
	page := func(n int) {
		t.Helper()
		evs, err := sub.Backlog(ctx)
		if err != nil || len(evs) != n {
			t.Fatalf("backlog page = %d events, %v; want %d; hub: %s", len(evs), err, n, h.DebugState())
		}
		for _, e := range evs {
			if e.Seq != want {
				t.Fatalf("backlog: seq %d, want %d", e.Seq, want)
			}
			want++
		}
	}

	appendEvents(t, db, runID, 8) // 1-8: queued live, and in the table
	queued(8)
	page(5)                       // 1-5 read from the table: 6-8 are all the queue still needs
	appendEvents(t, db, runID, 6) // 9-14: 9 ahead of what was read, within the limit of 10
	queued(9)
	if err := sub.Err(); err != nil {
		t.Fatalf("a subscriber 9 events behind, with a limit of 10, was closed: %v", err)
	}
	page(5) // 6-10
	page(4) // 11-14
	page(0) // caught up: live from now on
	appendEvents(t, db, runID, 1)
	if err := collect(ctx, sub, 14, 15); err != nil {
		t.Fatalf("live after the backlog: %v; hub: %s", err, h.DebugState())
	}

	// Really behind: 11 events it has not read, with a limit of 10.
	appendEvents(t, db, runID, 11)
	waitFor(t, "the subscriber 11 events behind to be closed", func() bool { return sub.Err() != nil })
	if _, err := sub.Next(ctx); !errors.Is(err, events.ErrSlowSubscriber) {
		t.Errorf("a subscriber 11 events behind got %v, want ErrSlowSubscriber", err)
	}
}

// TestHubsOfTwoProcessesSeeEveryEvent runs two hubs on two pools of one
// database, as two Studio processes would, and appends events through
// either: a watcher on each sees all of them.
func TestHubsOfTwoProcessesSeeEveryEvent(t *testing.T) {
	url := storetest.NewURL(t)
	var dbs [2]*store.DB
	var hubs [2]*events.Hub
	for i := range dbs {
		db, err := store.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		dbs[i] = db
		hubs[i] = newHub(t, db, events.HubOptions{})
	}
	envID, runID := newRun(t, dbs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var subs [2]*events.Subscription
	var envSubs [2]*events.Subscription
	for i, h := range hubs {
		var err error
		if subs[i], err = h.Subscribe(ctx, events.RunStream(runID), 0); err != nil {
			t.Fatal(err)
		}
		defer subs[i].Close()
		if envSubs[i], err = h.Subscribe(ctx, events.EnvironmentStream(envID), 0); err != nil {
			t.Fatal(err)
		}
		defer envSubs[i].Close()
	}
	const n = 30
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if err := collect(ctx, subs[i], 0, n); err != nil {
				t.Errorf("watcher on hub %d: %v", i, err)
			}
		})
		wg.Go(func() {
			if err := collect(ctx, envSubs[i], 0, 4); err != nil {
				t.Errorf("environment watcher on hub %d: %v", i, err)
			}
		})
	}
	for i := range n {
		if _, err := dbs[i%2].AppendRunEvent(ctx, runID, nil, map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		appendEnvironmentEvent(t, dbs[i%2], envID, runID)
	}
	wg.Wait()
}

func appendEnvironmentEvent(t testing.TB, db *store.DB, envID, runID int64) {
	t.Helper()
	// The store appends environment events inside run transactions (not
	// exported on their own); this is the same statement.
	_, err := db.Pool.Exec(context.Background(), `
		WITH s AS (UPDATE environments SET last_event_seq = last_event_seq + 1 WHERE id = $1 RETURNING id, last_event_seq),
		     i AS (INSERT INTO environment_events (environment_id, seq, run_id, payload)
		           SELECT id, last_event_seq, $2, '{"type": "run.started"}' FROM s RETURNING environment_id, seq)
		SELECT pg_notify('environment_events.' || i.environment_id::text, i.environment_id::text || ':' || i.seq::text) FROM i`, envID, runID)
	if err != nil {
		t.Fatal(err)
	}
}

// TestHubLosesNothingWhenItsConnectionIsKilled terminates the hub's LISTEN
// connection while events are being appended: the hub reconnects, reads
// what it missed, and the watcher gets every event.
func TestHubLosesNothingWhenItsConnectionIsKilled(t *testing.T) {
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	h := newHub(t, db, events.HubOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const n = 60
	done := make(chan error, 1)
	go func() { done <- collect(ctx, sub, 0, n) }()
	for i := range n {
		if i == 20 || i == 40 {
			// The hub may still be reconnecting from the last kill. Its
			// connection is found by name: the last statement it ran may
			// be a retried follow rather than a LISTEN.
			waitFor(t, "a LISTEN connection to kill", func() bool {
				var killed int
				err := db.Pool.QueryRow(ctx, `
					SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
					WHERE application_name = 'skali-studio-events' AND datname = current_database()`).Scan(&killed)
				if err != nil {
					t.Fatal(err)
				}
				return killed == 1
			})
		}
		if _, err := db.AppendRunEvent(ctx, runID, nil, map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestHubCloseEndsSubscriptions checks that closing the hub (server
// shutdown) ends every subscription with ErrHubClosed.
func TestHubCloseEndsSubscriptions(t *testing.T) {
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	h := events.NewHub(db, events.HubOptions{})
	ctx := context.Background()
	sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := sub.Next(ctx); errc <- err }()
	h.Close()
	if err := <-errc; !errors.Is(err, events.ErrHubClosed) {
		t.Errorf("Next after Close = %v, want ErrHubClosed", err)
	}
	sub.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := h.WaitIdle(wctx); err != nil {
		t.Errorf("WaitIdle: %v", err)
	}
}

// TestHubResumingSubscribersMissNothing keeps subscribers falling behind
// (a queue of two events) so they are closed and resume from their last
// event again and again, while the topic is dropped and re-created under
// them: each still gets every event once, in order.
func TestHubResumingSubscribersMissNothing(t *testing.T) {
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	h := newHub(t, db, events.HubOptions{QueueLimit: 2, PageSize: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	const n = 120
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
			if err != nil {
				t.Error(err)
				return
			}
			resumes := 0
			for {
				err := collect(ctx, sub, sub.Last(), n)
				sub.Close()
				if !errors.Is(err, events.ErrSlowSubscriber) {
					if err != nil {
						t.Errorf("%v (resumed %d times); hub: %s", err, resumes, h.DebugState())
					}
					return
				}
				resumes++
				if sub, err = h.Subscribe(ctx, events.RunStream(runID), sub.Last()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	appendEvents(t, db, runID, n)
	wg.Wait()
}

// TestHubSubscriberJoiningAStreamBeingSetUp: a second subscriber arrives
// while the first one's stream is still finding its starting point, and
// events are committed meanwhile. The second must not read its backlog
// before the starting point is known: the events in between would be in
// neither its backlog nor the live stream.
func TestHubSubscriberJoiningAStreamBeingSetUp(t *testing.T) {
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	h := newHub(t, db, events.HubOptions{})
	release := make(chan struct{})
	var once sync.Once
	h.SetBeforeInitForTest(func() { once.Do(func() { <-release }) })
	appendEvents(t, db, runID, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first := make(chan *events.Subscription, 1)
	go func() {
		sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
		if err != nil {
			t.Error(err)
		}
		first <- sub
	}()
	waitFor(t, "the first subscriber to register", func() bool { return h.Subscribers() == 1 })
	second := make(chan error, 1)
	go func() {
		sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
		if err != nil {
			second <- err
			return
		}
		defer sub.Close()
		second <- collect(ctx, sub, 0, 5)
	}()
	time.Sleep(200 * time.Millisecond) // a second subscriber let through would have read events 1-3 by now
	appendEvents(t, db, runID, 2)
	time.Sleep(100 * time.Millisecond) // their notifications arrive before the starting point is read
	close(release)
	if err := <-second; err != nil {
		t.Errorf("second subscriber: %v; hub: %s", err, h.DebugState())
	}
	if sub := <-first; sub != nil {
		if err := collect(ctx, sub, 0, 5); err != nil {
			t.Errorf("first subscriber: %v", err)
		}
		sub.Close()
	}
}

// TestHubListensOnlyWhileItFollowsAStream: a hub that follows nothing does
// not listen (PostgreSQL would wake it for every event of every run);
// following a stream while events are appended starts listening without
// losing or repeating any; when the last subscriber leaves it stops, and
// it starts again for the next.
func TestHubListensOnlyWhileItFollowsAStream(t *testing.T) {
	db := storetest.NewDB(t)
	_, runID := newRun(t, db)
	h := newHub(t, db, events.HubOptions{})
	time.Sleep(50 * time.Millisecond)
	if h.Listening() {
		t.Fatal("the hub listens while it follows no stream")
	}
	// The first time, an event is committed after the subscription's
	// starting point and before the hub listens: nothing announces it to
	// this hub, so it must read it when it starts listening.
	listen := make(chan struct{})
	var once sync.Once
	h.SetBeforeListenForTest(func() { once.Do(func() { <-listen }) })
	var released sync.Once
	release := func() { released.Do(func() { close(listen) }) }
	t.Cleanup(release) // before the hub's Close (cleanups run last first), should the test stop early
	{
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		sub, err := h.Subscribe(ctx, events.RunStream(runID), 0)
		if err != nil {
			t.Fatal(err)
		}
		if evs, err := sub.Backlog(ctx); err != nil || len(evs) != 0 {
			t.Fatalf("backlog of a run without events = %d events, %v", len(evs), err)
		}
		appendEvents(t, db, runID, 1) // after the backlog: only live reading can deliver it
		release()
		if err := collect(ctx, sub, 0, 1); err != nil {
			t.Fatalf("an event committed before the hub listened: %v; hub: %s", err, h.DebugState())
		}
		sub.Close()
		cancel()
		waitFor(t, "the hub to stop listening once nothing is followed", func() bool { return !h.Listening() })
	}

	for round := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		from := int64(1 + round*40)
		done := make(chan struct{})
		go func() {
			defer close(done)
			appendEvents(t, db, runID, 40) // races the subscription and the LISTEN
		}()
		sub, err := h.Subscribe(ctx, events.RunStream(runID), from)
		if err != nil {
			t.Fatal(err)
		}
		if err := collect(ctx, sub, from, from+40); err != nil {
			t.Fatalf("round %d: %v; hub: %s", round, err, h.DebugState())
		}
		<-done
		// The events may all have come from the backlog before the
		// LISTEN's round trip ended: wait for it rather than look once.
		waitFor(t, fmt.Sprintf("round %d: the hub to listen while it follows a stream", round), h.Listening)
		sub.Close()
		cancel()
		waitFor(t, "the hub to stop listening once nothing is followed", func() bool { return !h.Listening() })
	}
}

// TestHubHearsOnlyTheStreamsItFollows: PostgreSQL announces an event only
// to the processes that follow its run or environment, so a Studio is not
// woken for the events of runs nobody watches through it; it hears a run
// from the moment it is followed and no longer once it is left.
func TestHubHearsOnlyTheStreamsItFollows(t *testing.T) {
	db := storetest.NewDB(t)
	envA, runA := newRun(t, db)
	envB, runB := newRun(t, db)
	h := newHub(t, db, events.HubOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	subA, err := h.Subscribe(ctx, events.RunStream(runA), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer subA.Close()
	subEnvA, err := h.Subscribe(ctx, events.EnvironmentStream(envA), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer subEnvA.Close()
	waitFor(t, "the hub to listen to the two streams it follows", h.QuietForTest)
	live(t, ctx, subA, subEnvA)

	// heard appends to B's run and environment, then one event to A's run
	// and one to A's environment, and returns how many notifications the
	// hub received meanwhile. The subscribers are live and the hub quiet,
	// so A's events are read only once their notifications arrive; and
	// notifications arrive in commit order on one connection, so by then
	// any of B's have arrived too.
	last := int64(0)
	heard := func(what string) int64 {
		t.Helper()
		before := h.Notifications()
		appendEvents(t, db, runB, 20)
		appendEnvironmentEvent(t, db, envB, runB)
		appendEvents(t, db, runA, 1)
		appendEnvironmentEvent(t, db, envA, runA)
		if err := collect(ctx, subA, last, last+1); err != nil {
			t.Fatalf("%s: run A: %v; hub: %s", what, err, h.DebugState())
		}
		if err := collect(ctx, subEnvA, last, last+1); err != nil {
			t.Fatalf("%s: environment A: %v; hub: %s", what, err, h.DebugState())
		}
		last++
		return h.Notifications() - before
	}
	if n := heard("B not followed"); n != 2 {
		t.Errorf("following run A and its environment, the hub heard %d notifications for 2 events of A and 21 of B; want 2", n)
	}

	subB, err := h.Subscribe(ctx, events.RunStream(runB), 20)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hub to listen to run B", func() bool { return h.ChannelsForTest() == 3 && h.QuietForTest() })
	live(t, ctx, subB)
	if n := heard("B followed"); n != 22 {
		t.Errorf("following run B too, the hub heard %d notifications, want 22 (20 of run B, 2 of A)", n)
	}
	if err := collect(ctx, subB, 20, 40); err != nil {
		t.Fatalf("run B once followed: %v", err)
	}
	subB.Close()
	waitFor(t, "the hub to leave run B's channel", func() bool { return h.ChannelsForTest() == 2 && h.QuietForTest() })
	if n := heard("B left"); n != 2 {
		t.Errorf("once run B was left, the hub heard %d notifications, want 2 (A's only)", n)
	}
}

// live reads the (empty) backlog of each subscription, so that from then
// on it gets only events the hub reads after a notification.
func live(t *testing.T, ctx context.Context, subs ...*events.Subscription) {
	t.Helper()
	for _, sub := range subs {
		if evs, err := sub.Backlog(ctx); err != nil || len(evs) != 0 {
			t.Fatalf("backlog = %d events, %v; want none", len(evs), err)
		}
	}
}

// TestHubFollowsManyStreamsAtOnce: more streams are followed at once than
// the listener changes in one round trip; each is listened to and delivers
// its live events, and leaving half of them leaves their channels only.
func TestHubFollowsManyStreamsAtOnce(t *testing.T) {
	db := storetest.NewDB(t)
	h := newHub(t, db, events.HubOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 300 // more than one round trip of LISTENs
	runIDs := make([]int64, n)
	subs := make([]*events.Subscription, n)
	var wg sync.WaitGroup
	for i := range n {
		_, runIDs[i] = newRun(t, db)
	}
	// The first LISTEN waits until every stream is followed, so that the
	// listener then finds them all to listen to at once.
	followed := make(chan struct{})
	var once sync.Once
	h.SetBeforeListenForTest(func() { once.Do(func() { <-followed }) })
	var released sync.Once
	release := func() { released.Do(func() { close(followed) }) }
	t.Cleanup(release)
	for i := range n {
		wg.Go(func() {
			sub, err := h.Subscribe(ctx, events.RunStream(runIDs[i]), 0)
			if err != nil {
				t.Error(err)
				return
			}
			subs[i] = sub
		})
	}
	wg.Wait()
	release()
	if t.Failed() {
		return
	}
	waitFor(t, "the hub to listen to every followed stream", func() bool { return h.ChannelsForTest() == n && h.QuietForTest() })
	live(t, ctx, subs...)
	for round, from := range []int{0, n / 2} {
		for i := from; i < n; i++ {
			appendEvents(t, db, runIDs[i], 1)
		}
		for i := from; i < n; i++ {
			if err := collect(ctx, subs[i], int64(round), int64(round+1)); err != nil {
				t.Fatalf("round %d, stream %d: %v", round, i, err)
			}
		}
		if round == 0 {
			for _, sub := range subs[:n/2] {
				sub.Close()
			}
			waitFor(t, "the hub to leave the channels of the streams left", func() bool { return h.ChannelsForTest() == n-n/2 && h.QuietForTest() })
		}
	}
	before := h.Notifications()
	appendEvents(t, db, runIDs[0], 1) // left: not heard
	appendEvents(t, db, runIDs[n-1], 1)
	if err := collect(ctx, subs[n-1], 2, 3); err != nil {
		t.Fatal(err)
	}
	if heard := h.Notifications() - before; heard != 1 {
		t.Errorf("the hub heard %d notifications for one event of a stream it follows and one of a stream it left; want 1", heard)
	}
	for _, sub := range subs[n/2:] {
		sub.Close()
	}
}

// TestHubFollowingAnUnannouncedAppend: an event appended while nobody
// follows its run is announced to nobody. When a subscriber comes while the
// appending transaction is still open, the hub cannot mark the run as
// followed until it ends: it goes on serving every other stream meanwhile
// (a transaction left open must not freeze the process's live streams),
// tries again, and once it follows the run its read has the event, without
// any later event to bring it.
func TestHubFollowingAnUnannouncedAppend(t *testing.T) {
	db := storetest.NewDB(t)
	_, runA := newRun(t, db)
	_, runB := newRun(t, db)
	h := newHub(t, db, events.HubOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	pos := 0
	if _, err := tx.Exec(ctx, store.AppendRunEventSQL(), runA, &pos, []byte(`{"run": {"status": "running"}}`)); err != nil {
		t.Fatal(err)
	}
	subA, err := h.Subscribe(ctx, events.RunStream(runA), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer subA.Close()
	subB, err := h.Subscribe(ctx, events.RunStream(runB), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	live(t, ctx, subA, subB) // the open transaction's event is not visible yet
	waitFor(t, "the hub to listen to both runs", func() bool { return h.ChannelsForTest() == 2 })

	// Run B is followed and live while run A's transaction is open.
	appendEvents(t, db, runB, 1)
	if err := collect(ctx, subB, 0, 1); err != nil {
		t.Fatalf("run B while a transaction holds run A unannounced: %v; hub: %s", err, h.DebugState())
	}
	if h.QuietForTest() {
		t.Fatalf("the hub counts run A as followed while a transaction holds it unannounced; hub: %s", h.DebugState())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := collect(ctx, subA, 0, 1); err != nil {
		t.Fatalf("an event committed while the hub could not follow its run yet: %v; hub: %s", err, h.DebugState())
	}
	waitFor(t, "the hub to follow both runs", h.QuietForTest)
}

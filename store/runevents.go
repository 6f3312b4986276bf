package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/events/payload"
)

// Appended events are announced on a channel of their run or environment
// ("run_events.<id>", "environment_events.<id>"), so that a listener hears
// only of the streams it LISTENs to: a process following three runs is not
// woken for every event of every other run on the database. A
// notification's payload starts with "<id>:<seq>" (the run or environment
// id and the new sequence number). A run's notification then carries the
// event itself and the state its page renders from, ":<RunNotice as
// JSON>", when that fits in RunNoticeLimit bytes, so that listeners need no
// read; otherwise (and for an environment's events) listeners read the
// events from the tables.
const (
	RunEventsChannelPrefix         = "run_events."
	EnvironmentEventsChannelPrefix = "environment_events."
)

// RunEventsChannel is the channel the run's events are announced on.
func RunEventsChannel(runID int64) string {
	return RunEventsChannelPrefix + strconv.FormatInt(runID, 10)
}

// EnvironmentEventsChannel is the channel the environment's events are
// announced on.
func EnvironmentEventsChannel(environmentID int64) string {
	return EnvironmentEventsChannelPrefix + strconv.FormatInt(environmentID, 10)
}

// RunEvent is one stored change of a run: its per-run sequence number, the
// checkpoint position it concerns (nil for a run-level change) and its
// payload (a payload.RunChanged, encoded).
type RunEvent struct {
	RunID      int64
	Seq        int64
	At         time.Time
	Checkpoint *int
	Payload    json.RawMessage
	// CheckpointNow is the event's checkpoint as stored when the event was
	// read (RunEventsWithState only; nil for a run-level change).
	CheckpointNow *Checkpoint
}

// EnvironmentEvent is one stored change that the environment page shows: a
// run started or finished, a service's state changed.
type EnvironmentEvent struct {
	EnvironmentID int64
	Seq           int64
	At            time.Time
	RunID         *int64
	Payload       json.RawMessage
	// CertificateNow is, for a change of a service's state, the
	// certificate of its domain as stored when the event was read
	// (EnvironmentEventsWithState only).
	CertificateNow *Certificate
	// RunNow is the run the event concerns (RunID) as stored when the
	// event was read (EnvironmentEventsWithState only).
	RunNow *Run
}

// eventTable is one of the two event tables: a stream's events, the row
// whose counter numbers them, and the channel that announces them.
type eventTable struct {
	events, stream, ref string // event table, its stream id and reference columns
	owner, counter      string // the table and column that number the events
	channel             string // the channel prefix
}

var (
	runEventTable         = eventTable{"run_events", "run_id", "checkpoint", "runs", "last_seq", RunEventsChannelPrefix}
	environmentEventTable = eventTable{"environment_events", "environment_id", "run_id", "environments", "last_event_seq", EnvironmentEventsChannelPrefix}
)

// appendSQL is the append-and-notify statement of an environment's events
// (a run's, appendRunEventSQL, is the same with more in its notification):
// it numbers the event with the stream's next sequence number, stores it
// and announces "<id>:<seq>" on the stream's channel. The UPDATE
// takes the owner's row lock, so concurrent appends to one stream are
// serialised and sequence numbers have no gaps: a rolled-back transaction
// takes its number with it.
func (t eventTable) appendSQL() string {
	return `
		WITH s AS (UPDATE ` + t.owner + ` SET ` + t.counter + ` = ` + t.counter + ` + 1 WHERE id = $1 RETURNING id, ` + t.counter + `),
		     i AS (INSERT INTO ` + t.events + ` (` + t.stream + `, seq, ` + t.ref + `, payload)
		           SELECT id, ` + t.counter + `, $2, $3 FROM s RETURNING ` + t.stream + ` AS id, seq)
		SELECT i.seq FROM i, LATERAL (SELECT pg_notify('` + t.channel + `' || i.id::text, i.id::text || ':' || i.seq::text)) n`
}

// RunNoticeLimit is the largest RunNotice a run's notification carries, in
// bytes: PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more, and
// the payload also holds "<id>:<seq>:".
const RunNoticeLimit = 7000

// RunFollowedLockClass is the first key of the advisory lock that marks a
// run as followed (the second is RunFollowedLockKey): a process that follows
// a run's stream holds it, shared, on its LISTEN connection (FollowRunSQL,
// TryFollowRunsSQL),
// for as long as it listens to the run's channel. A run's append statement
// notifies only while some session holds it, and then builds the event into
// the notification: a notification nobody listens to still costs every
// commit the database's notification queue (whose lock serialises the
// commits that notify) and wakes every process that LISTENs in the
// database, whatever its channels.
//
// The statement tries the lock exclusively for its transaction
// (pg_try_advisory_xact_lock, which never waits): it gets it only when no
// session follows the run, and then keeps it until it commits, so that no
// process starts following the run before that commit (FollowRunSQL waits
// for it; TryFollowRunsSQL reports it, and the event hub tries again), nor
// so takes its LISTEN and reads the run's events again before it. An event
// committed without a notification is therefore always in that read, and
// one committed after it is always announced: a follower that comes or goes
// costs a read, never an event.
const RunFollowedLockClass = 0x53e7 // "s"tream "e"vents

// RunFollowedLockKey is the second key of the run's followed lock.
func RunFollowedLockKey(runID int64) int32 { return int32(runID % math.MaxInt32) }

// FollowRunSQL is the statement that marks the run as followed by this
// session (a session-level shared advisory lock; UnfollowRunSQL ends it).
// It has no parameters, so it may go out with LISTEN in one simple query.
func FollowRunSQL(runID int64) string {
	return fmt.Sprintf("SELECT pg_advisory_lock_shared(%d, %d)", RunFollowedLockClass, RunFollowedLockKey(runID))
}

// TryFollowRunsSQL is FollowRunSQL for several runs, without waiting: it
// marks each run that no appending transaction holds unannounced (see
// RunFollowedLockClass) and returns the ids of those it marked, one per
// row. A run it could not mark is to be tried again: its event stays
// unannounced until that transaction ends. No parameters, as FollowRunSQL.
func TryFollowRunsSQL(runIDs []int64) string {
	var ids strings.Builder
	for i, id := range runIDs {
		if i > 0 {
			ids.WriteByte(',')
		}
		ids.WriteString(strconv.FormatInt(id, 10))
	}
	return "SELECT id FROM unnest('{" + ids.String() + "}'::bigint[]) id WHERE pg_try_advisory_lock_shared(" + followedLockSQL + ")"
}

// UnfollowRunSQL is the statement that ends FollowRunSQL's mark.
func UnfollowRunSQL(runID int64) string {
	return fmt.Sprintf("SELECT pg_advisory_unlock_shared(%d, %d)", RunFollowedLockClass, RunFollowedLockKey(runID))
}

// followedLockSQL is the followed lock's keys in SQL, for the run whose id
// is the column id.
var followedLockSQL = strconv.Itoa(RunFollowedLockClass) + `, (id % ` + strconv.Itoa(math.MaxInt32) + `)::int4`

// appendRunEventSQL is the run's append statement: appendSQL's, except
// that it notifies only while the run is followed (see
// RunFollowedLockClass), and that its notification then also carries the
// event and the state of the run and of the event's checkpoint as they
// stand in the appending transaction (a RunNotice), when it fits in
// RunNoticeLimit. The run's row comes from the counter's UPDATE (the row as
// this transaction left it); the checkpoint's from the table, which the
// change's own statement updated before.
var appendRunEventSQL = `
	WITH s AS (UPDATE runs SET last_seq = last_seq + 1 WHERE id = $1
	           RETURNING id, last_seq, status, reason, cancel_requested, started_at, finished_at, detail, executor_lost_at),
	     i AS (INSERT INTO run_events (run_id, seq, checkpoint, payload)
	           SELECT id, last_seq, $2, $3 FROM s RETURNING run_id AS id, seq, at, checkpoint, payload),
	     f AS (SELECT i.*, NOT pg_try_advisory_xact_lock(` + followedLockSQL + `) AS followed FROM i)
	SELECT f.seq FROM f CROSS JOIN s LEFT JOIN LATERAL (
	    SELECT pg_notify('` + RunEventsChannelPrefix + `' || f.id::text, f.id::text || ':' || f.seq::text ||
	        CASE WHEN octet_length(b.body) <= ` + strconv.Itoa(RunNoticeLimit) + ` THEN ':' || b.body ELSE '' END)
	    FROM (SELECT json_build_object(
	              'at', f.at, 'checkpoint', f.checkpoint, 'payload', f.payload,
	              'run', json_build_object('status', s.status, 'reason', s.reason, 'cancelRequested', s.cancel_requested,
	                  'startedAt', s.started_at, 'finishedAt', s.finished_at, 'detail', s.detail, 'executorLostAt', s.executor_lost_at),
	              'cp', (SELECT json_build_object('kind', c.kind, 'name', c.name, 'status', c.status, 'startedAt', c.started_at,
	                         'finishedAt', c.finished_at, 'warning', c.warning, 'detail', c.detail)
	                     FROM run_checkpoints c WHERE c.run_id = f.id AND c.position = f.checkpoint))::text AS body
	          OFFSET 0) b -- built once, not once per use
	    WHERE f.followed) n ON true`

var appendEnvironmentEventSQL = environmentEventTable.appendSQL()

// RunNotice is what a run's notification carries after "<id>:<seq>:": the
// event as stored and the state the run page's live parts render from, as
// they stood when the event was appended.
type RunNotice struct {
	At         time.Time       `json:"at"`
	Checkpoint *int            `json:"checkpoint"`
	Payload    json.RawMessage `json:"payload"`
	Run        RunNoticeState  `json:"run"`
	// CP is the event's checkpoint (nil for a run-level change).
	CP *RunNoticeCheckpoint `json:"cp"`
}

// RunNoticeState is the part of a run's row that changes while it runs.
type RunNoticeState struct {
	Status          string          `json:"status"`
	Reason          string          `json:"reason"`
	CancelRequested bool            `json:"cancelRequested"`
	StartedAt       *time.Time      `json:"startedAt"`
	FinishedAt      *time.Time      `json:"finishedAt"`
	Detail          json.RawMessage `json:"detail"`
	ExecutorLostAt  *time.Time      `json:"executorLostAt"`
}

// RunNoticeCheckpoint is a checkpoint's row in a RunNotice.
type RunNoticeCheckpoint struct {
	Kind       string          `json:"kind"`
	Name       string          `json:"name"`
	Status     string          `json:"status"`
	StartedAt  *time.Time      `json:"startedAt"`
	FinishedAt *time.Time      `json:"finishedAt"`
	Warning    string          `json:"warning"`
	Detail     json.RawMessage `json:"detail"`
}

// DecodeRunNotice reads what a run's notification carries after
// "<id>:<seq>:". Times are in the local zone, as a read from the tables
// gives them.
func DecodeRunNotice(body string) (*RunNotice, error) {
	var n RunNotice
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		return nil, fmt.Errorf("store: decode run notification: %w", err)
	}
	local := func(t *time.Time) {
		if t != nil {
			*t = t.Local()
		}
	}
	n.At = n.At.Local()
	local(n.Run.StartedAt)
	local(n.Run.FinishedAt)
	local(n.Run.ExecutorLostAt)
	if n.CP != nil {
		local(n.CP.StartedAt)
		local(n.CP.FinishedAt)
	}
	return &n, nil
}

// Apply returns the run with the state of n: run is the run as last read
// (what never changes after it is created: its kind, revisions, creator).
func (n *RunNotice) Apply(run *Run, seq int64) *Run {
	r := *run
	r.Status, r.Reason, r.CancelRequested = n.Run.Status, n.Run.Reason, n.Run.CancelRequested
	r.StartedAt, r.FinishedAt, r.ExecutorLostAt = n.Run.StartedAt, n.Run.FinishedAt, n.Run.ExecutorLostAt
	r.Detail, r.LastSeq = n.Run.Detail, seq
	return &r
}

// CheckpointOf returns the event's checkpoint as it stood (nil for a
// run-level change).
func (n *RunNotice) CheckpointOf(runID int64) *Checkpoint {
	if n.CP == nil || n.Checkpoint == nil {
		return nil
	}
	c := n.CP
	return &Checkpoint{RunID: runID, Position: *n.Checkpoint, Kind: c.Kind, Name: c.Name, Status: c.Status,
		StartedAt: c.StartedAt, FinishedAt: c.FinishedAt, Warning: c.Warning, Detail: c.Detail}
}

// AppendRunEventSQL is the statement that appends a run's event ($1 the
// run, $2 the checkpoint position or NULL, $3 the payload), for the stream
// benchmark, which times it in transactions of its own.
func AppendRunEventSQL() string { return appendRunEventSQL }

// appendEvent appends data as the next event of the stream id of table t
// inside tx and announces it; ref is the event's checkpoint (a run event)
// or run (an environment event). It returns the new sequence number.
func appendEvent(ctx context.Context, tx pgx.Tx, t eventTable, id int64, ref any, data []byte) (int64, error) {
	var seq int64
	sql := appendRunEventSQL
	if t.events == environmentEventTable.events {
		sql = appendEnvironmentEventSQL
	}
	if err := tx.QueryRow(ctx, sql, id, ref, data).Scan(&seq); err != nil {
		return 0, fmt.Errorf("store: append %s: %w", t.events, err)
	}
	return seq, nil
}

// appendRunEvent appends p as the next event of the run inside tx.
func appendRunEvent(ctx context.Context, tx pgx.Tx, runID int64, checkpoint *int, p payload.RunChanged) (int64, error) {
	data, err := payload.Encode(p)
	if err != nil {
		return 0, fmt.Errorf("store: encode run event: %w", err)
	}
	return appendEvent(ctx, tx, runEventTable, runID, checkpoint, data)
}

// appendEnvironmentEvent appends p as the next event of the environment
// inside tx.
func appendEnvironmentEvent(ctx context.Context, tx pgx.Tx, environmentID int64, runID *int64, p payload.EnvironmentChanged) (int64, error) {
	data, err := payload.Encode(p)
	if err != nil {
		return 0, fmt.Errorf("store: encode environment event: %w", err)
	}
	return appendEvent(ctx, tx, environmentEventTable, environmentID, runID, data)
}

// AppendRunEvent appends v (any JSON object) as the next event of the run
// in a transaction of its own, for tests and the stream benchmark. The
// Studio's own changes append a typed payload.RunChanged inside their
// transaction instead.
func (db *DB) AppendRunEvent(ctx context.Context, runID int64, checkpoint *int, v any) (int64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("store: encode run event: %w", err)
	}
	var seq int64
	err = db.InTx(ctx, func(tx pgx.Tx) (err error) {
		seq, err = appendEvent(ctx, tx, runEventTable, runID, checkpoint, data)
		return err
	})
	return seq, err
}

// RunEventsAfter returns up to limit events of the run with a sequence number
// above after, in order.
func (db *DB) RunEventsAfter(ctx context.Context, runID, after int64, limit int) ([]RunEvent, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT run_id, seq, at, checkpoint, payload FROM run_events
		WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, runID, after, limit)
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RunEvent, error) {
		var e RunEvent
		err := row.Scan(&e.RunID, &e.Seq, &e.At, &e.Checkpoint, &e.Payload)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: run events: %w", err)
	}
	return evs, nil
}

// EnvironmentEventsAfter returns up to limit events of the environment with a
// sequence number above after, in order.
func (db *DB) EnvironmentEventsAfter(ctx context.Context, environmentID, after int64, limit int) ([]EnvironmentEvent, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT environment_id, seq, at, run_id, payload FROM environment_events
		WHERE environment_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, environmentID, after, limit)
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (EnvironmentEvent, error) {
		var e EnvironmentEvent
		err := row.Scan(&e.EnvironmentID, &e.Seq, &e.At, &e.RunID, &e.Payload)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: environment events: %w", err)
	}
	return evs, nil
}

// LastRunEventSeq returns the sequence number of the run's newest committed
// event (0 when it has none). The event hub starts following a run from it.
func (db *DB) LastRunEventSeq(ctx context.Context, runID int64) (int64, error) {
	var seq int64
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM run_events WHERE run_id = $1`, runID).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("store: last run event: %w", err)
	}
	return seq, nil
}

// LastEnvironmentEventSeq returns the sequence number of the environment's
// newest committed event (0 when it has none).
func (db *DB) LastEnvironmentEventSeq(ctx context.Context, environmentID int64) (int64, error) {
	var seq int64
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM environment_events WHERE environment_id = $1`, environmentID).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("store: last environment event: %w", err)
	}
	return seq, nil
}

// RunQueueDepth counts the runs not finished yet (pending, running or
// waiting), for the metrics endpoint.
func (db *DB) RunQueueDepth(ctx context.Context) (int64, error) {
	var n int64
	err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE status IN ('pending', 'running', 'waiting')`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: run queue depth: %w", err)
	}
	return n, nil
}

// RunEventsWithState is RunEventsAfter plus what a run page's live parts
// are rendered from: each event's checkpoint as stored now, and the run
// with its environment. The two statements go out in one pipeline (one
// round trip), the state after the events, so it is never older than them.
// A run that does not exist is NotFound.
func (db *DB) RunEventsWithState(ctx context.Context, runID, after int64, limit int) ([]RunEvent, *Run, *Environment, error) {
	var evs []RunEvent
	var run Run
	var env Environment
	b := &pgx.Batch{}
	b.Queue(`
		SELECT e.run_id, e.seq, e.at, e.checkpoint, e.payload,
		       c.kind, c.name, c.status, c.started_at, c.finished_at, c.warning, c.detail
		FROM run_events e
		LEFT JOIN run_checkpoints c ON c.run_id = e.run_id AND c.position = e.checkpoint
		WHERE e.run_id = $1 AND e.seq > $2 ORDER BY e.seq LIMIT $3`, runID, after, limit).Query(func(rows pgx.Rows) error {
		var err error
		evs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (RunEvent, error) {
			var e RunEvent
			var kind, name, status, warning *string
			var c Checkpoint
			err := row.Scan(&e.RunID, &e.Seq, &e.At, &e.Checkpoint, &e.Payload,
				&kind, &name, &status, &c.StartedAt, &c.FinishedAt, &warning, &c.Detail)
			if err == nil && e.Checkpoint != nil && kind != nil {
				c.RunID, c.Position, c.Kind, c.Name, c.Status, c.Warning = e.RunID, *e.Checkpoint, *kind, *name, *status, *warning
				e.CheckpointNow = &c
			}
			return e, err
		})
		return err
	})
	b.Queue(`
		SELECT `+runColumns+`, `+environmentColumns+`
		FROM runs r
		JOIN environments e ON e.id = r.environment_id
		JOIN projects p ON p.id = e.project_id
		WHERE r.id = $1`, runID).QueryRow(func(row pgx.Row) error {
		return row.Scan(append(run.scanTargets(),
			&env.ID, &env.ProjectID, &env.Project, &env.Name, &env.State, &env.ActiveRevisionID, &env.CreatedAt, &env.LastEventSeq)...)
	})
	err := db.Pool.SendBatch(ctx, b).Close()
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("store: run events: %w", err)
	}
	return evs, &run, &env, nil
}

// EnvironmentEventsWithState is EnvironmentEventsAfter plus what an
// environment page's live parts are rendered from: the environment, its
// latest runs (newest first, at most latest) and, for each change of a
// service's state, the certificate of its domain (CertificateNow), and the
// run each event concerns (RunNow), read after the events in the same round
// trip. An environment that does not exist is NotFound.
func (db *DB) EnvironmentEventsWithState(ctx context.Context, environmentID, after int64, limit, latest int) ([]EnvironmentEvent, *Environment, []Run, error) {
	var evs []EnvironmentEvent
	var domains []*string
	var env Environment
	var runs []Run
	certs := map[string]*Certificate{}
	concerned := map[int64]*Run{}
	b := &pgx.Batch{}
	b.Queue(`
		SELECT environment_id, seq, at, run_id, payload, payload->'service'->>'domain' FROM environment_events
		WHERE environment_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, environmentID, after, limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var e EnvironmentEvent
			var domain *string
			if err := rows.Scan(&e.EnvironmentID, &e.Seq, &e.At, &e.RunID, &e.Payload, &domain); err != nil {
				return err
			}
			evs = append(evs, e)
			domains = append(domains, domain)
		}
		return rows.Err()
	})
	b.Queue(`SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id WHERE e.id = $1`, environmentID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&env.ID, &env.ProjectID, &env.Project, &env.Name, &env.State, &env.ActiveRevisionID, &env.CreatedAt, &env.LastEventSeq)
	})
	b.Queue(`SELECT `+runColumns+` FROM (`+newestRunsOf("")+`) r ORDER BY r.id DESC`, environmentID, latest).Query(func(rows pgx.Rows) error {
		var err error
		runs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) {
			r, err := scanRun(row)
			if err != nil {
				return Run{}, err
			}
			return *r, nil
		})
		return err
	})
	b.Queue(`
		SELECT `+certificateSelect+` FROM certificates
		WHERE environment_id = $1 AND domain IN (
			SELECT payload->'service'->>'domain' FROM (
				SELECT payload FROM environment_events
				WHERE environment_id = $1 AND seq > $2 ORDER BY seq LIMIT $3) e)`, environmentID, after, limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			c, err := scanCertificate(rows)
			if err != nil {
				return err
			}
			certs[c.Domain] = c
		}
		return rows.Err()
	})
	// The runs the events concern, read by their ids (a primary-key probe
	// each: a lateral subquery with LIMIT is never turned into a join).
	// As "r.id IN (…)" or "r.id = ANY(ARRAY(…))", a generic plan read
	// the environment's runs from the newest and filtered them: all of
	// them (10,000 in the bench) for a replay of old events.
	b.Queue(`
		SELECT `+runColumns+` FROM (
			SELECT DISTINCT run_id FROM (
				SELECT run_id FROM environment_events
				WHERE environment_id = $1 AND seq > $2 ORDER BY seq LIMIT $3) e
			WHERE run_id IS NOT NULL) e
		CROSS JOIN LATERAL (SELECT r.* FROM runs r WHERE r.id = e.run_id AND r.environment_id = $1 LIMIT 1) r`, environmentID, after, limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			r, err := scanRun(rows)
			if err != nil {
				return err
			}
			concerned[r.ID] = r
		}
		return rows.Err()
	})
	err := db.Pool.SendBatch(ctx, b).Close()
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil, apperr.Errorf(apperr.NotFound, "No such environment.")
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("store: environment events: %w", err)
	}
	for i, d := range domains {
		if d != nil {
			evs[i].CertificateNow = certs[*d]
		}
		if id := evs[i].RunID; id != nil {
			evs[i].RunNow = concerned[*id]
		}
	}
	return evs, &env, runs, nil
}

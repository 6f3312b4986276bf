package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/events/payload"
	"github.com/skali-dev/studio/runs/mask"
)

// The bounds of a run's log, the line that says it was cut included: past
// either, that line ends the log and later lines are dropped. A longer line is shortened to
// RunLogLineBytes.
const (
	RunLogLineLimit = 10000
	RunLogByteLimit = 1 << 20
	RunLogLineBytes = 4096
)

// RunLogCutLine is the text of the line that ends a log cut at its bound.
const RunLogCutLine = "The log was cut here: a run keeps at most 10,000 lines and 1 MiB of log; later lines are not kept."

// LogLine is one stored line of a run's log.
type LogLine struct {
	// N numbers the run's lines from 1, in order.
	N        int64
	Position int
	At       time.Time
	Text     string
}

// NewLogLine is a line to append: its time and its text, masked already.
type NewLogLine struct {
	At   time.Time
	Text string
}

// LogAppend is what an append kept.
type LogAppend struct {
	// Kept is how many lines were stored (the cut line included); First is
	// the number of the first.
	Kept  int
	First int64
	// Cut: the log reached its bound with this append (or before it).
	Cut bool
	// Applied is false when the run's lease is held by another executor:
	// nothing was stored.
	Applied bool
}

// cleanLogLine makes text storable and bounded: valid UTF-8 without NUL
// or carriage returns (mask.Clean, which the masker of a run's log knows),
// at most RunLogLineBytes bytes (cut on a character boundary, marked with
// an ellipsis).
func cleanLogLine(text string) string {
	text = mask.Clean(text)
	if len(text) > RunLogLineBytes {
		cut := RunLogLineBytes - len("…")
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return text
}

// AppendRunLog appends lines to the run's log under the checkpoint at
// position, and the run event that carries them to live pages, in one
// transaction. With lease set it stores nothing (Applied false) unless
// that lease owner holds the run. Lines past the log's bounds are dropped,
// the first of them replaced by one line saying so (RunLogCutLine).
func (db *DB) AppendRunLog(ctx context.Context, runID int64, position int, lease string, lines []NewLogLine) (LogAppend, error) {
	var out LogAppend
	if len(lines) == 0 {
		return out, nil
	}
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var count, size int64
		var cut bool
		var status, reason, summary string
		err := tx.QueryRow(ctx, `
			SELECT log_lines, log_bytes, log_cut, status, reason, COALESCE(detail->>'summary', '')
			FROM runs WHERE id = $1 AND ($2::text = '' OR lease_owner = $2) FOR UPDATE`, runID, lease).
			Scan(&count, &size, &cut, &status, &reason, &summary)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		out.Applied = true
		if cut {
			out.Cut = true
			return nil
		}
		ats := make([]time.Time, 0, len(lines))
		texts := make([]string, 0, len(lines))
		for _, l := range lines {
			text := cleanLogLine(l.Text)
			// The last slot of each bound is kept for the line that says
			// the log was cut.
			if count+int64(len(texts))+1 >= RunLogLineLimit || size+int64(len(text)+len(RunLogCutLine)) > RunLogByteLimit {
				ats, texts, cut = append(ats, l.At), append(texts, RunLogCutLine), true
				break
			}
			size += int64(len(text))
			ats, texts = append(ats, l.At), append(texts, text)
		}
		first := count + 1
		if _, err := tx.Exec(ctx, `
			INSERT INTO run_log_lines (run_id, n, position, at, text)
			SELECT $1, $2 + u.i - 1, $3, u.at, u.text
			FROM unnest($4::timestamptz[], $5::text[]) WITH ORDINALITY AS u(at, text, i)`,
			runID, first, position, ats, texts); err != nil {
			return err
		}
		if cut {
			size += int64(len(RunLogCutLine))
		}
		if _, err := tx.Exec(ctx, `UPDATE runs SET log_lines = $2, log_bytes = $3, log_cut = $4 WHERE id = $1`,
			runID, count+int64(len(texts)), size, cut); err != nil {
			return err
		}
		ev := runPayload(status, reason, summary)
		ev.Log = &payload.LogLines{Position: position, First: first, Cut: cut, Lines: make([]payload.LogLine, len(texts))}
		for i := range texts {
			ev.Log.Lines[i] = payload.LogLine{N: first + int64(i), At: ats[i].UTC(), Text: texts[i]}
		}
		if _, err := appendRunEvent(ctx, tx, runID, nil, ev); err != nil {
			return err
		}
		out.Kept, out.First, out.Cut = len(texts), first, cut
		return nil
	})
	if err != nil {
		return LogAppend{}, fmt.Errorf("store: append run %d log: %w", runID, err)
	}
	return out, nil
}

// RunLog returns the run's log lines in order: all of them (position 0) or
// those of the checkpoint at position.
func (db *DB) RunLog(ctx context.Context, runID int64, position int) ([]LogLine, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT n, position, at, text FROM run_log_lines
		WHERE run_id = $1 AND ($2 = 0 OR position = $2) ORDER BY n`, runID, position)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LogLine, error) {
		var l LogLine
		err := row.Scan(&l.N, &l.Position, &l.At, &l.Text)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: run log: %w", err)
	}
	return out, nil
}

// LastRunLogLine returns the number of the last log line of the run's
// checkpoint at position (0 when it has none).
func (db *DB) LastRunLogLine(ctx context.Context, runID int64, position int) (int64, error) {
	var n int64
	err := db.Pool.QueryRow(ctx, `SELECT COALESCE(max(n), 0) FROM run_log_lines WHERE run_id = $1 AND position = $2`, runID, position).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: last run log line: %w", err)
	}
	return n, nil
}

package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A database's snapshot is pg_dump's plain SQL, run in the database's own
// pod (its own major version), followed by one comment line the Studio
// writes: the rows of each table as the dump holds them (snapshotTrailer).
// pg_dump takes all of it in one transaction, so these are the counts the
// database had when the snapshot was taken; a drill restores the dump and
// checks that each table has them again. psql skips the comment.

// snapshotTrailer starts the dump's last line: the JSON of dumpCounts.
const snapshotTrailer = "-- skali-snapshot: "

// tableRows is one table's rows in a dump.
type tableRows struct {
	Table string `json:"table"` // as the dump names it: schema.name, quoted as needed
	Rows  int64  `json:"rows"`
}

// dumpCounts is what the trailer records.
type dumpCounts struct {
	Tables []tableRows `json:"tables"`
}

// rows is the sum of the tables' rows.
func (c dumpCounts) rows() int64 {
	var n int64
	for _, t := range c.Tables {
		n += t.Rows
	}
	return n
}

// trailer is the trailer line of c.
func (c dumpCounts) trailer() []byte {
	b, _ := json.Marshal(c)
	return append(append([]byte(snapshotTrailer), b...), '\n')
}

// dumpComplete is the comment line pg_dump writes at the very end of a
// plain dump: without it the output was cut short.
const dumpComplete = "-- PostgreSQL database dump complete"

// maxHeaderLine bounds the line a dumpScanner keeps outside COPY data (a
// COPY line names at most 1,600 columns of 63 bytes; a trailer lists
// tables): longer lines are neither.
const maxHeaderLine = 8 << 20

// dumpScanner reads a plain dump as it streams (an io.Writer), counting
// the data lines of each COPY block, and keeps the trailer when there is
// one. Its memory is one line outside COPY data, bounded.
type dumpScanner struct {
	lines  lineReader // only a line's start inside COPY data
	inCopy bool
	// complete: pg_dump's last comment (dumpComplete) was read.
	complete bool
	table    string
	rows     int64
	counted  dumpCounts
	trailer  *dumpCounts
	bad      error
}

func (s *dumpScanner) Write(p []byte) (int, error) {
	s.lines.feed(p, s.keep, s.endLine)
	return len(p), nil
}

// keep is how much of the current line is kept.
func (s *dumpScanner) keep() int {
	if s.inCopy {
		return 3 // enough to see `\.`
	}
	return maxHeaderLine
}

func (s *dumpScanner) endLine() {
	line, long := s.lines.take()
	if long && !s.inCopy {
		return // neither a COPY line nor the trailer
	}
	if s.inCopy {
		if string(line) == `\.` && !long {
			s.counted.Tables = append(s.counted.Tables, tableRows{Table: s.table, Rows: s.rows})
			s.inCopy = false
			return
		}
		s.rows++
		return
	}
	text := string(line)
	switch {
	case strings.HasPrefix(text, "COPY ") && strings.HasSuffix(text, " FROM stdin;"):
		s.table, s.rows, s.inCopy = copyTable(text), 0, true
	case text == dumpComplete:
		s.complete = true
	case strings.HasPrefix(text, snapshotTrailer):
		var c dumpCounts
		if err := json.Unmarshal([]byte(text[len(snapshotTrailer):]), &c); err != nil {
			s.bad = fmt.Errorf("its row counts cannot be read: %v", err)
			return
		}
		s.trailer = &c
	}
}

// copyTable is the table a COPY line names: the qualified name up to the
// first space outside double quotes.
func copyTable(line string) string {
	rest := strings.TrimPrefix(line, "COPY ")
	quoted := false
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '"':
			quoted = !quoted
		case ' ':
			if !quoted {
				return rest[:i]
			}
		}
	}
	return rest
}

// commandTags reads psql's output (not quiet) as it streams: the rows of
// each COPY, in order, and the last line. A dump's script prints a few
// short lines per statement (its command tags, the results of its
// set_config and setval calls), never its data; lines longer than a
// command tag are skipped, so the memory is the COPY counts.
type commandTags struct {
	lines  lineReader
	copies []int64
	last   string
}

// maxTagLine is longer than any tag this reads ("COPY " and 20 digits).
const maxTagLine = 32

func (t *commandTags) Write(p []byte) (int, error) {
	t.lines.feed(p, func() int { return maxTagLine }, t.endLine)
	return len(p), nil
}

func (t *commandTags) endLine() {
	b, long := t.lines.take()
	line := string(b)
	if long {
		t.last = "…"
		return
	}
	if line == "" {
		return
	}
	t.last = line
	if rows, ok := strings.CutPrefix(line, "COPY "); ok {
		if n, err := strconv.ParseInt(rows, 10, 64); err == nil && n >= 0 {
			t.copies = append(t.copies, n)
		}
	}
}

// hold is true when the tags say that the transaction committed with
// want's rows in its tables: one COPY per table of the dump, in its
// order, each of the rows the snapshot holds, and COMMIT last. False
// says nothing either way (the output's end may be lost).
func (t *commandTags) hold(want dumpCounts) bool {
	if t.last != "COMMIT" || t.lines.partial() || len(t.copies) != len(want.Tables) {
		return false
	}
	for i, tr := range want.Tables {
		if t.copies[i] != tr.Rows {
			return false
		}
	}
	return true
}

// lineReader gathers the lines of a stream written in any pieces, keeping
// only the start of each (memory bounded whatever the lines' lengths).
type lineReader struct {
	line []byte // the current line so far, at most what keep allowed
	long bool   // the current line outgrew what is kept
}

// feed adds p: each line's start, up to keep() bytes, is gathered, and
// end is called at each line's end (it takes the line with take).
func (r *lineReader) feed(p []byte, keep func() int, end func()) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		k := keep()
		if len(r.line)+len(chunk) > k {
			r.long = true
		}
		if room := k - len(r.line); room > 0 {
			r.line = append(r.line, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			return
		}
		end()
		p = p[i+1:]
	}
}

// take returns the line gathered (valid until the next feed) and whether
// it was longer, and starts the next.
func (r *lineReader) take() ([]byte, bool) {
	line, long := r.line, r.long
	r.line, r.long = r.line[:0], false
	return line, long
}

// partial is whether a line was begun and not ended.
func (r *lineReader) partial() bool { return len(r.line) > 0 || r.long }

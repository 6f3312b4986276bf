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
	line   []byte // the current line so far (only its start inside COPY data)
	long   bool   // the current line outgrew what is kept
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
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		keep := maxHeaderLine
		if s.inCopy {
			keep = 3 // enough to see `\.`
		}
		if len(s.line)+len(chunk) > keep {
			s.long = true
		}
		if room := keep - len(s.line); room > 0 {
			s.line = append(s.line, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		s.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (s *dumpScanner) endLine() {
	line, long := s.line, s.long
	s.line, s.long = s.line[:0], false
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
	line   []byte
	long   bool
	copies []int64
	last   string
}

// maxTagLine is longer than any tag this reads ("COPY " and 20 digits).
const maxTagLine = 32

func (t *commandTags) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if len(t.line)+len(chunk) > maxTagLine {
			t.long = true
		} else {
			t.line = append(t.line, chunk...)
		}
		if i < 0 {
			break
		}
		t.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (t *commandTags) endLine() {
	line, long := string(t.line), t.long
	t.line, t.long = t.line[:0], false
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
	if t.last != "COMMIT" || len(t.line) > 0 || t.long || len(t.copies) != len(want.Tables) {
		return false
	}
	for i, tr := range want.Tables {
		if t.copies[i] != tr.Rows {
			return false
		}
	}
	return true
}

package kubernetes

import (
	"reflect"
	"strings"
	"testing"
)

// A dump's row counts are read as it streams, whatever the sizes of the
// writes: quoted names with spaces, a row longer than what is kept of a
// line, an empty table, and the trailer read back.
func TestDumpScannerCountsRowsAndReadsTheTrailer(t *testing.T) {
	long := strings.Repeat("é", 3<<20) // a row far longer than a kept line
	dump := "-- PostgreSQL database dump\n" +
		"COPY public.items (id, note) FROM stdin;\n1\tone\n2\t" + long + "\n3\t\\\\.\n\\.\n" +
		"COPY \"Odd Schema\".\"my \"\"table\"\"\" (x) FROM stdin;\n\\.\n" +
		"COPY s2.t (x) FROM stdin;\n7\n\\.\n" +
		"-- COPY not.atable FROM stdin; is a comment\n"
	want := dumpCounts{Tables: []tableRows{{"public.items", 3}, {`"Odd Schema"."my ""table"""`, 0}, {"s2.t", 1}}}
	for _, size := range []int{1, 2, 7, 4096, len(dump)} {
		var s dumpScanner
		for i := 0; i < len(dump); i += size {
			s.Write([]byte(dump[i:min(i+size, len(dump))]))
		}
		if s.inCopy || !reflect.DeepEqual(s.counted, want) {
			t.Fatalf("writes of %d bytes: counted %+v (in copy %v), want %+v", size, s.counted, s.inCopy, want)
		}
		if len(s.lines.line) > maxHeaderLine {
			t.Fatalf("writes of %d bytes kept a line of %d bytes", size, len(s.lines.line))
		}
		var r dumpScanner
		r.Write([]byte(dump))
		r.Write(s.counted.trailer())
		if r.bad != nil || r.trailer == nil || !reflect.DeepEqual(*r.trailer, want) || r.trailer.rows() != 4 {
			t.Fatalf("the trailer read back: %+v (%v)", r.trailer, r.bad)
		}
	}
	{
		var s dumpScanner
		s.Write([]byte(dump))
		if s.complete {
			t.Fatal("a dump without pg_dump's last comment is taken as complete")
		}
		s.Write([]byte("\n--\n" + dumpComplete + "\n--\n\n"))
		if !s.complete {
			t.Fatal("a dump with pg_dump's last comment is not taken as complete")
		}
	}
	var cut dumpScanner
	cut.Write([]byte("COPY public.items (id) FROM stdin;\n1\n2\n"))
	if !cut.inCopy || cut.table != "public.items" {
		t.Fatalf("a dump cut inside a table's data is not seen as cut: %+v", cut)
	}
}

// psql's output of a replay says the snapshot's rows are in only when it
// holds every COPY's rows in the dump's order and COMMIT last, whatever
// the sizes of the writes; anything else (a lost end, a count that
// differs, a rolled-back transaction) leaves the answer to counting.
func TestCommandTagsHoldOnlyAWholeCommittedReplay(t *testing.T) {
	want := dumpCounts{Tables: []tableRows{{"public.a", 5}, {"public.b", 0}, {"public.c", 123456789012}}}
	head := "BEGIN\nSET\n set_config \n------------\n \n(1 row)\n\nDROP TABLE\nCREATE TABLE\n " + strings.Repeat("x", 500) + "\n"
	whole := head + "COPY 5\nCOPY 0\nCOPY 123456789012\n setval \n--------\n   42\n(1 row)\n\nALTER TABLE\nCOMMIT\n"
	for _, c := range []struct {
		name, out string
		hold      bool
	}{
		{"whole", whole, true},
		{"without its last newline", strings.TrimSuffix(whole, "\n"), false},
		{"its end lost", whole[:len(whole)-20], false},
		{"rolled back", strings.Replace(whole, "COMMIT\n", "ROLLBACK\n", 1), false},
		{"a table short of a row", strings.Replace(whole, "COPY 5\n", "COPY 4\n", 1), false},
		{"a COPY missing", strings.Replace(whole, "COPY 0\n", "", 1), false},
		{"a COPY too many", strings.Replace(whole, "COPY 0\n", "COPY 0\nCOPY 0\n", 1), false},
		{"a long line last", whole + strings.Repeat("y", 100) + "\n", false},
		{"a long line cut short last", whole + strings.Repeat("y", 100), false},
	} {
		for _, size := range []int{1, 3, 31, 4096} {
			var tags commandTags
			for i := 0; i < len(c.out); i += size {
				tags.Write([]byte(c.out[i:min(i+size, len(c.out))]))
			}
			if got := tags.hold(want); got != c.hold {
				t.Errorf("%s, in writes of %d bytes: hold %v, want %v (copies %v, last %q)", c.name, size, got, c.hold, tags.copies, tags.last)
			}
			if len(tags.lines.line) > maxTagLine {
				t.Errorf("%s, in writes of %d bytes: kept a line of %d bytes", c.name, size, len(tags.lines.line))
			}
		}
	}
}

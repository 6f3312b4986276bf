// Command testreport reads `go test -json` on standard input and writes what
// a person reads in CI: each package's own lines (ok, FAIL, build errors,
// panics), the whole output of every test that failed, and at the end the
// slowest tests with their times and when each long package ran (go test
// runs as many test binaries at once as there are cores: the timeline shows
// which package held a core while the others waited). Passing tests'
// chatter is dropped. It never decides the outcome: .ci/run takes go test's
// exit status.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
	Time    time.Time
}

// span is when a package's test binary ran: from its first event (its
// start) to its pass or fail.
type span struct {
	pkg        string
	start, end time.Time
}

type timing struct {
	name    string
	elapsed float64
}

func main() {
	slowest := 10
	if err := report(os.Stdin, os.Stdout, slowest); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

func report(in io.Reader, out io.Writer, slowest int) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	buffered := map[string]*strings.Builder{}
	var times []timing
	spans := map[string]*span{}
	var first time.Time
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not test2json's: pass it on as it is.
			w.Write(line)
			w.WriteByte('\n')
			continue
		}
		if !e.Time.IsZero() && e.Package != "" {
			if first.IsZero() {
				first = e.Time
			}
			sp := spans[e.Package]
			if sp == nil {
				sp = &span{pkg: e.Package, start: e.Time}
				spans[e.Package] = sp
			}
			if e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
				sp.end = e.Time
			}
		}
		if e.Test == "" {
			w.WriteString(e.Output)
			if e.Action == "output" || e.Action == "build-output" {
				w.Flush()
			}
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			b := buffered[key]
			if b == nil {
				b = &strings.Builder{}
				buffered[key] = b
			}
			b.WriteString(e.Output)
		case "pass", "skip":
			delete(buffered, key)
		case "fail":
			// A failed subtest's lines come at its own fail, before its parent's.
			if b := buffered[key]; b != nil {
				w.WriteString(b.String())
				w.Flush()
			}
			delete(buffered, key)
		}
		if (e.Action == "pass" || e.Action == "fail") && !strings.Contains(e.Test, "/") {
			short := e.Package[strings.LastIndex(e.Package, "/")+1:]
			times = append(times, timing{short + "." + e.Test, e.Elapsed})
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	slices.SortFunc(times, func(a, b timing) int { return cmp.Compare(b.elapsed, a.elapsed) })
	fmt.Fprintf(w, "\nThe %d slowest tests:\n", min(slowest, len(times)))
	for _, t := range times[:min(slowest, len(times))] {
		fmt.Fprintf(w, "%8.1fs  %s\n", t.elapsed, t.name)
	}
	writeTimeline(w, spans, first)
	return nil
}

// writeTimeline prints when each package that ran 10 s or more started and
// ended, in seconds from the first event, in the order they started.
func writeTimeline(w io.Writer, spans map[string]*span, first time.Time) {
	var long []*span
	for _, sp := range spans {
		if !sp.end.IsZero() && sp.end.Sub(sp.start) >= 10*time.Second {
			long = append(long, sp)
		}
	}
	if len(long) == 0 {
		return
	}
	slices.SortFunc(long, func(a, b *span) int { return a.start.Compare(b.start) })
	fmt.Fprintf(w, "\nWhen the packages of 10 s or more ran (s from the first event):\n")
	for _, sp := range long {
		fmt.Fprintf(w, "%6.0f → %4.0f  %4.0fs  %s\n", sp.start.Sub(first).Seconds(), sp.end.Sub(first).Seconds(), sp.end.Sub(sp.start).Seconds(), sp.pkg)
	}
}

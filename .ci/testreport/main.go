// Command testreport reads `go test -json` on standard input and writes what
// a person reads in CI: each package's own lines (ok, FAIL, build errors,
// panics), the whole output of every test that failed, and at the end the
// slowest tests with their times. Passing tests' chatter is dropped. It
// never decides the outcome: .ci/run takes go test's exit status.
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
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
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
	return nil
}

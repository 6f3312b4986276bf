package runs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/mask"
	"github.com/skali-dev/studio/runs/platform"
)

// TestRuntimeLogPagesAreBoundedAndSayWhenCut: a page keeps the newest
// lines, at most LogPageLines of them and LogPageBytes in all, and says
// older ones were left out; a search ignores case on what is shown.
func TestRuntimeLogPagesAreBoundedAndSayWhenCut(t *testing.T) {
	t.Parallel()
	var lines []platform.LogLine
	t0 := time.Now()
	for i := range 3000 {
		lines = append(lines, platform.LogLine{At: t0.Add(time.Duration(i) * time.Millisecond), Pod: "web-0", Container: "web", Text: fmt.Sprintf("line %d", i)})
	}
	kept, cut := lastLines(lines, false)
	if len(kept) != LogPageLines || !cut || kept[len(kept)-1].Text != "line 2999" {
		t.Errorf("3000 short lines keep %d (cut %v), the last %q; want the newest %d, cut", len(kept), cut, kept[len(kept)-1].Text, LogPageLines)
	}
	big := strings.Repeat("x", LogLineBytes)
	lines = lines[:0]
	for range 200 {
		lines = append(lines, platform.LogLine{Pod: "web-0", Container: "web", Text: big})
	}
	kept, cut = lastLines(lines, false)
	if n := len(kept) * len(big); n > LogPageBytes || !cut {
		t.Errorf("200 lines of 16 KiB keep %d bytes (cut %v), want at most %d, cut", n, cut, LogPageBytes)
	}
	if kept, cut := lastLines(lines[:3], false); len(kept) != 3 || cut {
		t.Errorf("3 lines keep %d, cut %v", len(kept), cut)
	}

	m := newLogMatcher(LogRequest{Query: "TimeD OUT"})
	for text, want := range map[string]bool{"upstream timed out": true, "UPSTREAM TIMED OUT": true, "timed  out": false, "ünïcode Timed out": true, "": false} {
		if got := m.matches(platform.LogLine{Text: text}); got != want {
			t.Errorf("%q matches %q: %v, want %v", "TimeD OUT", text, got, want)
		}
	}
	long := showLine(mask.New([]string{"secret-value"}), platform.LogLine{Text: strings.Repeat("a", LogLineBytes) + "secret-value"})
	if len(long.Text) > LogLineBytes+len("…") || strings.Contains(long.Text, "secret") {
		t.Errorf("a line past %d bytes is shown with %d bytes", LogLineBytes, len(long.Text))
	}
}

// BenchmarkRuntimeLogSearch measures what a search costs the server per
// line read: a line that may match is masked with ten values (each in its
// every form), made visible and matched. Reported: ns per line, and the
// time for a million lines. BenchmarkRuntimeLogShow is the cost of
// showing a line (no search: every line is masked).
func BenchmarkRuntimeLogSearch(b *testing.B) {
	var values []string
	for i := range 10 {
		values = append(values, fmt.Sprintf("value-%d-s3cr3t-%d", i, i*7919))
	}
	m := mask.New(values)
	lines := make([]platform.LogLine, 10_000)
	for i := range lines {
		text := fmt.Sprintf("GET /api/search?page=%d 200 %dms user=%d", i, i%40, i%97)
		if i%50 == 0 {
			text = "connecting with " + values[i%10]
		}
		lines[i] = platform.LogLine{Pod: "web-0", Container: "web", Text: text}
	}
	match := newLogMatcher(LogRequest{Query: "page=4242 "})
	b.ResetTimer()
	found := 0
	for i := 0; i < b.N; i++ {
		if _, ok := match.keep(m, lines[i%len(lines)]); ok {
			found++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*1e6/1e9, "s/1M-lines")
	_ = found
}

func BenchmarkRuntimeLogShow(b *testing.B) {
	var values []string
	for i := range 10 {
		values = append(values, fmt.Sprintf("value-%d-s3cr3t-%d", i, i*7919))
	}
	m := mask.New(values)
	line := platform.LogLine{Pod: "web-0", Container: "web", Text: "GET /api/search?page=4242 200 12ms user=17"}
	for i := 0; i < b.N; i++ {
		_ = showLine(m, line)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*1e6/1e9, "s/1M-lines")
}

// TestASearchPassesOverOnlyLinesItCannotMatch: the lines a search passes
// over without masking are those whose shown form could not match; a line
// with a control character, or a query holding the mask's glyph, is
// masked and matched as shown.
func TestASearchPassesOverOnlyLinesItCannotMatch(t *testing.T) {
	t.Parallel()
	m := mask.New([]string{"hunter2-secret"})
	for _, c := range []struct {
		query, text string
		want        bool
	}{
		{"password ••••", "password hunter2-secret", true},
		{"x1b", "red \x1b[31m", true},
		{"HUNTER2", "password hunter2-secret", false},
		{"password", "password hunter2-secret", true},
		{"nothing", "password hunter2-secret", false},
	} {
		shown, ok := newLogMatcher(LogRequest{Query: c.query}).keep(m, platform.LogLine{Text: c.text})
		if ok != c.want || strings.Contains(shown.Text, "hunter2") {
			t.Errorf("query %q on %q: kept %v as %q, want %v", c.query, c.text, ok, shown.Text, c.want)
		}
	}
}

package views

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// applyDiff rebuilds the new text from the old one and a diff's lines, so
// that any script, shortest or not, can be checked for being right.
func checkDiff(t *testing.T, old, new string) LineDiff {
	t.Helper()
	d := NewLineDiff(old, new)
	if d.TooLarge {
		t.Fatalf("diff too large")
	}
	// Every removed line is in old at its number, every added line in new.
	a, b := diffLines(old), diffLines(new)
	for _, h := range d.Hunks {
		for _, l := range h.Lines {
			if l.Old > 0 && a[l.Old-1] != l.Text || l.New > 0 && b[l.New-1] != l.Text {
				t.Fatalf("line %+v does not match the texts", l)
			}
		}
	}
	if len(a)-d.Removed != len(b)-d.Added {
		t.Fatalf("removed %d and added %d do not turn %d lines into %d", d.Removed, d.Added, len(a), len(b))
	}
	return d
}

func TestLineDiff(t *testing.T) {
	cases := []struct {
		name, old, new string
		added, removed int
		hunks          int
	}{
		{"identical", "a\nb\n", "a\nb\n", 0, 0, 0},
		{"one line changed", "name: x\nreplicas: 2\nport: 80\n", "name: x\nreplicas: 3\nport: 80\n", 1, 1, 1},
		{"a line added at the end", "a\nb\n", "a\nb\nc\n", 1, 0, 1},
		{"from nothing", "", "a\nb\n", 2, 0, 1},
		{"two distant changes", strings.Repeat("x\n", 3) + "a\n" + strings.Repeat("y\n", 20) + "b\n", strings.Repeat("x\n", 3) + "A\n" + strings.Repeat("y\n", 20) + "B\n", 2, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := checkDiff(t, tc.old, tc.new)
			if d.Added != tc.added || d.Removed != tc.removed || len(d.Hunks) != tc.hunks {
				t.Errorf("added %d removed %d hunks %d, want %d %d %d", d.Added, d.Removed, len(d.Hunks), tc.added, tc.removed, tc.hunks)
			}
		})
	}
	if h := NewLineDiff("a\nb\nc\n", "a\nB\nc\n").Hunks[0].Header; h != "@@ -1,3 +1,3 @@" {
		t.Errorf("header = %q", h)
	}
}

func TestLineDiffRandomEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var a []string
		for range r.IntN(40) {
			a = append(a, string(rune('a'+r.IntN(4))))
		}
		b := append([]string(nil), a...)
		for range r.IntN(6) {
			i := r.IntN(len(b) + 1)
			switch r.IntN(2) {
			case 0:
				b = append(b[:i], append([]string{"new"}, b[i:]...)...)
			default:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			}
		}
		checkDiff(t, strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

// TestLineDiffIsBounded: a 1 MiB manifest with one line changed diffs at
// once, and one rewritten wholesale is reported as too large.
func TestLineDiffIsBounded(t *testing.T) {
	var big strings.Builder
	for i := 0; big.Len() < 1<<20; i++ {
		big.WriteString("      KEY_" + strings.Repeat("x", i%7) + ": value\n")
	}
	old := big.String()
	edited := strings.Replace(old, "KEY_xxx:", "KEY_yyy:", 1)
	if d := checkDiff(t, old, edited); d.Added != 1 || d.Removed != 1 {
		t.Errorf("one edit in 1 MiB: added %d removed %d", d.Added, d.Removed)
	}
	var other strings.Builder
	for i := 0; other.Len() < 1<<20; i++ {
		other.WriteString("line " + strings.Repeat("z", i%5) + "\n")
	}
	if d := NewLineDiff(old, other.String()); !d.TooLarge {
		t.Errorf("a wholesale rewrite of 1 MiB was listed (%d hunks), want TooLarge", len(d.Hunks))
	}
}

package views

import (
	"strconv"
	"strings"
)

// LineDiff is a line diff of two texts, in hunks with a few lines of
// context, as a unified diff shows it.
type LineDiff struct {
	Hunks          []DiffHunk
	Added, Removed int
	// Identical is true when the texts are equal.
	Identical bool
	// TooLarge is true when the texts differ in too many places to list
	// (more than MaxDiffEdits lines added or removed); Hunks is then empty.
	TooLarge bool
}

// DiffHunk is one run of changed lines with its context.
type DiffHunk struct {
	// Header reads like "@@ -12,7 +12,8 @@".
	Header string
	Lines  []DiffLine
}

// DiffLine is one line of a hunk.
type DiffLine struct {
	// Kind is "context", "added" or "removed".
	Kind string
	// Old and New are the line's numbers in each text, 0 where it is absent.
	Old, New int
	Text     string
}

// Sign is the line's unified-diff marker.
func (l DiffLine) Sign() string {
	switch l.Kind {
	case "added":
		return "+"
	case "removed":
		return "-"
	}
	return " "
}

// MaxDiffEdits bounds the work of a line diff: Myers' algorithm costs
// O((N+M)·D) time and, with the trace kept here, O(D²) memory for D edits.
// With the common head and tail removed first, a 1 MiB manifest edited in a
// few places costs little; one rewritten wholesale is reported as too large.
const MaxDiffEdits = 2000

const diffContext = 3

type editOp struct {
	kind     byte // '=', '+', '-'
	old, new int  // indexes into the old and new lines
}

// NewLineDiff compares old and new line by line.
func NewLineDiff(old, new string) LineDiff {
	if old == new {
		return LineDiff{Identical: true}
	}
	a, b := diffLines(old), diffLines(new)
	// The common head and tail need no search.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	mid, ok := myers(a[pre:len(a)-suf], b[pre:len(b)-suf], MaxDiffEdits)
	if !ok {
		return LineDiff{TooLarge: true}
	}
	ops := make([]editOp, 0, pre+len(mid)+suf)
	for i := range pre {
		ops = append(ops, editOp{'=', i, i})
	}
	for _, op := range mid {
		ops = append(ops, editOp{op.kind, op.old + pre, op.new + pre})
	}
	for i := range suf {
		ops = append(ops, editOp{'=', len(a) - suf + i, len(b) - suf + i})
	}
	return hunks(ops, a, b)
}

func diffLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// myers returns the shortest edit script from a to b, or ok false when it
// needs more than maxD insertions and deletions.
func myers(a, b []string, maxD int) (ops []editOp, ok bool) {
	n, m := len(a), len(b)
	limit := min(n+m, maxD)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int // trace[d] holds v[k] for k in [-d, d] before step d
	x, y := 0, 0
	found := false
	for d := 0; d <= limit && !found; d++ {
		snap := make([]int, 2*d+1)
		copy(snap, v[off-d:off+d+1])
		trace = append(trace, snap)
		for k := -d; k <= d; k += 2 {
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y = x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = true
				break
			}
		}
	}
	if !found {
		return nil, false
	}
	x, y = n, m
	for d := len(trace) - 1; d >= 0; d-- {
		at := func(k int) int { return trace[d][k+d] }
		k := x - y
		var prevK int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := 0
		if d > 0 {
			prevX = at(prevK)
		}
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			ops = append(ops, editOp{'=', x, y})
		}
		if d > 0 {
			if x == prevX {
				ops = append(ops, editOp{'+', x, prevY})
			} else {
				ops = append(ops, editOp{'-', prevX, y})
			}
		}
		x, y = prevX, prevY
	}
	for i, j := 0, len(ops)-1; i < j; i, j = i+1, j-1 {
		ops[i], ops[j] = ops[j], ops[i]
	}
	return ops, true
}

// hunks groups an edit script into hunks with diffContext lines around
// each change.
func hunks(ops []editOp, a, b []string) LineDiff {
	var d LineDiff
	keep := make([]bool, len(ops))
	for i, op := range ops {
		if op.kind == '=' {
			continue
		}
		for j := max(0, i-diffContext); j <= min(len(ops)-1, i+diffContext); j++ {
			keep[j] = true
		}
	}
	var h *DiffHunk
	oldStart, newStart, oldCount, newCount := 0, 0, 0, 0
	flush := func() {
		if h == nil {
			return
		}
		h.Header = "@@ -" + strconv.Itoa(oldStart) + "," + strconv.Itoa(oldCount) + " +" + strconv.Itoa(newStart) + "," + strconv.Itoa(newCount) + " @@"
		d.Hunks = append(d.Hunks, *h)
		h = nil
	}
	for i, op := range ops {
		if !keep[i] {
			flush()
			continue
		}
		if h == nil {
			h = &DiffHunk{}
			oldStart, newStart, oldCount, newCount = op.old+1, op.new+1, 0, 0
		}
		switch op.kind {
		case '=':
			h.Lines = append(h.Lines, DiffLine{Kind: "context", Old: op.old + 1, New: op.new + 1, Text: a[op.old]})
			oldCount++
			newCount++
		case '-':
			h.Lines = append(h.Lines, DiffLine{Kind: "removed", Old: op.old + 1, Text: a[op.old]})
			oldCount++
			d.Removed++
		case '+':
			h.Lines = append(h.Lines, DiffLine{Kind: "added", New: op.new + 1, Text: b[op.new]})
			newCount++
			d.Added++
		}
	}
	flush()
	return d
}

// Package humanize writes numbers, times, hashes and lists the way every
// page, message and command of the Studio shows them, so that they read the
// same everywhere.
package humanize

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Plural returns one when n is 1 and many otherwise.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count returns n followed by the noun for it: "1 value", "3 values".
func Count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + Plural(n, one, many)
}

// Time is a time for tables and sentences: UTC, to the minute
// ("2026-11-30 16:35 UTC"); the zero time is "".
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// Clock is a time to the second, for the steps of a run
// ("2026-11-30 16:35:07 UTC").
func Clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// ShortHash shortens "sha256:abcdef..." to its first twelve hex digits.
func ShortHash(h string) string {
	const prefix = "sha256:"
	if len(h) > len(prefix)+12 && h[:len(prefix)] == prefix {
		return h[len(prefix) : len(prefix)+12]
	}
	return h
}

// JoinAnd joins a list as a sentence does: "a", "a and b", "a, b and c".
func JoinAnd(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// Duration reads 850ms, 12s, 52 min, 3h 5m.
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min"
	}
	h := int(d.Hours())
	m := int(d.Minutes()) % 60
	if m == 0 {
		return strconv.Itoa(h) + "h"
	}
	return fmt.Sprintf("%dh %dm", h, m)
}

// Package humanize writes numbers, times, hashes and lists the way every
// page, message and command of the Studio shows them, so that they read the
// same everywhere.
package humanize

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// The other ways a time is worded, each in one place. Every one is in UTC.

// Date is a day ("2026-11-30").
func Date(t time.Time) string { return t.UTC().Format("2006-01-02") }

// Minute is a time to the minute for a table whose heading says UTC
// ("2026-11-30 16:35").
func Minute(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }

// HourMinute is a time of today, to the minute ("16:35 UTC").
func HourMinute(t time.Time) string { return t.UTC().Format("15:04 UTC") }

// HourSecond is a time of today, to the second ("16:35:07 UTC").
func HourSecond(t time.Time) string { return t.UTC().Format("15:04:05 UTC") }

// TimeOfDay is a run's step's clock, to the second ("16:35:07"), or to
// the millisecond with millis ("16:35:07.250").
func TimeOfDay(t time.Time, millis bool) string {
	if millis {
		return t.UTC().Format("15:04:05.000")
	}
	return t.UTC().Format("15:04:05")
}

// Weekday is a time within the coming week, named by its day
// ("Mon 06:00 UTC"), and with its date beyond a week from now ("Mon 9 Dec
// 06:00 UTC").
func Weekday(t, now time.Time) string {
	if t.Sub(now) < 6*24*time.Hour {
		return t.UTC().Format("Mon 15:04 UTC")
	}
	return t.UTC().Format("Mon 2 Jan 15:04 UTC")
}

// DayMinute is a time in a list of coming times, with its day
// ("Mon 2026-12-07 03:00").
func DayMinute(t time.Time) string { return t.UTC().Format("Mon 2006-01-02 15:04") }

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

// ManifestDuration writes d in the units a manifest takes: 7d, 36h, 5m,
// 90s (the largest whole unit), 0s; a duration of no whole second as Go
// writes it (1.5s, 250ms).
func ManifestDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < 0:
		return d.String()
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// Due is what a countdown reads once its time has come: the page checks
// what happened and the live stream brings the result.
const Due = "checking…"

// Until reads how long until something happens, as every countdown of the
// Studio says it, on the server and in the page's script (static/js/live.js
// ports it, and a browser test holds the two to the same table): rounded
// up, "in 42 s" under a minute, "in 52 min" under an hour, then "in 3 h" or
// "in 3 h 05 min"; Due once d is not positive.
func Until(d time.Duration) string {
	if d <= 0 {
		return Due
	}
	s := (d + time.Second - 1) / time.Second
	if s < 60 {
		return "in " + strconv.FormatInt(int64(s), 10) + " s"
	}
	m := (s + 59) / 60
	if m < 60 {
		return "in " + strconv.FormatInt(int64(m), 10) + " min"
	}
	h, m := m/60, m%60
	if m == 0 {
		return "in " + strconv.FormatInt(int64(h), 10) + " h"
	}
	return fmt.Sprintf("in %d h %02d min", h, m)
}

// Clip bounds s to at most limit bytes for storing or showing: text that
// is not UTF-8 is made so, and a longer text is cut on a rune boundary and
// ends with "…" (counted in limit).
func Clip(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := max(limit-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// TooLong is how a text over its limit reads, the same everywhere: "78
// characters; at most 63".
func TooLong(n, limit int) string {
	return strconv.Itoa(n) + " characters; at most " + strconv.Itoa(limit)
}

// CronText reads a five-field cron schedule (UTC) in words for the
// common shapes ("every 2 minutes", "every day at 03:00 UTC"), "" for
// others: the expression itself is always shown beside it.
func CronText(expr string) string {
	f := strings.Fields(expr)
	if len(f) != 5 {
		return ""
	}
	num := func(s string, max int) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && n <= max
	}
	every := func(s string) (int, bool) {
		rest, ok := strings.CutPrefix(s, "*/")
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(rest)
		return n, err == nil && n > 0
	}
	min, hour, dom, mon, dow := f[0], f[1], f[2], f[3], f[4]
	if dom != "*" || mon != "*" {
		if m, okm := num(min, 59); okm && mon == "*" && dow == "*" {
			if h, okh := num(hour, 23); okh {
				if d, okd := num(dom, 31); okd && d > 0 {
					return fmt.Sprintf("every month on day %d at %02d:%02d UTC", d, h, m)
				}
			}
		}
		return ""
	}
	days := []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
	switch {
	case min == "*" && hour == "*" && dow == "*":
		return "every minute"
	case hour == "*" && dow == "*":
		if n, ok := every(min); ok {
			return Plural(n, "every minute", "every "+strconv.Itoa(n)+" minutes")
		}
		if m, ok := num(min, 59); ok {
			return fmt.Sprintf("every hour at :%02d", m)
		}
	case dow == "*":
		m, okm := num(min, 59)
		if n, ok := every(hour); ok && okm {
			return fmt.Sprintf("%s at :%02d", Plural(n, "every hour", "every "+strconv.Itoa(n)+" hours"), m)
		}
		if h, ok := num(hour, 23); ok && okm {
			return fmt.Sprintf("every day at %02d:%02d UTC", h, m)
		}
	default:
		m, okm := num(min, 59)
		h, okh := num(hour, 23)
		d, okd := num(dow, 7)
		if okm && okh && okd {
			return fmt.Sprintf("every %s at %02d:%02d UTC", days[d], h, m)
		}
	}
	return ""
}

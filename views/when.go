package views

import (
	"strconv"
	"time"
)

// Ago says how long before now t was, roughly: "just now", "5 minutes
// ago", "3 days ago". Pages show it on hover next to the exact UTC time.
func Ago(t time.Time) string {
	return agoAt(t, time.Now())
}

func agoAt(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	unit := func(n int64, one, many string) string {
		if n == 1 {
			return "1 " + one + " ago"
		}
		return strconv.FormatInt(n, 10) + " " + many + " ago"
	}
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return unit(int64(d/time.Minute), "minute", "minutes")
	case d < 48*time.Hour:
		return unit(int64(d/time.Hour), "hour", "hours")
	case d < 60*24*time.Hour:
		return unit(int64(d/(24*time.Hour)), "day", "days")
	case d < 2*365*24*time.Hour:
		return unit(int64(d/(30*24*time.Hour)), "month", "months")
	}
	return unit(int64(d/(365*24*time.Hour)), "year", "years")
}

// ISOTime is t for a <time datetime> attribute.
func ISOTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

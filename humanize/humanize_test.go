package humanize_test

import (
	"testing"
	"time"

	"github.com/skali-dev/studio/humanize"
)

func TestHumanize(t *testing.T) {
	at := time.Date(2026, 11, 30, 16, 35, 7, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct{ got, want string }{
		{humanize.Count(1, "value", "values"), "1 value"},
		{humanize.Count(0, "value", "values"), "0 values"},
		{humanize.Plural(2, "it", "them"), "them"},
		{humanize.Time(at), "2026-11-30 15:35 UTC"},
		{humanize.Time(time.Time{}), ""},
		{humanize.Clock(at), "2026-11-30 15:35:07 UTC"},
		{humanize.ShortHash("sha256:0123456789abcdef0123"), "0123456789ab"},
		{humanize.ShortHash("md5:x"), "md5:x"},
		{humanize.JoinAnd([]string{"a"}), "a"},
		{humanize.JoinAnd([]string{"a", "b", "c"}), "a, b and c"},
		{humanize.Clip("short", 10), "short"},
		{humanize.Clip("abcdefghijkl", 10), "abcdefg…"},
		{humanize.Clip("ééééé", 8), "éé…"}, // never half a rune
		{humanize.Clip("a\xffb", 10), "a\uFFFDb"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestUntil: countdowns round up, so that "in 1 min" never shows while more
// than a minute is left, and read "checking…" once due.
func TestUntil(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "checking…"},
		{0, "checking…"},
		{time.Millisecond, "in 1 s"},
		{59*time.Second + time.Millisecond, "in 1 min"},
		{42 * time.Second, "in 42 s"},
		{60 * time.Second, "in 1 min"},
		{61 * time.Second, "in 2 min"},
		{52*time.Minute + 30*time.Second, "in 53 min"},
		{59*time.Minute + 59*time.Second, "in 1 h"},
		{time.Hour + 5*time.Minute, "in 1 h 05 min"},
		{32 * time.Hour, "in 32 h"},
	} {
		if got := humanize.Until(tc.d); got != tc.want {
			t.Errorf("Until(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestCronText(t *testing.T) {
	for expr, want := range map[string]string{
		"*/2 * * * *": "every 2 minutes",
		"*/1 * * * *": "every minute",
		"* * * * *":   "every minute",
		"15 * * * *":  "every hour at :15",
		"0 */6 * * *": "every 6 hours at :00",
		"0 3 * * *":   "every day at 03:00 UTC",
		"30 2 * * 1":  "every Monday at 02:30 UTC",
		"0 4 1 * *":   "every month on day 1 at 04:00 UTC",
		"0 3 * 1 *":   "",
		"1-5 * * * *": "",
		"nonsense":    "",
	} {
		if got := humanize.CronText(expr); got != want {
			t.Errorf("CronText(%q) = %q, want %q", expr, got, want)
		}
	}
}

func TestManifestDurationWritesTheLargestWholeUnit(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 7 * 24 * time.Hour: "7d", 36 * time.Hour: "36h", 5 * time.Minute: "5m",
		90 * time.Second: "90s", 1500 * time.Millisecond: "1.5s", -time.Second: "-1s",
	} {
		if got := humanize.ManifestDuration(d); got != want {
			t.Errorf("ManifestDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestTimesAreWordedInUTC(t *testing.T) {
	at := time.Date(2026, 12, 7, 3, 4, 5, 250e6, time.FixedZone("CET", 3600))
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	for _, c := range []struct{ got, want string }{
		{humanize.Date(at), "2026-12-07"},
		{humanize.Minute(at), "2026-12-07 02:04"},
		{humanize.Time(at), "2026-12-07 02:04 UTC"},
		{humanize.HourMinute(at), "02:04 UTC"},
		{humanize.HourSecond(at), "02:04:05 UTC"},
		{humanize.TimeOfDay(at, false), "02:04:05"},
		{humanize.TimeOfDay(at, true), "02:04:05.250"},
		{humanize.DayMinute(at), "Mon 2026-12-07 02:04"},
		// Within six days the day's name is enough; beyond it the date too.
		{humanize.Weekday(at, now), "Mon 02:04 UTC"},
		{humanize.Weekday(at.Add(7*24*time.Hour), now), "Mon 14 Dec 02:04 UTC"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

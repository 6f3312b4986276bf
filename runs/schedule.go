package runs

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/skali-dev/studio/compiler"
)

// cronParser reads exactly the five standard fields (minute hour
// day-of-month month day-of-week). robfig/cron's default parser also takes
// descriptors (@daily) and a CRON_TZ= prefix; the reference's schedules
// are five fields in UTC, so neither is accepted.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// outOfRange matches the cron library's "end of range (61) above maximum
// (59): 61" and "beginning of range (0) below minimum (1): 0".
var outOfRange = regexp.MustCompile(`^(end|beginning) of range \((\d+)\) (?:above maximum|below minimum) \((\d+)\)`)

// CronSchedule is a parsed five-field cron expression evaluated in UTC.
type CronSchedule struct {
	Expr  string
	sched cron.Schedule
}

// ParseCron parses a five-field cron expression (evaluated in UTC), such
// as "0 3 * * *".
func ParseCron(expr string) (*CronSchedule, error) {
	expr = strings.Join(strings.Fields(expr), " ")
	if expr == "" {
		return nil, errors.New("Write a five-field cron expression, such as 0 3 * * * (every day at 03:00 UTC).")
	}
	if n := len(strings.Fields(expr)); n != 5 {
		return nil, fmt.Errorf("%q has %d fields; write exactly five (minute hour day-of-month month day-of-week), such as 0 3 * * *.", expr, n)
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "failed to parse int from ")
		// The library's words for a value out of its field's range.
		if m := outOfRange.FindStringSubmatch(msg); m != nil {
			if m[1] == "end" {
				msg = fmt.Sprintf("%s is above %s, the largest value of its field", m[2], m[3])
			} else {
				msg = fmt.Sprintf("%s is below %s, the smallest value of its field", m[2], m[3])
			}
		}
		return nil, fmt.Errorf("%q is not a cron expression: %s. Fields are minute (0-59), hour (0-23), day of month (1-31), month (1-12) and day of week (0-6).", expr, msg)
	}
	return &CronSchedule{Expr: expr, sched: s}, nil
}

// Next is the first fire strictly after t, in UTC (zero when the
// expression never fires, such as 0 0 30 2 *).
func (c *CronSchedule) Next(t time.Time) time.Time {
	return c.sched.Next(t.UTC())
}

// NextN returns the next n fires after t.
func (c *CronSchedule) NextN(t time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		t = c.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// maxFiresRecorded bounds how many missed fires one catch-up records as
// skipped (a minute schedule down for a week would be ten thousand rows);
// the newest ones are kept.
const maxFiresRecorded = 200

// Between returns the fires after `after` up to and including now, the
// newest maxFiresRecorded of them when there are more.
func (c *CronSchedule) Between(after, now time.Time) []time.Time {
	var out []time.Time
	for t := c.Next(after); !t.IsZero() && !t.After(now); t = c.Next(t) {
		out = append(out, t)
		if len(out) > 2*maxFiresRecorded {
			out = append(out[:0], out[len(out)-maxFiresRecorded:]...)
		}
	}
	if len(out) > maxFiresRecorded {
		out = out[len(out)-maxFiresRecorded:]
	}
	return out
}

// Interval is the longest gap between consecutive fires over the next few
// weeks of fires after t: a weekday schedule's interval is the weekend.
func (c *CronSchedule) Interval(t time.Time) time.Duration {
	fires := c.NextN(t, 32)
	var longest time.Duration
	for i := 1; i < len(fires); i++ {
		longest = max(longest, fires[i].Sub(fires[i-1]))
	}
	if longest == 0 {
		return 366 * 24 * time.Hour
	}
	return longest
}

// ParseRetention reads a retention duration in the manifest's units (7d,
// 2w, 36h); it must be longer than zero.
func ParseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("Write how long scheduled snapshots are kept, such as 7d, 2w or 36h.")
	}
	d, err := compiler.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write a number and a unit (ms, s, m, h, d or w), such as 7d, 2w or 36h.", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q keeps nothing; write a retention longer than zero, such as 7d.", s)
	}
	return d, nil
}

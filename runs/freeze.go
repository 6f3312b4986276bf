package runs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/store"
)

// FreezeInput is a freeze window as a form or the API writes it: a cron
// expression (UTC) with a duration, or From and To (UTC, 2006-01-02T15:04
// or RFC 3339); Action is "wait" (default) or "refuse".
type FreezeInput struct {
	Cron     string `json:"cron,omitempty"`
	Duration string `json:"duration,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Action   string `json:"action"`
}

// Empty reports whether nothing of the window is written (a form's blank row).
func (in FreezeInput) Empty() bool {
	return strings.TrimSpace(in.Cron+in.Duration+in.From+in.To) == ""
}

// FreezeError is a window that cannot be stored: Index is its position
// (from 0), Field the field it concerns (cron, duration, from, to, action).
type FreezeError struct {
	Index   int
	Field   string
	Message string
}

func (e *FreezeError) Error() string { return e.Message }

// MaxFreeze bounds the duration of a cron window.
const MaxFreeze = 30 * 24 * time.Hour

func parseUTC(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// CheckFreezeWindows turns written windows into store windows (blank ones
// are dropped); the first bad one is a *FreezeError.
func CheckFreezeWindows(ins []FreezeInput) ([]store.FreezeWindow, error) {
	var out []store.FreezeWindow
	for i, in := range ins {
		if in.Empty() {
			continue
		}
		bad := func(field, format string, args ...any) error {
			return &FreezeError{Index: i, Field: field, Message: fmt.Sprintf("Freeze window %d: ", i+1) + fmt.Sprintf(format, args...)}
		}
		var w store.FreezeWindow
		switch strings.TrimSpace(in.Action) {
		case "", "wait":
		case "refuse":
			w.Refuse = true
		default:
			return nil, bad("action", "a deploy in the window either waits or is refused (wait or refuse), not %q.", in.Action)
		}
		if strings.TrimSpace(in.Cron) != "" {
			if strings.TrimSpace(in.From+in.To) != "" {
				return nil, bad("cron", "write a cron expression with a duration, or a fixed interval from–to, not both.")
			}
			c, err := ParseCron(in.Cron)
			if err != nil {
				return nil, bad("cron", "%s", err.Error())
			}
			if strings.TrimSpace(in.Duration) == "" {
				return nil, bad("duration", "say how long each freeze lasts, such as 2h or 3d.")
			}
			d, err := compiler.ParseDuration(strings.TrimSpace(in.Duration))
			if err != nil {
				return nil, bad("duration", "%q is not a duration: write one such as 30m, 2h or 3d.", in.Duration)
			}
			if d < time.Minute || d > MaxFreeze {
				return nil, bad("duration", "a freeze lasts from 1 minute to 30 days, not %s.", in.Duration)
			}
			if c.Next(time.Now()).IsZero() {
				return nil, bad("cron", "%q never fires.", c.Expr)
			}
			if gap, ok := c.shortestGap(time.Now(), d); ok {
				return nil, bad("duration", "each freeze lasts %s, but %q starts the next one %s after a start, so one freeze would run into the next. Make it last less than %s, or start less often.",
					humanize.ManifestDuration(d), c.Expr, humanize.ManifestDuration(gap), humanize.ManifestDuration(gap))
			}
			w.Cron, w.Duration = c.Expr, d
		} else {
			if strings.TrimSpace(in.Duration) != "" && strings.TrimSpace(in.From+in.To) == "" {
				return nil, bad("cron", "a duration needs a cron expression saying when the freeze starts.")
			}
			from, ok := parseUTC(in.From)
			if !ok {
				return nil, bad("from", "the start %q is not a UTC time such as 2026-12-24T18:00.", in.From)
			}
			to, ok := parseUTC(in.To)
			if !ok {
				return nil, bad("to", "the end %q is not a UTC time such as 2026-12-27T06:00.", in.To)
			}
			if !to.After(from) {
				return nil, bad("to", "the end must be after the start.")
			}
			w.From, w.To = from, to
		}
		out = append(out, w)
	}
	// Windows that, together, leave no gap (one opens before the other
	// closes, again and again, further than FrozenAt follows them) would
	// freeze the environment for ever.
	now := time.Now()
	for i, w := range out {
		start := now
		if w.Cron != "" {
			c, _ := ParseCron(w.Cron)
			start = c.Next(now)
		} else if w.From.After(now) {
			start = w.From
		}
		alone, _ := windowEnd(w, start)
		if f, ok, endless := frozenAt(out, start); ok && endless && f.Until.After(alone) {
			return nil, &FreezeError{Index: i, Field: "cron", Message: fmt.Sprintf(
				"Freeze window %d: with the other windows it leaves no gap (each opens before the last one closes, on and on), so deploys would never start. Leave a gap between them.", i+1)}
		}
	}
	return out, nil
}

// MaxChainedFreeze bounds how far FrozenAt follows windows that open
// before the previous one closes.
const MaxChainedFreeze = 366 * 24 * time.Hour

// shortestGap is the shortest time between two consecutive fires of c
// that is at most d (true), looked for over the next four years of fires
// (a leap day's pattern included), at most 20000 of them (a dense cron repeats its gaps within days).
func (c *CronSchedule) shortestGap(t time.Time, d time.Duration) (time.Duration, bool) {
	end := t.AddDate(4, 0, 8)
	prev := c.Next(t)
	var shortest time.Duration
	for i := 0; i < 20000 && !prev.IsZero() && prev.Before(end); i++ {
		next := c.Next(prev)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(prev); gap <= d && (shortest == 0 || gap < shortest) {
			shortest = gap
			if gap <= time.Minute {
				break
			}
		}
		prev = next
	}
	return shortest, shortest > 0
}

// FreezeInputOf writes a stored window back as a form or the API shows it.
func FreezeInputOf(w store.FreezeWindow) FreezeInput {
	in := FreezeInput{Action: "wait"}
	if w.Refuse {
		in.Action = "refuse"
	}
	if w.Cron != "" {
		in.Cron, in.Duration = w.Cron, humanize.ManifestDuration(w.Duration)
	} else {
		in.From, in.To = w.From.UTC().Format("2006-01-02T15:04"), w.To.UTC().Format("2006-01-02T15:04")
	}
	return in
}

// windowEnd is when w, open at t, closes (false: w is not open at t).
func windowEnd(w store.FreezeWindow, t time.Time) (time.Time, bool) {
	if w.Cron == "" {
		return w.To, !t.Before(w.From) && t.Before(w.To)
	}
	c, err := ParseCron(w.Cron)
	if err != nil || w.Duration <= 0 {
		return time.Time{}, false
	}
	// Fires in (t-d, t] keep the window open; the latest closes it last.
	// It is looked for in (t-back, t], back doubling from a minute up to
	// d: few fires are read, however dense the cron.
	for back := time.Minute; ; back *= 2 {
		back = min(back, w.Duration)
		f := c.Next(t.Add(-back))
		if !f.IsZero() && !f.After(t) {
			for n := c.Next(f); !n.IsZero() && !n.After(t); n = c.Next(n) {
				f = n
			}
			return f.Add(w.Duration), true
		}
		if back == w.Duration {
			return time.Time{}, false
		}
	}
}

// Freeze is the windows open at a time: deploys do not start Until.
type Freeze struct {
	Until time.Time
	// Refuse: a window open now refuses deploys (rather than delaying them).
	Refuse bool
}

// FrozenAt reports the freeze at t: Until is the end of the open windows,
// followed through windows that open before the previous one closes.
func FrozenAt(windows []store.FreezeWindow, t time.Time) (Freeze, bool) {
	f, ok, _ := frozenAt(windows, t)
	return f, ok
}

// maxChained bounds how many windows on FrozenAt follows a freeze.
const maxChained = 1000

// frozenAt is FrozenAt; endless says it stopped following at its bounds
// (maxChained windows, or MaxChainedFreeze after t).
func frozenAt(windows []store.FreezeWindow, t time.Time) (f Freeze, ok, endless bool) {
	for _, w := range windows {
		if end, ok := windowEnd(w, t); ok {
			f.Refuse = f.Refuse || w.Refuse
			if end.After(f.Until) {
				f.Until = end
			}
		}
	}
	if f.Until.IsZero() {
		return f, false, false
	}
	// Windows that open before the freeze ends extend it, followed until
	// none does, up to maxChained windows on or MaxChainedFreeze after t
	// (CheckFreezeWindows refuses windows that chain that far, and a cron
	// window that lasts as long as the time between its fires; one stored
	// before it did is frozen as far as this follows it).
	horizon := t.Add(MaxChainedFreeze)
	for i := 0; ; i++ {
		if i == maxChained || !f.Until.Before(horizon) {
			return f, true, true
		}
		next := f.Until
		for _, w := range windows {
			if end, ok := windowEnd(w, f.Until); ok && end.After(next) {
				next = end
			}
		}
		if !next.After(f.Until) {
			break
		}
		f.Until = next
	}
	return f, true, false
}

// FreezeClock writes when a freeze ends as pages say it: "Mon 06:00 UTC"
// within a week, with the date beyond.
func FreezeClock(until, now time.Time) string {
	return humanize.Weekday(until, now)
}

// FrozenSentence is "production is frozen until Mon 06:00 UTC".
func FrozenSentence(env string, until, now time.Time) string {
	return fmt.Sprintf("%s is frozen until %s", env, FreezeClock(until, now))
}

// Frozen returns the environment's freeze now (false: no window is open).
func (s *Service) Frozen(ctx context.Context, env *store.Environment) (Freeze, bool, error) {
	windows, err := s.DB.FreezeWindows(ctx, env.ID)
	if err != nil || len(windows) == 0 {
		return Freeze{}, false, err
	}
	f, ok := FrozenAt(windows, s.Now())
	return f, ok, nil
}

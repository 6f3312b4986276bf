package runs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
)

// Which windows are open, and until when, as a person reading them expects.
func TestFrozenAtFollowsCronAndFixedWindows(t *testing.T) {
	t.Parallel()
	ws, err := runs.CheckFreezeWindows([]runs.FreezeInput{{Cron: "0 18 * * 5", Duration: "60h", Action: "wait"}})
	if err != nil {
		t.Fatal(err)
	}
	sat := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC) // a Saturday
	f, ok := runs.FrozenAt(ws, sat)
	if !ok || !f.Until.Equal(time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)) || f.Refuse {
		t.Fatalf("saturday: %+v %v, want frozen until Mon 06:00", f, ok)
	}
	if got := runs.FrozenSentence("production", f.Until, sat); got != "production is frozen until Mon 06:00 UTC" {
		t.Fatalf("sentence %q", got)
	}
	if _, ok := runs.FrozenAt(ws, time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)); ok {
		t.Fatal("frozen at the window's end")
	}
	// Two windows that open and close in turn chain: the freeze lasts
	// until the last one closes.
	ws, err = runs.CheckFreezeWindows([]runs.FreezeInput{{Cron: "0 9 * * 1", Duration: "5h"}, {Cron: "0 13 * * 1", Duration: "4h"}})
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := runs.FrozenAt(ws, time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)); !ok || !f.Until.Equal(time.Date(2026, 12, 7, 17, 0, 0, 0, time.UTC)) {
		t.Fatalf("chained windows: %+v %v, want until Mon 17:00", f, ok)
	}
}

// refusedFreezes are windows CheckFreezeWindows refuses, with (part of)
// the sentence it refuses each with.
var refusedFreezes = []struct {
	in   []runs.FreezeInput
	want string
}{
	{[]runs.FreezeInput{{Cron: "* * * * *", Duration: "2h"}},
		`Freeze window 1: each freeze lasts 2h, but "* * * * *" starts the next one 1m after a start, so one freeze would run into the next. Make it last less than 1m, or start less often.`},
	{[]runs.FreezeInput{{Cron: "0 0 * * *", Duration: "24h"}},
		`Freeze window 1: each freeze lasts 1d, but "0 0 * * *" starts the next one 1d after a start`},
	// Fridays and Saturdays at 18:00: the Saturday one starts a day after Friday's.
	{[]runs.FreezeInput{{Cron: "0 18 * * 5,6", Duration: "30h"}},
		`starts the next one 1d after a start`},
	{[]runs.FreezeInput{{Cron: "0 0 * * *", Duration: "13h"}, {Cron: "0 12 * * *", Duration: "13h"}},
		`Freeze window 1: with the other windows it leaves no gap (each opens before the last one closes, on and on), so deploys would never start. Leave a gap between them.`},
}

// keptDenseFreezes are windows CheckFreezeWindows keeps, one of them
// dense (every 5 minutes).
var keptDenseFreezes = []runs.FreezeInput{{Cron: "*/5 * * * *", Duration: "4m"}, {Cron: "0 18 * * 5", Duration: "60h"}}

// A cron window that lasts as long as the time between its starts would
// never end (or run into the next one): it is refused, with the sentence;
// windows that together leave no gap are refused as well. How long the
// checks take is BenchmarkCheckFreezeWindows's.
func TestAFreezeLongerThanItsPeriodIsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range refusedFreezes {
		_, err := runs.CheckFreezeWindows(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.in, err, c.want)
		}
	}
	// A window shorter than the time between its starts is kept.
	ws, err := runs.CheckFreezeWindows(keptDenseFreezes)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Cron != "*/5 * * * *" || ws[0].Duration != 4*time.Minute {
		t.Fatalf("kept %+v, want both windows as written", ws)
	}
}

// A window stored before such windows were refused (every minute, for
// 2h) is frozen as far as FrozenAt follows it, and no further: it reads
// a bounded number of windows (how long that takes is
// BenchmarkFrozenAtAWindowThatNeverEnds's).
func TestAWindowThatNeverEndsIsFollowedSoFar(t *testing.T) {
	t.Parallel()
	ws := []store.FreezeWindow{{Cron: "* * * * *", Duration: 2 * time.Hour}}
	now := time.Date(2026, 3, 2, 13, 0, 30, 0, time.UTC)
	f, ok := runs.FrozenAt(ws, now)
	// The window open at 13:00:30 began at 13:00; each one followed opens
	// as the last closes, 2h on.
	want := time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC).Add(time.Duration(runs.MaxChainedWindows+1) * 2 * time.Hour)
	if !ok || !f.Until.Equal(want) || f.Until.Sub(now) < 60*24*time.Hour {
		t.Fatalf("frozen %v until %v, want frozen until %v: %d windows followed past the first, at least 60 days", ok, f.Until, want, runs.MaxChainedWindows)
	}
}

// BenchmarkCheckFreezeWindows checks the windows the tests refuse and a
// dense one that is kept: what saving a freeze form costs at worst.
func BenchmarkCheckFreezeWindows(b *testing.B) {
	for b.Loop() {
		for _, c := range refusedFreezes {
			if _, err := runs.CheckFreezeWindows(c.in); err == nil {
				b.Fatalf("%+v accepted", c.in)
			}
		}
		if _, err := runs.CheckFreezeWindows(keptDenseFreezes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrozenAtAWindowThatNeverEnds reads a window that never ends,
// as far as FrozenAt follows it: what a deploy costs at worst to learn it
// is frozen.
func BenchmarkFrozenAtAWindowThatNeverEnds(b *testing.B) {
	ws := []store.FreezeWindow{{Cron: "* * * * *", Duration: 2 * time.Hour}}
	now := time.Now()
	for b.Loop() {
		if _, ok := runs.FrozenAt(ws, now); !ok {
			b.Fatal("not frozen")
		}
	}
}

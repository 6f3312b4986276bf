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

// A cron window that lasts as long as the time between its starts would
// never end (or run into the next one): it is refused, with the sentence;
// windows that together leave no gap are refused as well.
func TestAFreezeLongerThanItsPeriodIsRefused(t *testing.T) {
	for _, c := range []struct {
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
	} {
		start := time.Now()
		_, err := runs.CheckFreezeWindows(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.in, err, c.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%+v: checked in %v", c.in, d)
		}
	}
	// A window shorter than the time between its starts is kept, and
	// checking a dense one is quick.
	start := time.Now()
	if _, err := runs.CheckFreezeWindows([]runs.FreezeInput{{Cron: "*/5 * * * *", Duration: "4m"}, {Cron: "0 18 * * 5", Duration: "60h"}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("checked a window of every 5 minutes in %v", time.Since(start))
}

// A window stored before such windows were refused (every minute, for
// 2h) is frozen as far as FrozenAt follows it, and reading it stays quick.
func TestAWindowThatNeverEndsIsReadQuickly(t *testing.T) {
	ws := []store.FreezeWindow{{Cron: "* * * * *", Duration: 2 * time.Hour}}
	now := time.Now()
	f, ok := runs.FrozenAt(ws, now)
	if d := time.Since(now); !ok || f.Until.Sub(now) < 60*24*time.Hour || d > time.Second {
		t.Fatalf("frozen %v until %v, read in %v", ok, f.Until, d)
	}
	t.Logf("read in %v: frozen until %v", time.Since(now), f.Until)
}

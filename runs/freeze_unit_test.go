package runs_test

import (
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
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
	ws, _ = runs.CheckFreezeWindows([]runs.FreezeInput{{Cron: "* * * * *", Duration: "2h", Action: "refuse"}})
	if f, ok := runs.FrozenAt(ws, time.Now()); !ok || !f.Refuse || f.Until.Sub(time.Now()) < 119*time.Minute {
		t.Fatalf("every minute for 2h: %+v %v", f, ok)
	}
}

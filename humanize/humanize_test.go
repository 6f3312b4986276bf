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
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

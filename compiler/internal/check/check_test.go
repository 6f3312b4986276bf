package check_test

import (
	"strconv"
	"testing"

	"github.com/skali-dev/studio/compiler/internal/check"
)

// The wording every manifest kind shares, as a user reads it in a
// diagnostic.
func TestWording(t *testing.T) {
	many := make([]string, check.MaxSuggestCandidates+1)
	for i := range many {
		many[i] = "name" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"path of a top-level key", check.Join("", "metadata"), "metadata"},
		{"path of a nested key", check.Join("lifecycle.run", "exec"), "lifecycle.run.exec"},
		{"path of a list item", check.Index(check.Join("", "artifacts"), 2), "artifacts[2]"},
		{"typo gets a suggestion", check.Suggestion("verison", []string{"name", "version"}, "allowed keys"), "; did you mean `version`?"},
		{"no close name lists them all", check.Suggestion("zzz", []string{"name", "version", "type"}, "allowed fields"), "; allowed fields are `name`, `version` or `type`"},
		{"too many candidates to weigh", check.Closest("name1", many), ""},
		{"missing key with what it holds", check.Missing("field", "image", "the image to run"), "missing required field `image`: the image to run"},
		{"missing key alone", check.Missing("key", "uri", ""), "missing required key `uri`"},
		{"enum typo", check.NotOneOf("alwyas", []string{"always", "never"}), "`alwyas` is not one of `always` or `never`; did you mean `always`?"},
		{"bounded range", check.OutOfRange(1, 65535, 70000), "must be between 1 and 65535, got 70000"},
		{"no upper bound", check.OutOfRange(1, 1<<63-1, 0), "must be at least 1, got 0"},
		{"not negative", check.OutOfRange(0, 1<<63-1, -3), "must not be negative, got -3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestSemver(t *testing.T) {
	for s, want := range map[string]bool{
		"1.4.2": true, "v2.0.0-rc.1": true, "1.0.0+build.5": true,
		"1.4": false, "01.2.3": false, "1.2.3.4": false, "latest": false,
	} {
		if got := check.Semver.MatchString(s); got != want {
			t.Errorf("Semver.MatchString(%q) = %v, want %v", s, got, want)
		}
	}
}

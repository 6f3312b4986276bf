package handlers_test

import (
	"testing"

	"github.com/skali-dev/studio/handlers"
)

// TestLoginURLCarriesOnlyPathsOfThisStudio: the sign-in redirect of an
// anonymous visitor keeps the page asked for only when it is a path here,
// serialized so that a browser cannot read it as another site.
func TestLoginURLCarriesOnlyPathsOfThisStudio(t *testing.T) {
	for _, tc := range []struct{ next, want string }{
		{"", "/login"},
		{"/", "/login"},
		{"/projects/hello-world", "/login?next=%2Fprojects%2Fhello-world"},
		{"/projects/a b", "/login?next=%2Fprojects%2Fa%2520b"},
		{"/%09/evil.example", "/login?next=%2F%2509%2Fevil.example"},
		{"/\t/evil.example", "/login"},
		{"//evil.example", "/login"},
		{`/\evil.example`, "/login"},
		{"https://evil.example/x", "/login"},
		{"javascript:alert(1)", "/login"},
	} {
		if got := handlers.LoginURL(tc.next, false); got != tc.want {
			t.Errorf("LoginURL(%q) = %q, want %q", tc.next, got, tc.want)
		}
	}
	if got, want := handlers.LoginURL("//evil.example", true), "/login?expired=1"; got != want {
		t.Errorf("LoginURL(expired) = %q, want %q", got, want)
	}
}

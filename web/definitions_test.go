package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// A revision's page content comes from the definition stored with it: if
// the source text were compiled again, a changed compiler (here, a source
// edited behind the Studio's back) could change what a revision deploys.
func TestEnvironmentPageReadsTheStoredDefinition(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	c := s.SignInLocal(t)
	s.CreateEnvironment(t, "", "production")
	if _, err := s.DB.Pool.Exec(context.Background(),
		`UPDATE revisions SET source = replace(source, 'port: 8080', 'port: 9090')`); err != nil {
		t.Fatal(err)
	}
	status, page := s.Get(t, c, "/projects/hello-world/environments/production")
	if status != 200 || !strings.Contains(page, "http 8080/http") || strings.Contains(page, "9090") {
		t.Fatalf("environment page does not show the stored definition: %d\n%s", status, pageMain(page))
	}
}

package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

// TestAuditEnvironmentFilterIsTypedPastAHundredEnvironments: with more
// environments than a list can offer, the audit log asks for the
// environment as project/environment text instead of listing them all,
// and filters by what is typed, an environment past the first hundred too
// (an admin's page reads only as many as a list could offer).
func TestAuditEnvironmentFilterIsTypedPastAHundredEnvironments(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	for i := range 103 {
		s.CreateEnvironment(t, "", fmt.Sprintf("env-%03d", i))
	}
	admin := s.SignInLocal(t)
	_, page := s.Get(t, admin, "/audit")
	if !strings.Contains(page, `type="search" id="audit-environment" name="environment"`) || strings.Contains(page, `<option value="hello-world/env-050"`) {
		t.Fatalf("the audit log of 103 environments does not ask for the environment as text, or lists them all")
	}
	status, page := s.Get(t, admin, "/audit?environment=hello-world%2Fenv-050")
	if status != http.StatusOK || !strings.Contains(page, "env-050") || strings.Contains(page, "env-051") {
		t.Errorf("filtering by hello-world/env-050: %d, or it shows other environments' records", status)
	}
	status, page = s.Get(t, admin, "/audit?environment=hello-world%2Fenv-102")
	if status != http.StatusOK || !strings.Contains(page, "env-102") || strings.Contains(page, "env-101") {
		t.Errorf("filtering by hello-world/env-102, the last environment: %d, or it shows other environments' records", status)
	}
	if status, _ := s.Get(t, admin, "/audit?environment=hello-world%2Fnone"); status < 400 || status >= 500 {
		t.Errorf("filtering by an environment that does not exist: %d, want a 4xx", status)
	}
}

package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

const protectedManifest = `name: shop
applications:
  api:
    image: ghcr.io/acme/api:1
    environment:
      API_KEY: ${API_KEY}
`

var approvalDigest = regexp.MustCompile(`data-approval-digest="([0-9a-f]+)"`)

// waitForPage reloads path until its page contains want, as a person
// watching it would; on timeout it shows what it saw.
func waitForPage(t *testing.T, s *webtest.Server, c *http.Client, path string, wants ...string) string {
	t.Helper()
	var page string
	for range 600 {
		_, page = s.Get(t, c, path)
		all := true
		for _, want := range wants {
			all = all && strings.Contains(page, want)
		}
		if all {
			return page
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never showed all of %q:\n%s", path, wants, pageMain(page))
	return ""
}

func digestOf(t *testing.T, page string) string {
	t.Helper()
	m := approvalDigest.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the run page shows no plan digest:\n%s", pageMain(page))
	}
	return m[1]
}

func TestProtectedProductionNeedsTwoApprovalsAndAChangedValueVoidsThem(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	admin := s.SignInLocal(t)
	env := s.CreateEnvironment(t, protectedManifest, "production")
	for _, p := range []string{"alice", "bob", "carol"} {
		s.AddMember(t, env, p+"@example.test", store.RoleDeployer)
	}
	alice := s.SignInAs(t, "alice@example.test", "Alice")
	bob := s.SignInAs(t, "bob@example.test", "Bob")
	carol := s.SignInAs(t, "carol@example.test", "Carol")
	const envPath = "/projects/shop/environments/production"
	const secret = "first-plaintext-never-shown"
	if resp, _ := s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"API_KEY"}, "value": {secret}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set value: %d", resp.StatusCode)
	}

	// A rule asking for more approvers than there are is refused, in words.
	resp, body := s.PostForm(t, admin, envPath+"/protection", url.Values{"approvals": {"6"}, "role": {"deployer"}, "expires": {"7d"}, "bypass": {"nobody"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "This rule asks for 6 approvals, but production has only 3 members who may approve.") {
		t.Fatalf("rule of 6: %d\n%s", resp.StatusCode, pageMain(body))
	}
	if status, _ := s.Get(t, alice, envPath+"/protection"); status != http.StatusForbidden {
		t.Fatalf("a deployer reads the protection page: %d, want 403", status)
	}
	resp, _ = s.PostForm(t, admin, envPath+"/protection", url.Values{"approvals": {"2"}, "role": {"deployer"}, "expires": {"7d"}, "wait": {"0s"}, "bypass": {"nobody"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set rule: %d", resp.StatusCode)
	}
	if _, page := s.Get(t, admin, envPath+"/protection"); !strings.Contains(page, `data-testid="protected"`) || !strings.Contains(page, `value="2"`) {
		t.Fatalf("protection page after saving:\n%s", pageMain(page))
	}

	// Alice deploys: the run waits, nothing runs.
	resp, _ = s.PostForm(t, alice, envPath+"/deploys", url.Values{})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("deploy: %d", resp.StatusCode)
	}
	runPath := resp.Header.Get("Location")
	_, page := s.Get(t, alice, runPath)
	for _, want := range []string{`data-run-status="waiting"`, "waiting for approval", "0 of 2 approvals", "API_KEY v1", "You started this deploy"} {
		if !strings.Contains(page, want) {
			t.Fatalf("waiting run page lacks %q:\n%s", want, pageMain(page))
		}
	}
	if _, list := s.Get(t, alice, envPath+"/runs"); !strings.Contains(list, `data-run-status="waiting"`) || !strings.Contains(list, "waiting for approval") {
		t.Fatalf("runs list does not mark the waiting run:\n%s", pageMain(list))
	}
	digest := digestOf(t, page)
	if resp, _ := s.PostForm(t, alice, runPath+"/approve", url.Values{"digest": {digest}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("self-approval: %d, want 403", resp.StatusCode)
	}
	if _, inbox := s.Get(t, bob, "/approvals"); !strings.Contains(inbox, "shop / production") {
		t.Fatalf("bob's inbox:\n%s", pageMain(inbox))
	}

	// Bob approves: still waiting, 1 of 2.
	if resp, _ := s.PostForm(t, bob, runPath+"/approve", url.Values{"digest": {digest}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob approves: %d", resp.StatusCode)
	}
	if resp, _ := s.PostForm(t, bob, runPath+"/approve", url.Values{"digest": {digest}}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("bob approves twice: %d, want 409", resp.StatusCode)
	}
	_, page = s.Get(t, carol, runPath)
	if !strings.Contains(page, "1 of 2 approvals") || !strings.Contains(page, `data-run-status="waiting"`) || !strings.Contains(page, "Bob") {
		t.Fatalf("after one approval:\n%s", pageMain(page))
	}
	assertAudit(t, s, "approval.granted", "run "+runPath[strings.LastIndex(runPath, "/")+1:], digest)

	// The value changes before the second approval starts the run: the
	// approvals are void and the page says which value.
	if resp, _ := s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"API_KEY"}, "value": {"second-plaintext-never-shown"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("change value: %d", resp.StatusCode)
	}
	if resp, _ := s.PostForm(t, carol, runPath+"/approve", url.Values{"digest": {digest}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("carol approves: %d", resp.StatusCode)
	}
	// The page reads the run and its checkpoints one after the other: wait
	// for both the checkpoint's words and the run's status.
	page = waitForPage(t, s, carol, runPath, `data-testid="approval-changed"`, `data-run-status="waiting"`)
	for _, want := range []string{"value API_KEY changed: version 1 → 2", `data-run-status="waiting"`, "0 of 2 approvals", "API_KEY v2"} {
		if !strings.Contains(page, want) {
			t.Fatalf("voided run page lacks %q:\n%s", want, pageMain(page))
		}
	}
	newDigest := digestOf(t, page)
	if newDigest == digest {
		t.Fatal("the digest did not change with the value")
	}

	// Both approve the plan as it is now: the run runs and succeeds.
	for _, c := range []*http.Client{bob, carol} {
		if resp, _ := s.PostForm(t, c, runPath+"/approve", url.Values{"digest": {newDigest}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("approve again: %d", resp.StatusCode)
		}
	}
	page = waitForRun(t, s, alice, runPath)
	if m := runStatus.FindStringSubmatch(page); m[1] != "succeeded" {
		t.Fatalf("run ended %s:\n%s", m[1], pageMain(page))
	}

	// A second deploy is rejected with a comment.
	resp, _ = s.PostForm(t, alice, envPath+"/deploys", url.Values{"redeploy": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("redeploy: %d", resp.StatusCode)
	}
	second := resp.Header.Get("Location")
	if resp, _ := s.PostForm(t, carol, second+"/reject", url.Values{"comment": {"not during the sale"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	_, page = s.Get(t, alice, second)
	if !strings.Contains(page, `data-run-status="rejected"`) || !strings.Contains(page, "Rejected by Carol: not during the sale") {
		t.Fatalf("rejected run:\n%s", pageMain(page))
	}
	if strings.Contains(s.Logs.String(), "plaintext-never-shown") {
		t.Fatal("a value reached the logs")
	}
}

package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
	"github.com/skali-dev/studio/web/webtest"
)

// TestBrowserSignsInWithOIDCAndManagesMembers signs an environment admin in
// through the OpenID provider in Chromium, adds a member with the form, and
// takes screenshots of the members page, its form errors and the audit log.
func TestBrowserSignsInWithOIDCAndManagesMembers(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"))
	prod := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, prod, "grace@example.test", store.RoleAdmin)
	s.AddMember(t, prod, "linus@example.test", store.RoleDeployer)
	s.AddMember(t, prod, "margaret@example.test", store.RoleViewer)
	s.SignInAs(t, "linus@example.test", "Linus Torvalds")
	s.SignInAs(t, "margaret@example.test", "Margaret Hamilton")
	s.OIDC.SetDefaultIdentity(webtest.Identity("grace@example.test", "Grace Hopper"))

	b := browsertest.New(t)
	b.Do(
		chromedp.Navigate(s.URL+"/login"),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=oidc-sign-in]")),
	)
	b.Screenshot("login")
	b.Do(
		chromedp.Click(chromedp.CSS("[data-testid=oidc-sign-in]")),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=user-name]")),
	)
	if got := b.Text("[data-testid=user-name]"); got != "Grace Hopper" {
		t.Errorf("signed-in user shown as %q, want Grace Hopper", got)
	}

	members := s.URL + "/projects/hello-world/environments/production/members"
	b.Do(
		chromedp.Navigate(members),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=members]")),
		chromedp.SendKeys(chromedp.CSS("#member-email"), "not-an-email"),
		chromedp.Click(chromedp.CSS("form.form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=email-error]")),
	)
	if got := b.Text("[data-testid=email-error]"); !strings.Contains(got, "Enter an email address") {
		t.Errorf("email error = %q", got)
	}
	b.Screenshot("members-form-error")
	b.Do(
		chromedp.SetValue(chromedp.CSS("#member-email"), "ada@example.test"),
		chromedp.Click(chromedp.CSS("input[name=role][value=deployer]")),
	)
	// The flash is the layout's: wait for the page the post leads to.
	b.Submit("form.form button[type=submit]", ".flash")
	if got := b.Text(".flash"); !strings.Contains(got, "ada@example.test is now a deployer") {
		t.Errorf("flash after adding = %q", got)
	}
	if got := browsertest.Eval[int](b, `document.querySelectorAll("[data-testid=members] tbody tr").length`); got != 4 {
		t.Errorf("members listed = %d, want 4", got)
	}
	b.Screenshot("members")

	// Some history for the audit log, then look at it as an installation admin.
	for i := range 3 {
		_ = s.DB.Audit(context.Background(), store.AuditEvent{Actor: "Grace Hopper", Action: "value.set", Project: "hello-world",
			EnvironmentID: &prod.ID, Environment: "production", Target: fmt.Sprintf("SECRET_%d", i), Detail: map[string]any{"version": i + 1}})
	}
	b.Do(
		chromedp.Navigate(s.URL+"/audit"),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=audit]")),
	)
	if got := b.Text("[data-testid=audit] tbody tr td:nth-child(3)"); got != "value.set" {
		t.Errorf("newest audit action = %q, want value.set", got)
	}
	b.Screenshot("audit")
}

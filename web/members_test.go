package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
	"github.com/skali-dev/studio/web/webtest/oidcprovider"
)

const prodMembers = "/projects/hello-world/environments/production/members"

func TestEnvironmentAdminManagesMembers(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, env, "boss@example.test", store.RoleAdmin)
	boss := s.SignInAs(t, "boss@example.test", "Bo Boss")

	status, body := s.Get(t, boss, prodMembers)
	if status != http.StatusOK || !strings.Contains(body, "Bo Boss") || !strings.Contains(body, "Add a member") {
		t.Fatalf("members page = %d, want 200 listing the admin and the add form", status)
	}

	// Adding someone who never signed in makes a pending member.
	resp, _ := s.PostForm(t, boss, prodMembers, url.Values{"email": {"Newbie@Example.test"}, "role": {"deployer"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != prodMembers {
		t.Fatalf("add member = %d to %q, want 303 to the members page", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body = s.Get(t, boss, prodMembers)
	if !strings.Contains(body, "Newbie@Example.test") || !strings.Contains(body, "Not signed in yet") || !strings.Contains(body, "is now a deployer") {
		t.Errorf("after adding, the page does not list the pending member with a confirmation")
	}
	assertAudit(t, s, "member.added", "Newbie@Example.test", `"pending": true`)

	// Their first sign-in with that (verified) email claims the membership.
	newbie := s.SignInAs(t, "newbie@example.test", "New Bie")
	var users int
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM users WHERE lower(email) = 'newbie@example.test'`).Scan(&users); err != nil {
		t.Fatal(err)
	}
	if users != 1 {
		t.Errorf("users with the email after sign-in = %d, want 1 (the pending row claimed)", users)
	}
	if status, _ := s.Get(t, newbie, prodMembers); status != http.StatusForbidden {
		t.Errorf("deployer on the members page = %d, want 403", status)
	}
	id := s.UserID(t, "newbie@example.test")

	// Change the role, then remove.
	resp, _ = s.PostForm(t, boss, fmt.Sprintf("%s/%d/role", prodMembers, id), url.Values{"role": {"admin"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("change role = %d, want 303", resp.StatusCode)
	}
	assertAudit(t, s, "member.changed", "newbie@example.test", `"to": "admin"`)
	if status, _ := s.Get(t, newbie, prodMembers); status != http.StatusOK {
		t.Errorf("new admin on the members page = %d, want 200", status)
	}
	resp, _ = s.PostForm(t, boss, fmt.Sprintf("%s/%d/remove", prodMembers, id), nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove = %d, want 303", resp.StatusCode)
	}
	assertAudit(t, s, "member.removed", "newbie@example.test", `"role": "admin"`)
	if status, _ := s.Get(t, newbie, prodMembers); status != http.StatusForbidden {
		t.Errorf("removed member on the members page = %d, want 403", status)
	}
	if resp, _ := s.PostForm(t, boss, fmt.Sprintf("%s/%d/remove", prodMembers, id), nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("removing a non-member = %d, want 404", resp.StatusCode)
	}
}

func TestAddMemberFormShowsErrorsNextToFields(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	admin := s.SignInLocal(t)
	s.AddMember(t, env, "ada@example.test", store.RoleViewer)
	for _, tc := range []struct {
		name        string
		form        url.Values
		field, says string
	}{
		{"no email", url.Values{"email": {""}, "role": {"viewer"}}, "email-error", "Enter an email address"},
		{"not an email", url.Values{"email": {"ada at example"}, "role": {"viewer"}}, "email-error", "Enter an email address"},
		{"no role", url.Values{"email": {"bob@example.test"}}, "role-error", "Choose a role"},
		{"unknown role", url.Values{"email": {"bob@example.test"}, "role": {"owner"}}, "role-error", "Choose a role"},
		{"already a member", url.Values{"email": {"ADA@example.test"}, "role": {"admin"}}, "email-error", "already a member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.PostForm(t, admin, prodMembers, tc.form)
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("status = %d, want 422", resp.StatusCode)
			}
			i := strings.Index(body, `data-testid="`+tc.field+`"`)
			if i < 0 || !strings.Contains(body[i:min(len(body), i+300)], tc.says) {
				t.Errorf("no %s saying %q", tc.field, tc.says)
			}
			if email := tc.form.Get("email"); email != "" && !strings.Contains(body, `value="`+email+`"`) {
				t.Errorf("the form lost the email %q", email)
			}
		})
	}
	if n := countAudit(t, s, "member.added"); n != 1 {
		t.Errorf("member.added records = %d, want 1 (the fixture only)", n)
	}
}

func TestMembersOfAnotherEnvironmentAreNotReachable(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	prod := s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	s.AddMember(t, staging, "stager@example.test", store.RoleAdmin)
	s.AddMember(t, prod, "victim@example.test", store.RoleViewer)
	c := s.SignInAs(t, "stager@example.test", "Stager")
	victim := s.UserID(t, "victim@example.test")
	if status, _ := s.Get(t, c, prodMembers); status != http.StatusForbidden {
		t.Errorf("admin of staging on production's members = %d, want 403", status)
	}
	resp, _ := s.PostForm(t, c, fmt.Sprintf("%s/%d/remove", prodMembers, victim), nil)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("admin of staging removing a production member = %d, want 403", resp.StatusCode)
	}
	// The member is still there.
	members, err := s.DB.Members(context.Background(), prod.ID)
	if err != nil || len(members) != 1 {
		t.Errorf("production members = %d (%v), want 1", len(members), err)
	}
}

func assertAudit(t *testing.T, s *webtest.Server, action, target, detail string) {
	t.Helper()
	var n int
	err := s.DB.Pool.QueryRow(context.Background(), `
		SELECT count(*) FROM audit_events
		WHERE action = $1 AND target = $2 AND detail::text LIKE '%' || $3 || '%' AND request_id <> '' AND actor <> ''`,
		action, target, detail).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("audit records %s of %s with %s = %d, want 1", action, target, detail, n)
	}
}

// An email the provider did not verify could be anybody's: a role granted to
// that address goes to a pending member that only a verified sign-in claims.
func TestUnverifiedEmailDoesNotReceiveARoleGrantedToIt(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	s.CreateEnvironment(t, "", "production")
	mallory := s.NewClient()
	s.SignInWith(t, mallory, oidcprovider.Identity{Subject: "sub-mallory", Email: "victim@example.test", Name: "Mallory", EmailVerified: false})
	admin := s.SignInLocal(t)
	resp, _ := s.PostForm(t, admin, prodMembers, url.Values{"email": {"victim@example.test"}, "role": {"admin"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add member = %d, want 303", resp.StatusCode)
	}
	if status, _ := s.Get(t, mallory, prodMembers); status != http.StatusForbidden {
		t.Errorf("unverified holder of the email on the members page = %d, want 403", status)
	}
	if _, body := s.Get(t, admin, prodMembers); !strings.Contains(body, "Not signed in yet") || strings.Contains(body, "Mallory") {
		t.Errorf("the member added is not shown as pending, or is shown as Mallory")
	}
	// The person who owns the address signs in with it verified and has the role.
	victim := s.SignInAs(t, "victim@example.test", "Victor")
	if status, _ := s.Get(t, victim, prodMembers); status != http.StatusOK {
		t.Errorf("verified owner of the email on the members page = %d, want 200", status)
	}
	if status, _ := s.Get(t, mallory, prodMembers); status != http.StatusForbidden {
		t.Errorf("after the owner signed in, Mallory on the members page = %d, want 403", status)
	}
}

// An environment keeps an admin among its members: its last admin cannot
// step down or be removed by an environment admin (the page says why and
// nothing changes), but can once someone else is admin. Installation
// admins, who manage every environment anyway, may.
func TestTheLastEnvironmentAdminStays(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, env, "boss@example.test", store.RoleAdmin)
	boss := s.SignInAs(t, "boss@example.test", "Bo Boss")
	id := s.UserID(t, "boss@example.test")
	for _, path := range []string{fmt.Sprintf("%s/%d/role", prodMembers, id), fmt.Sprintf("%s/%d/remove", prodMembers, id)} {
		resp, body := s.PostForm(t, boss, path, url.Values{"role": {"viewer"}})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Bo Boss is the last admin of hello-world/production") {
			t.Errorf("last admin POST %s = %d, want 409 with the reason on the members page", path, resp.StatusCode)
		}
	}
	if status, _ := s.Get(t, boss, prodMembers); status != http.StatusOK {
		t.Fatalf("after the refusals the boss on the members page = %d, want 200 (still admin)", status)
	}
	// With a second admin, stepping down works.
	s.AddMember(t, env, "deputy@example.test", store.RoleAdmin)
	if resp, _ := s.PostForm(t, boss, fmt.Sprintf("%s/%d/role", prodMembers, id), url.Values{"role": {"viewer"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("stepping down with another admin = %d, want 303", resp.StatusCode)
	}
	// An installation admin may remove the last admin.
	root := s.SignInLocal(t)
	deputy := s.UserID(t, "deputy@example.test")
	if resp, _ := s.PostForm(t, root, fmt.Sprintf("%s/%d/remove", prodMembers, deputy), nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("installation admin removing the last admin = %d, want 303", resp.StatusCode)
	}
}

// TestMembersPageSaysWhenNobodyCanSignInByEmail: without an OpenID
// provider, the members page says that people added by email cannot sign in.
func TestMembersPageSaysWhenNobodyCanSignInByEmail(t *testing.T) {
	t.Parallel()
	for _, oidc := range []bool{false, true} {
		var opts []webtest.Option
		if !oidc {
			opts = append(opts, webtest.WithoutOIDC())
		}
		s := webtest.Start(t, opts...)
		s.CreateEnvironment(t, "", "production")
		_, page := s.Get(t, s.SignInLocal(t), "/projects/hello-world/environments/production/members")
		if got := strings.Contains(page, `data-testid="no-oidc"`); got == oidc {
			t.Errorf("with OIDC %v, the note that email members cannot sign in is shown: %v", oidc, got)
		}
	}
}

// TestALongEmailBreaksOnlyBetweenItsParts: a member's address on the
// members page may break after its @ and before its dots, never inside a
// word, and reads whole.
func TestALongEmailBreaksOnlyBetweenItsParts(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	env := s.CreateEnvironment(t, "", "production")
	const long = "maximilian.alexander.vonhohenberg@engineering.example-corporation.test"
	s.SignInAs(t, long, "")
	s.AddMember(t, env, long, store.RoleDeployer)
	c := s.SignInLocal(t)
	_, page := s.Get(t, c, "/projects/hello-world/environments/production/members")
	if !strings.Contains(page, `<span class="email">maximilian<wbr>.alexander<wbr>.vonhohenberg@<wbr>engineering<wbr>.example-corporation<wbr>.test</span>`) {
		t.Errorf("the address is not cut at its @ and dots only:\n%s", envStatusOf(page[strings.Index(page, "<main"):]))
	}
}

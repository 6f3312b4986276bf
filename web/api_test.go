package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

// apiCall makes one API request with token (none when empty) and returns
// the response and its body.
func apiCall(t *testing.T, s *webtest.Server, c *http.Client, token, method, path string, body any) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if c == nil {
		c = s.NewClient()
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

// problemDetail returns the detail of a problem document, failing when the
// answer is not one.
func problemDetail(t *testing.T, resp *http.Response, body string) string {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("error answer %d has Content-Type %q, want application/problem+json:\n%s", resp.StatusCode, ct, body)
	}
	var p struct {
		Status int
		Detail string
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != resp.StatusCode {
		t.Fatalf("problem document %s (err %v), want status %d", body, err, resp.StatusCode)
	}
	return p.Detail
}

func TestAPITokenScopeRolesRevocationAndExpiry(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"), webtest.WithDeploys(&webtest.Deploys{}))
	prod := s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	s.AddMember(t, prod, "ci@example.test", store.RoleDeployer)
	s.AddMember(t, staging, "ci@example.test", store.RoleDeployer)
	ci := s.SignInAs(t, "ci@example.test", "CI Person")

	// A role higher than one's own is refused, and nothing is stored.
	resp, body := s.PostForm(t, ci, "/tokens", url.Values{"name": {"too-much"}, "scope": {"hello-world/staging:admin"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "You are deployer of hello-world/staging, so a token cannot be admin there.") {
		t.Fatalf("a token above one's role = %d:\n%s", resp.StatusCode, pageMain(body))
	}
	// More than a year is refused.
	resp, body = s.PostForm(t, ci, "/tokens", url.Values{"name": {"forever"}, "scope": {"hello-world/staging:viewer"}, "expires": {"366"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Enter a number of days from 1 to 365.") {
		t.Fatalf("a token of 366 days = %d:\n%s", resp.StatusCode, pageMain(body))
	}

	id, secret := s.CreateToken(t, ci, "ci-staging", "", "hello-world/staging:deployer", "")
	var stored int
	var expires time.Time
	if err := s.DB.Pool.QueryRow(t.Context(), `SELECT count(*), max(expires_at) FROM api_tokens WHERE secret_sha256 = sha256($1::bytea)
		AND position($2 in row(api_tokens.*)::text) = 0`, []byte(secret), secret[len("skst_"):]).Scan(&stored, &expires); err != nil || stored != 1 {
		t.Fatalf("tokens stored by the secret's SHA-256 and without it = %d (err %v), want 1", stored, err)
	}
	if d := time.Until(expires); d < 89*24*time.Hour || d > 91*24*time.Hour {
		t.Errorf("a token without a chosen expiry expires in %s, want 90 days", d)
	}

	// Scoped to staging: staging is listed, production is refused.
	resp, body = apiCall(t, s, nil, secret, "GET", "/api/v1/environments", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"name":"staging"`) || strings.Contains(body, `"production"`) {
		t.Fatalf("environments = %d %s, want staging only", resp.StatusCode, body)
	}
	resp, body = apiCall(t, s, nil, secret, "POST", "/api/v1/projects/hello-world/environments/production/deploys", map[string]any{})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(problemDetail(t, resp, body), "may not act on hello-world/production") {
		t.Fatalf("a staging token deploys production = %d %s, want 403", resp.StatusCode, body)
	}
	if resp, body = apiCall(t, s, nil, secret, "GET", "/api/v1/projects/hello-world/environments/staging/plan", nil); resp.StatusCode != 200 {
		t.Fatalf("staging plan = %d %s", resp.StatusCode, body)
	}
	// Last used is recorded (at most once a minute).
	if status, page := s.Get(t, ci, "/tokens"); status != 200 || !strings.Contains(page, `data-token="ci-staging" data-token-state="active"`) || strings.Contains(page, ">never<") {
		t.Fatalf("the tokens page after a use = %d:\n%s", status, pageMain(page))
	}

	// A browser session is not a token, whatever the request's origin.
	for _, origin := range []string{"", "https://evil.example"} {
		req, _ := http.NewRequest("POST", s.URL+"/api/v1/projects/hello-world/environments/staging/deploys", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		resp, err := ci.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		b := string(rb)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(problemDetail(t, resp, b), "does not accept a browser session") {
			t.Fatalf("the API with a session cookie (origin %q) = %d %s, want 401", origin, resp.StatusCode, b)
		}
	}
	// A bearer token from another origin is not refused as a cross-site form.
	req, _ := http.NewRequest("GET", s.URL+"/api/v1/environments", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Origin", "https://ci.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	cross, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cross.Body.Close()
	if cross.StatusCode != 200 {
		t.Fatalf("a cross-origin bearer request = %d, want 200", cross.StatusCode)
	}

	// The owner loses the role on staging: so does the token, at once.
	if _, err := s.DB.Pool.Exec(t.Context(), `DELETE FROM memberships WHERE environment_id = $1`, staging.ID); err != nil {
		t.Fatal(err)
	}
	resp, body = apiCall(t, s, nil, secret, "GET", "/api/v1/projects/hello-world/environments/staging/plan", nil)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("after the owner's role was removed = %d %s, want 403", resp.StatusCode, body)
	}
	problemDetail(t, resp, body)
	// Demoted to viewer, the deployer token only reads.
	s.AddMember(t, staging, "ci@example.test", store.RoleViewer)
	if resp, body = apiCall(t, s, nil, secret, "POST", "/api/v1/projects/hello-world/environments/staging/deploys", map[string]any{}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a deployer token of a viewer deploys = %d %s, want 403", resp.StatusCode, body)
	}
	if resp, body = apiCall(t, s, nil, secret, "GET", "/api/v1/projects/hello-world/environments/staging/plan", nil); resp.StatusCode != 200 {
		t.Fatalf("a deployer token of a viewer reads the plan = %d %s, want 200", resp.StatusCode, body)
	}

	// An installation admin sees every token and revokes this one.
	root := s.SignInAs(t, "root@example.test", "Root")
	if status, page := s.Get(t, root, "/tokens"); status != 200 || !strings.Contains(page, `data-token="ci-staging"`) || !strings.Contains(page, "CI Person") {
		t.Fatalf("the admin's tokens page = %d:\n%s", status, pageMain(page))
	}
	if status, page := s.Get(t, s.SignInAs(t, "other@example.test", "Other"), "/tokens"); status != 200 || strings.Contains(page, `data-token="ci-staging"`) {
		t.Fatalf("another person's tokens page = %d lists ci-staging", status)
	}
	if resp, _ := s.PostForm(t, s.SignInAs(t, "other@example.test", "Other"), "/tokens/"+strconv.FormatInt(id, 10)+"/revoke", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another person revokes the token = %d, want 404", resp.StatusCode)
	}
	if resp, _ := s.PostForm(t, root, "/tokens/"+strconv.FormatInt(id, 10)+"/revoke", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d", resp.StatusCode)
	}
	resp, body = apiCall(t, s, nil, secret, "GET", "/api/v1/environments", nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(problemDetail(t, resp, body), "The token ci-staging was revoked") {
		t.Fatalf("a revoked token = %d %s, want 401", resp.StatusCode, body)
	}

	// An expired token is refused.
	_, old := s.CreateToken(t, ci, "old", "30", "hello-world/production:viewer")
	if _, err := s.DB.Pool.Exec(t.Context(), `UPDATE api_tokens SET expires_at = now() - interval '1 hour' WHERE name = 'old'`); err != nil {
		t.Fatal(err)
	}
	resp, body = apiCall(t, s, nil, old, "GET", "/api/v1/environments", nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(problemDetail(t, resp, body), "The token old expired on") {
		t.Fatalf("an expired token = %d %s, want 401", resp.StatusCode, body)
	}
	// No token at all, and a made-up one.
	for _, tok := range []string{"", "skst_made-up"} {
		if resp, body := apiCall(t, s, nil, tok, "GET", "/api/v1/environments", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q = %d %s, want 401", tok, resp.StatusCode, body)
		}
	}
}

func TestAPIRateLimitPerToken(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, func(d *web.Deps) { d.APIRequests = web.RateLimit{Burst: 3, Every: time.Hour} })
	env := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, env, "ci@example.test", store.RoleViewer)
	ci := s.SignInAs(t, "ci@example.test", "CI")
	_, a := s.CreateToken(t, ci, "a", "", "hello-world/production:viewer")
	_, b := s.CreateToken(t, ci, "b", "", "hello-world/production:viewer")
	for i := range 3 {
		if resp, body := apiCall(t, s, nil, a, "GET", "/api/v1/environments", nil); resp.StatusCode != 200 {
			t.Fatalf("request %d = %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := apiCall(t, s, nil, a, "GET", "/api/v1/environments", nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the fourth request = %d (Retry-After %q), want 429", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	problemDetail(t, resp, body)
	if resp, _ := apiCall(t, s, nil, b, "GET", "/api/v1/environments", nil); resp.StatusCode != 200 {
		t.Fatalf("another token = %d, want 200: the limit is per token", resp.StatusCode)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// jsonField returns one top-level field of a JSON object as text.
func jsonField(t *testing.T, body, field string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not a JSON object: %s", body)
	}
	return strings.Trim(string(m[field]), `"`)
}

// TestAPIPlanBoundsOrphanedValues: a plan lists the first 20 orphaned
// names and counts them all, so that an environment with thousands of
// stored names the manifest dropped answers a plan of the same size.
func TestAPIPlanBoundsOrphanedValues(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	env := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, env, "ops@example.test", store.RoleAdmin)
	ops := s.SignInAs(t, "ops@example.test", "Ops")
	_, secret := s.CreateToken(t, ops, "ops", "", "hello-world/production:admin")
	const path = "/api/v1/projects/hello-world/environments/production/plan"

	plan := func() (names []string, count int) {
		t.Helper()
		resp, body := apiCall(t, s, nil, secret, "GET", path, nil)
		var p struct {
			Names []string `json:"orphaned_values"`
			Count *int     `json:"orphaned_count"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil || p.Count == nil {
			t.Fatalf("plan = %d %s, want 200 with orphaned_values and orphaned_count", resp.StatusCode, body)
		}
		return p.Names, *p.Count
	}
	if names, count := plan(); len(names) != 0 || count != 0 {
		t.Fatalf("before any orphaned value the plan lists %q and counts %d, want none", names, count)
	}

	var want []string
	for i := range 25 {
		name := "OLD_SETTING_" + strconv.Itoa(100+i)
		want = append(want, name)
		resp, body := apiCall(t, s, nil, secret, "PUT", "/api/v1/projects/hello-world/environments/production/values/"+name,
			map[string]any{"value": "kept-" + name, "confirm_orphan": true})
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"orphaned":true`) {
			t.Fatalf("PUT %s = %d %s, want 200 orphaned", name, resp.StatusCode, body)
		}
	}
	names, count := plan()
	if count != 25 || strings.Join(names, ",") != strings.Join(want[:20], ",") {
		t.Fatalf("with 25 orphaned values the plan lists %q and counts %d, want the first 20 in name order and 25", names, count)
	}
	// The deploy plan page lists the same 20 and links the other 5.
	resp, err := ops.Get(s.URL + "/projects/hello-world/environments/production/deploys/new")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	html := string(page)
	if resp.StatusCode != http.StatusOK || !strings.Contains(html, "and 5 more on the values page") ||
		!strings.Contains(html, "<code>"+want[19]+"</code>") || strings.Contains(html, want[20]) {
		t.Fatalf("deploy plan page = %d, want the first 20 orphaned names and \"and 5 more on the values page\"; orphaned card: %.2000s",
			resp.StatusCode, html[max(0, strings.Index(html, `id="orphaned"`)):])
	}
}

package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

func TestAuditLogScopes(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"))
	prod := s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	s.AddMember(t, prod, "prodadmin@example.test", store.RoleAdmin)
	s.AddMember(t, prod, "viewer@example.test", store.RoleViewer)
	s.AddMember(t, staging, "stagingviewer@example.test", store.RoleViewer)

	root := s.SignInAs(t, "root@example.test", "Root")
	prodAdmin := s.SignInAs(t, "prodadmin@example.test", "Prod Admin")
	viewer := s.SignInAs(t, "viewer@example.test", "Viewer")

	// Installation admins see everything, sign-ins included.
	status, body := s.Get(t, root, "/audit")
	if status != http.StatusOK {
		t.Fatalf("installation admin GET /audit = %d, want 200", status)
	}
	for _, want := range []string{"sign-in", "member.added", "stagingviewer@example.test", "hello-world/production", "Every event"} {
		if !strings.Contains(body, want) {
			t.Errorf("installation admin's audit log lacks %q", want)
		}
	}

	// An environment admin sees their environment's events only.
	status, body = s.Get(t, prodAdmin, "/audit")
	if status != http.StatusOK {
		t.Fatalf("environment admin GET /audit = %d, want 200", status)
	}
	if !strings.Contains(body, "viewer@example.test") {
		t.Error("environment admin's audit log lacks their environment's member.added")
	}
	for _, hidden := range []string{"stagingviewer@example.test", "hello-world/staging", "Root"} {
		if strings.Contains(body, hidden) {
			t.Errorf("environment admin's audit log shows %q from outside their environments", hidden)
		}
	}
	if status, _ := s.Get(t, prodAdmin, "/audit?environment=hello-world/staging"); status != http.StatusBadRequest {
		t.Errorf("environment admin filtering by another environment = %d, want 400", status)
	}

	// Everybody else is refused.
	if status, _ := s.Get(t, viewer, "/audit"); status != http.StatusForbidden {
		t.Errorf("viewer GET /audit = %d, want 403", status)
	}

	// Filters.
	_, body = s.Get(t, root, "/audit?"+url.Values{"environment": {"hello-world/staging"}}.Encode())
	if !strings.Contains(body, "stagingviewer@example.test") || strings.Contains(body, ">viewer@example.test<") {
		t.Error("filter by environment does not keep exactly staging's events")
	}
	_, body = s.Get(t, root, "/audit?action=sign-in")
	if strings.Contains(body, `badge badge-ok">member.added`) || !strings.Contains(body, `>sign-in</span>`) {
		t.Error("filter by action sign-in shows other actions or no sign-in")
	}
}

// TestAuditLogIsNewestFirstAndPaginated: pages continue from a record (a
// keyset), newest first in (at, id) order, even where records share a
// time: each older page shows exactly the next records, its links keep
// the filters, the last page has no Older link, and Newer goes back to
// exactly the page before.
func TestAuditLogIsNewestFirstAndPaginated(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	ctx := context.Background()
	total := 2*handlers.AuditPageSize + 25
	for i := range total {
		if err := s.DB.Audit(ctx, store.AuditEvent{Actor: "script", Action: "test.event", Target: "t" + itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Ten records share each time, so the id orders them.
	if _, err := s.DB.Pool.Exec(ctx, `UPDATE audit_events SET at = timestamptz '2026-01-01' + (substr(target, 2)::int / 10) * interval '1 minute'
		WHERE action = 'test.event'`); err != nil {
		t.Fatal(err)
	}
	c := s.SignInLocal(t)
	target := regexp.MustCompile(`>t(\d+)<`)
	shown := func(body string) []int {
		var out []int
		for _, m := range target.FindAllStringSubmatch(body, -1) {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
		return out
	}
	link := func(body, testid string) string {
		m := regexp.MustCompile(`href="([^"]+)" data-testid="` + testid + `"`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return strings.ReplaceAll(m[1], "&amp;", "&")
	}
	newest := func(from, n int) []int {
		var out []int
		for i := from; i > from-n && i >= 0; i-- {
			out = append(out, i)
		}
		return out
	}
	_, page1 := s.Get(t, c, "/audit?action=test.event&q=t")
	if got := shown(page1); !slices.Equal(got, newest(total-1, handlers.AuditPageSize)) {
		t.Errorf("page 1 shows %v, want the %d newest", got, handlers.AuditPageSize)
	}
	older := link(page1, "older")
	if !strings.Contains(older, "action=test.event") || !strings.Contains(older, "q=t") || !strings.Contains(older, "before=") {
		t.Fatalf("page 1's Older link %q does not continue from its last record keeping the filters", older)
	}
	_, page2 := s.Get(t, c, older)
	if got := shown(page2); !slices.Equal(got, newest(total-1-handlers.AuditPageSize, handlers.AuditPageSize)) {
		t.Errorf("page 2 shows %v, want exactly the next %d", got, handlers.AuditPageSize)
	}
	_, page3 := s.Get(t, c, link(page2, "older"))
	if got := shown(page3); !slices.Equal(got, newest(24, 25)) {
		t.Errorf("page 3 shows %v, want the 25 oldest", got)
	}
	if link(page3, "older") != "" || link(page3, "newest") == "" {
		t.Error("the last page links to older records, or not to the newest")
	}
	back := link(page3, "newer")
	if !strings.Contains(back, "action=test.event") || !strings.Contains(back, "after=") {
		t.Fatalf("page 3's Newer link %q does not keep the filters", back)
	}
	if _, again := s.Get(t, c, back); !slices.Equal(shown(again), shown(page2)) {
		t.Errorf("Newer from page 3 shows %v, want page 2 again", shown(again))
	}
	if link(page1, "newer") != "" || link(page1, "newest") != "" {
		t.Error("page 1 links to newer records")
	}
}

func TestSignInAndSignOutAreAudited(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	c := s.SignInLocal(t)
	s.PostForm(t, c, "/logout", nil)
	status, _ := s.Get(t, s.NewClient(), "/login/local?token=not-a-token")
	if status != http.StatusUnauthorized {
		t.Errorf("bad local link = %d, want 401", status)
	}
	for _, action := range []string{"sign-in", "sign-out", "sign-in.failed"} {
		if n := countAudit(t, s, action); n != 1 {
			t.Errorf("%s records = %d, want 1", action, n)
		}
	}
	// No record holds a token.
	var leaks int
	if err := s.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_events WHERE detail::text LIKE '%not-a-token%' OR target LIKE '%token%'`).Scan(&leaks); err != nil {
		t.Fatal(err)
	}
	if leaks != 0 {
		t.Error("an audit record holds the sign-in token")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A revision belongs to the project, not to one environment, yet it is what
// every environment of the project runs next: the admins of each see it,
// also when filtering by their environment. Other projects' stay hidden.
func TestEnvironmentAdminsSeeTheirProjectsRevisions(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	prod := s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	s.CreateEnvironment(t, strings.Replace(webtest.MinimalManifest, "hello-world", "other-app", 1), "production")
	s.AddMember(t, prod, "prodadmin@example.test", store.RoleAdmin)
	s.AddMember(t, staging, "stager@example.test", store.RoleAdmin)
	stager := s.SignInAs(t, "stager@example.test", "Stan Stager")
	changed := strings.Replace(webtest.MinimalManifest, "port: 8080", "port: 8081", 1)
	if resp, body := s.PostForm(t, stager, "/projects/hello-world/revisions", url.Values{"manifest": {changed}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("staging admin adds a revision = %d, want 303:\n%s", resp.StatusCode, body)
	}
	prodAdmin := s.SignInAs(t, "prodadmin@example.test", "Prod Admin")
	for _, path := range []string{"/audit", "/audit?environment=hello-world/production", "/audit?action=revision.added"} {
		status, body := s.Get(t, prodAdmin, path)
		if status != http.StatusOK || !strings.Contains(body, "revision.added") || !strings.Contains(body, "Stan Stager") {
			t.Errorf("production admin GET %s = %d without the staging admin's revision", path, status)
		}
		if !strings.Contains(body, `<a href="/projects/hello-world/revisions/2">revision 2</a>`) {
			t.Errorf("production admin GET %s: the revision's row does not link to it", path)
		}
		if strings.Contains(body, "other-app") {
			t.Errorf("production admin GET %s shows another project's events", path)
		}
	}
}

// TestAuditLogFilters filters by person, date range and text, and writes
// times as 2026-11-30 16:35 UTC with the relative time on hover.
func TestAuditLogFilters(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"))
	prod := s.CreateEnvironment(t, "", "production")
	s.AddMember(t, prod, "zed@example.test", store.RoleViewer)
	root := s.SignInAs(t, "root@example.test", "Root")
	s.SignInAs(t, "zed@example.test", "Zed Zebra")
	// The days the events were recorded on (the same one, unless they
	// straddle midnight UTC), from the records themselves.
	var first, last time.Time
	if err := s.DB.Pool.QueryRow(t.Context(), `SELECT min(at), max(at) FROM audit_events WHERE action IN ('member.added', 'sign-in')`).Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	from, to := first.UTC().Format(time.DateOnly), last.UTC().Format(time.DateOnly)
	cases := []struct {
		query      string
		want, skip []string
	}{
		{"person=zebra", []string{"Zed Zebra"}, []string{"member.added"}},
		{"q=zed%40example", []string{"member.added"}, []string{"Root"}},
		{"from=" + from + "&to=" + to, []string{"member.added", "sign-in"}, nil},
		{"to=2001-01-01", nil, []string{"member.added"}},
	}
	for _, tc := range cases {
		status, page := s.Get(t, root, "/audit?"+tc.query)
		if status != http.StatusOK {
			t.Errorf("/audit?%s = %d", tc.query, status)
			continue
		}
		// Only the events' rows, not the filters' options or the top bar.
		_, body, _ := strings.Cut(page, "<tbody>")
		body, _, _ = strings.Cut(body, "</tbody>")
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("/audit?%s lacks %q", tc.query, w)
			}
		}
		for _, w := range tc.skip {
			if strings.Contains(body, w) {
				t.Errorf("/audit?%s shows %q", tc.query, w)
			}
		}
	}
	if status, _ := s.Get(t, root, "/audit?from=yesterday"); status != http.StatusBadRequest {
		t.Errorf("/audit?from=yesterday = %d, want 400", status)
	}
	_, body := s.Get(t, root, "/audit")
	if !regexp.MustCompile(`<time datetime="[^"]+" title="(just now|\d+ minutes? ago)">\d{4}-\d\d-\d\d \d\d:\d\d UTC</time>`).MatchString(body) {
		t.Errorf("audit times are not written as 2026-11-30 16:35 UTC with a relative title")
	}
}

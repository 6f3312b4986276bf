package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

var valueRowName = regexp.MustCompile(`<tr [^>]*data-name="([A-Z0-9_]+)"`)

// TestValuesPagesListTheOrphanedValuesInOrderOnce: with 70 values the
// manifest does not reference, the values pages list the referenced names
// first and then every orphaned one by name, each exactly once across the
// pages; a filter keeps its matches (orphaned among them) and their count;
// the prune button, the environment page and the deploy plan count them
// all, and the plan lists 20 names and links to the others.
func TestValuesPagesListTheOrphanedValuesInOrderOnce(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	admin := s.SignInLocal(t)
	var want []string
	for i := range 70 {
		name := fmt.Sprintf("EXTRA_%03d", 69-i) // set out of order
		form := url.Values{"name": {name}, "value": {"orphan-secret"}, "confirm_orphan": {"1"}}
		if resp, _ := s.PostForm(t, admin, wikiEnv+"/values", form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s: %d", name, resp.StatusCode)
		}
		want = append(want, fmt.Sprintf("EXTRA_%03d", i))
	}
	rows := func(body string) []string {
		var out []string
		for _, m := range valueRowName.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	_, first := s.Get(t, admin, wikiEnv+"/values")
	_, second := s.Get(t, admin, wikiEnv+"/values?page=2")
	all := append(rows(first), rows(second)...)
	if len(rows(first)) != 50 {
		t.Errorf("page 1 lists %d values, want 50", len(rows(first)))
	}
	referenced := slices.IndexFunc(all, func(n string) bool { return strings.HasPrefix(n, "EXTRA_") })
	if referenced < 1 || !slices.Equal(all[referenced:], want) {
		t.Errorf("pages 1 and 2 list %v; want the referenced names, then EXTRA_000 to EXTRA_069 in order, each once", all)
	}
	if strings.Contains(second, `rel="next"`) || !strings.Contains(second, `rel="prev"`) {
		t.Errorf("page 2 (the last) has a next link, or no previous one")
	}
	total := len(all)
	for _, body := range []string{first, second} {
		if !strings.Contains(body, fmt.Sprintf("%d of %d", total, total)) || !strings.Contains(body, "Prune 70 orphaned") {
			t.Errorf("a values page does not count %d of %d values, or offers no prune of the 70 orphaned", total, total)
		}
		if strings.Contains(body, "orphan-secret") {
			t.Errorf("a values page shows a value")
		}
	}
	_, filtered := s.Get(t, admin, wikiEnv+"/values?filter=extra_01")
	if got := rows(filtered); !slices.Equal(got, want[10:20]) || !strings.Contains(filtered, fmt.Sprintf("10 of %d", total)) {
		t.Errorf("?filter=extra_01 lists %v, want EXTRA_010 to EXTRA_019 and 10 of %d", got, total)
	}
	_, history := s.Get(t, admin, wikiEnv+"/values?history=EXTRA_042")
	if got := rows(history); !slices.Equal(got, []string{"EXTRA_042"}) {
		t.Errorf("?history=EXTRA_042 lists %v, want that value alone", got)
	}
	_, envPage := s.Get(t, admin, wikiEnv)
	if !regexp.MustCompile(`>70</span> stored but no longer referenced`).MatchString(envPage) {
		t.Errorf("the environment page does not count 70 orphaned values")
	}
	_, plan := s.Get(t, admin, wikiEnv+"/deploys/new")
	if n := strings.Count(plan, "<code>EXTRA_"); n != 20 || !strings.Contains(plan, "and 50 more on the values page") {
		i := max(0, strings.Index(plan, "Orphaned values"))
		t.Errorf("the deploy plan lists %d orphaned names (want 20) or does not link to the 50 others: %s", n, plan[i:min(len(plan), i+600)])
	}
}

// TestBackupsPageListsOlderSnapshotsAPageAtATime: with 60 snapshot rows
// (skipped fires here), the backups page lists the newest 25 and an Older
// link; following it shows exactly the next 25, then the last 10 with no
// Older link and a way back to the newest.
func TestBackupsPageListsOlderSnapshotsAPageAtATime(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	root := s.SignInLocal(t)
	env := s.CreateEnvironment(t, backupWebManifest, "production")
	// Skipped fires, one a minute (rows as a schedule that could not
	// snapshot writes them).
	if _, err := s.DB.Pool.Exec(t.Context(), `INSERT INTO backups (environment_id, origin, scheduled_at, skipped)
		SELECT $1, 'scheduled', timestamptz '2026-01-01' + make_interval(mins => i), 'skip ' || lpad(i::text, 2, '0')
		FROM generate_series(1, 60) AS i`, env.ID); err != nil {
		t.Fatal(err)
	}
	skip := regexp.MustCompile(`skip (\d\d)`)
	listed := func(body string) []string {
		var out []string
		for _, m := range skip.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	older := regexp.MustCompile(`href="([^"]+)" data-testid="older"`)
	page := "/projects/vault/environments/production/backups"
	var seen []string
	for n, want := range []int{25, 25, 10} {
		status, body := s.Get(t, root, page)
		if status != http.StatusOK {
			t.Fatalf("page %d: %d", n+1, status)
		}
		got := listed(body)
		if len(got) != want {
			t.Errorf("page %d lists %d snapshots, want %d", n+1, len(got), want)
		}
		seen = append(seen, got...)
		if n > 0 && !strings.Contains(body, `data-testid="newest"`) {
			t.Errorf("page %d has no link to the newest snapshots", n+1)
		}
		m := older.FindStringSubmatch(body)
		if n == 2 {
			if m != nil {
				t.Errorf("the last page links to older snapshots")
			}
			break
		}
		if m == nil {
			t.Fatalf("page %d has no Older link", n+1)
		}
		page = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	var want []string
	for i := 60; i >= 1; i-- {
		want = append(want, fmt.Sprintf("%02d", i))
	}
	if !slices.Equal(seen, want) {
		t.Errorf("the pages list %v, want 60 to 01, newest first, each once", seen)
	}
}

// TestHomeCardShowsTheFirstEnvironmentsAndCountsTheOthers: a project of 11
// environments, of which a member sees 10, shows the first 8 by name on the
// home page's card and "+2 more" (only what the member may see counted);
// an admin sees "+3 more".
func TestHomeCardShowsTheFirstEnvironmentsAndCountsTheOthers(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"))
	var names []string
	for i := range 11 {
		name := fmt.Sprintf("env-%02d", 10-i)
		env := s.CreateEnvironment(t, "", name)
		if name != "env-00" {
			s.AddMember(t, env, "dev@example.test", "viewer")
		}
		names = append(names, name)
	}
	slices.Sort(names)
	chips := regexp.MustCompile(`data-env="([a-z0-9-]+)" data-env-status`)
	shown := func(body string) []string {
		var out []string
		for _, m := range chips.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	_, home := s.Get(t, s.SignInAs(t, "root@example.test", "Root"), "/")
	if got := shown(home); !slices.Equal(got, names[:8]) || !strings.Contains(home, "+3 more") {
		t.Errorf("an admin's card shows %v and no +3 more; want %v", got, names[:8])
	}
	_, home = s.Get(t, s.SignInAs(t, "dev@example.test", "Dev"), "/")
	if got := shown(home); !slices.Equal(got, names[1:9]) || !strings.Contains(home, "+2 more") {
		t.Errorf("a member's card shows %v and no +2 more; want %v", got, names[1:9])
	}
}

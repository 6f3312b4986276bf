package web_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

const envPath = "/projects/team-wiki/environments/production"

// wikiServer starts a Studio with the production-shaped example as project
// team-wiki and its production environment.
func wikiServer(t *testing.T) (*webtest.Server, *store.Environment) {
	t.Helper()
	s := webtest.Start(t, webtest.WithValueKeys())
	env := s.CreateEnvironment(t, exampleManifest(t, "production"), "production")
	return s, env
}

func TestEveryProjectAndValueActionByRole(t *testing.T) {
	t.Parallel()
	s, env := wikiServer(t)
	s.AddMember(t, env, "viewer@example.com", store.RoleViewer)
	s.AddMember(t, env, "deployer@example.com", store.RoleDeployer)
	s.AddMember(t, env, "admin@example.com", store.RoleAdmin)
	clients := map[string]*http.Client{
		"viewer":        s.SignInAs(t, "viewer@example.com", "Vera Viewer"),
		"deployer":      s.SignInAs(t, "deployer@example.com", "Dan Deployer"),
		"env admin":     s.SignInAs(t, "admin@example.com", "Ada Admin"),
		"outsider":      s.SignInAs(t, "outsider@example.com", "Otto Outsider"),
		"install admin": s.SignInLocal(t),
	}
	manifest := exampleManifest(t, "production")
	changed := strings.Replace(manifest, "min: 2\n        max: 5", "min: 3\n        max: 5", 1)
	type action struct {
		name   string
		method string
		path   string
		form   url.Values
		// want is the status per role; roles not listed answer 403.
		want map[string]int
	}
	readers := map[string]int{"viewer": 200, "deployer": 200, "env admin": 200, "install admin": 200}
	writers := map[string]int{"env admin": 303, "install admin": 303}
	installAdmin := func(status int) map[string]int { return map[string]int{"install admin": status} }
	for _, a := range []action{
		{"new project page", "GET", "/projects/new", nil, installAdmin(200)},
		{"create project", "POST", "/projects", url.Values{"manifest": {strings.Replace(manifest, "team-wiki", "wiki-%s", 1)}}, installAdmin(303)},
		{"project page", "GET", "/projects/team-wiki", nil, readers},
		// Deployers add revisions too (from CI: studio deploy --manifest).
		{"new revision page", "GET", "/projects/team-wiki/revisions/new", nil, map[string]int{"deployer": 200, "env admin": 200, "install admin": 200}},
		{"add revision", "POST", "/projects/team-wiki/revisions", url.Values{"manifest": {changed}}, map[string]int{"deployer": 303, "env admin": 303, "install admin": 303}},
		{"create environment", "POST", "/projects/team-wiki/environments", url.Values{"name": {"env-%s"}}, installAdmin(303)},
		{"environment page", "GET", envPath, nil, readers},
		{"values page", "GET", envPath + "/values", nil, readers},
		{"set value", "POST", envPath + "/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"wiki.example.com"}}, writers},
		{"import", "POST", envPath + "/values/import", url.Values{"dotenv": {"SESSION_SECRET=abc\nORPHAN_%s=1\n"}}, writers},
		{"set orphan", "POST", envPath + "/values", url.Values{"name": {"ORPHAN_%s"}, "value": {"x"}, "confirm_orphan": {"1"}}, writers},
		{"delete page", "GET", envPath + "/values/APP_DOMAIN/delete", nil, map[string]int{"env admin": 200, "install admin": 200}},
		{"prune page", "GET", envPath + "/values/prune", nil, map[string]int{"env admin": 200, "install admin": 200}},
		{"prune", "POST", envPath + "/values/prune", url.Values{"names": {"ORPHAN_%s"}}, writers},
		{"delete", "POST", envPath + "/values/APP_DOMAIN/delete", nil, writers},
	} {
		for _, role := range []string{"outsider", "viewer", "deployer", "env admin", "install admin"} {
			t.Run(a.name+"/"+role, func(t *testing.T) {
				want, ok := a.want[role]
				if !ok {
					want = http.StatusForbidden
				}
				suffix := strings.ReplaceAll(strings.ToLower(role), " ", "-")
				form := url.Values{}
				for k, vs := range a.form {
					for _, v := range vs {
						if strings.Contains(v, "%s") {
							v = fmt.Sprintf(v, suffix)
							if k == "names" || k == "name" && strings.HasPrefix(v, "ORPHAN") {
								v = strings.ToUpper(strings.ReplaceAll(v, "-", "_"))
							}
						}
						if k == "dotenv" {
							v = strings.ToUpper(strings.ReplaceAll(v, "-", "_"))
						}
						form.Add(k, v)
					}
				}
				c := clients[role]
				if a.name == "delete" && want == 303 {
					// Each role that may delete needs something to delete.
					s.PostForm(t, clients["install admin"], envPath+"/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"x"}})
				}
				var status int
				if a.method == "GET" {
					status, _ = s.Get(t, c, a.path)
				} else {
					resp, body := s.PostForm(t, c, a.path, form)
					status = resp.StatusCode
					if status != want {
						t.Logf("page: %.400s", body)
					}
				}
				if status != want {
					t.Errorf("%s %s as %s: status %d, want %d", a.method, a.path, role, status, want)
				}
			})
		}
	}
}

func TestValueFormsReRenderWithErrors(t *testing.T) {
	t.Parallel()
	s, _ := wikiServer(t)
	c := s.SignInLocal(t)
	for _, tc := range []struct {
		form url.Values
		path string
		want string
	}{
		{url.Values{"name": {"lower_case"}, "value": {"v"}}, "/values", "Use capital letters"},
		{url.Values{"name": {""}, "value": {"v"}}, "/values", "Enter the name"},
		{url.Values{"dotenv": {"A=1\nA=2\n"}}, "/values/import", "A is set on lines 1 and 2"},
		{url.Values{"dotenv": {"not a line\n"}}, "/values/import", "Line 1: expected NAME=value"},
	} {
		resp, body := s.PostForm(t, c, envPath+tc.path, tc.form)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s: status %d, want 422 with %q", tc.path, resp.StatusCode, tc.want)
		}
	}
	// An empty value is a real value.
	resp, _ := s.PostForm(t, c, envPath+"/values", url.Values{"name": {"SESSION_SECRET"}, "value": {""}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("empty value: status %d", resp.StatusCode)
	}
	_, page := s.Get(t, c, envPath+"/values")
	if !strings.Contains(page, "required · set") {
		t.Error("an empty value does not count as set")
	}
	// The same manifest again is recognised as unchanged.
	resp, _ = s.PostForm(t, c, "/projects/team-wiki/revisions", url.Values{"manifest": {exampleManifest(t, "production") + "\n# a comment\n"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("same manifest: status %d", resp.StatusCode)
	}
	_, page = s.Get(t, c, "/projects/team-wiki")
	if !strings.Contains(page, "Unchanged") {
		t.Error("an unchanged manifest is not called unchanged")
	}
	// A broken manifest shows diagnostics with lines and stores nothing.
	resp, body := s.PostForm(t, c, "/projects", url.Values{"manifest": {"name: Bad Name\napplications: 3\n"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `id="L1"`) || !strings.Contains(body, "Diagnostics") {
		t.Errorf("invalid manifest: status %d, want 422 with diagnostics at lines", resp.StatusCode)
	}
}

// TestNoPlaintextLeaks sets many random values through the pages, then
// looks for each of them in a dump of the database, every page, the logs
// and the audit table. Failure messages name values by number only.
func TestNoPlaintextLeaks(t *testing.T) {
	t.Parallel()
	s, env := wikiServer(t)
	s.ActivateRevision(t, "team-wiki", "production", 1) // its hostnames are shown, and searched
	s.AddMember(t, env, "viewer@example.com", store.RoleViewer)
	admin := s.SignInLocal(t)
	viewer := s.SignInAs(t, "viewer@example.com", "Vera Viewer")
	var secrets []string
	random := func() string {
		b := make([]byte, 18)
		_, _ = rand.Read(b)
		return "pt-" + base64.RawURLEncoding.EncodeToString(b)
	}
	// APP_DOMAIN is a hostname, public by design: it is not one of the secrets.
	s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"wiki.example.com"}})
	for i := 0; i < 40; i++ {
		v := random()
		secrets = append(secrets, v)
		s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"SESSION_SECRET"}, "value": {v}})
	}
	for i := 0; i < 20; i++ {
		a, b := random(), random()
		secrets = append(secrets, a, b)
		dotenv := fmt.Sprintf("SESSION_SECRET=%q\nexport UNREFERENCED_%d='%s'\n", a, i, b)
		s.PostForm(t, admin, envPath+"/values/import", url.Values{"dotenv": {dotenv}})
	}
	// Failures must not echo either: bad names, a broken import, duplicates.
	for i := 0; i < 10; i++ {
		v := random()
		secrets = append(secrets, v)
		s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"bad name"}, "value": {v}})
		s.PostForm(t, admin, envPath+"/values/import", url.Values{"dotenv": {"A=\"" + v + "\nB=1"}})
		s.PostForm(t, admin, envPath+"/values/import", url.Values{"dotenv": {v + "\n"}})
		s.PostForm(t, admin, envPath+"/values/import", url.Values{"dotenv": {"SESSION_SECRET=" + v + "\nSESSION_SECRET=" + v + "\n"}})
	}
	s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"ORPHANED_ONE"}, "value": {secrets[0]}})

	var haystacks []struct{ where, text string }
	add := func(where, text string) { haystacks = append(haystacks, struct{ where, text string }{where, text}) }
	for _, p := range []string{"/", "/projects/team-wiki", envPath, envPath + "/values", envPath + "/values/prune",
		envPath + "/values/SESSION_SECRET/delete", "/audit"} {
		for who, c := range map[string]*http.Client{"admin": admin, "viewer": viewer} {
			_, body := s.Get(t, c, p)
			add("page "+p+" as "+who, body)
		}
	}
	add("logs", s.Logs.String())
	var audit strings.Builder
	rows, err := s.DB.Pool.Query(context.Background(), `SELECT action, target, detail::text, actor FROM audit_events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a, b, c, d string
		_ = rows.Scan(&a, &b, &c, &d)
		audit.WriteString(a + b + c + d + "\n")
	}
	add("audit table", audit.String())
	add("database dump", dumpDatabase(t, s))

	for i, secret := range secrets {
		for _, h := range haystacks {
			if strings.Contains(h.text, secret) {
				t.Errorf("value #%d found in %s", i, h.where)
			}
		}
	}
	// The search can find things: the public hostname is on the environment
	// page and the last imported value did arrive (as ciphertext only).
	if !strings.Contains(haystacks[4].text+haystacks[5].text, "wiki.example.com") {
		t.Error("the environment page does not show the resolved hostname; is the search looking at the right pages?")
	}
	var version int
	_ = s.DB.Pool.QueryRow(context.Background(), `SELECT version FROM environment_values WHERE environment_id = $1 AND name = 'SESSION_SECRET'`, env.ID).Scan(&version)
	if version != 60 {
		t.Errorf("SESSION_SECRET is at version %d, want 60 (40 sets and 20 imports)", version)
	}
}

// dumpDatabase returns a plain-text dump of the test database: pg_dump when
// its major version can dump the server, COPY of every table otherwise.
func dumpDatabase(t *testing.T, s *webtest.Server) string {
	t.Helper()
	ctx := context.Background()
	cfg := s.DB.Pool.Config().ConnConfig
	if path, err := exec.LookPath("pg_dump"); err == nil {
		cmd := exec.Command(path, "--data-only", "--no-owner", "-h", cfg.Host, "-p", fmt.Sprint(cfg.Port), "-U", cfg.User, cfg.Database)
		cmd.Env = append(os.Environ(), "PGPASSWORD="+cfg.Password)
		out, err := cmd.Output()
		if err == nil && len(out) > 0 {
			t.Logf("searched a pg_dump of %d bytes", len(out))
			return string(out)
		}
		t.Logf("pg_dump could not dump this server (%v); dumping every table with COPY", err)
	}
	conn, err := s.DB.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	var out strings.Builder
	for _, table := range tables {
		var buf strings.Builder
		if _, err := conn.Conn().PgConn().CopyTo(ctx, &writer{&buf}, "COPY "+table+" TO STDOUT"); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
		out.WriteString(buf.String())
	}
	t.Logf("searched a COPY dump of %d tables, %d bytes", len(tables), out.Len())
	return out.String()
}

type writer struct{ b *strings.Builder }

func (w *writer) Write(p []byte) (int, error) { return w.b.Write(p) }

// TestPrunePageShowsThePendingFlash: the prune page consumes a pending
// flash message once, and shows it.
func TestPrunePageShowsThePendingFlash(t *testing.T) {
	t.Parallel()
	s, _ := wikiServer(t)
	c := s.SignInLocal(t)
	if resp, _ := s.PostForm(t, c, envPath+"/values", url.Values{"name": {"OLD_SETTING"}, "value": {"x"}, "confirm_orphan": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set value: status %d, want 303", resp.StatusCode)
	}
	status, body := s.Get(t, c, envPath+"/values/prune")
	if status != http.StatusOK {
		t.Fatalf("prune page: status %d, want 200", status)
	}
	if !strings.Contains(body, "Saved OLD_SETTING as version 1.") {
		t.Error("prune page does not show the flash message of the value just saved")
	}
	if !strings.Contains(body, "OLD_SETTING") {
		t.Error("prune page does not list the orphaned OLD_SETTING")
	}
}

// A revision can name any value in a route domain. Even for the revision
// deployed in the environment, the environment page shows a resolved
// domain only when it is a hostname; a secret placed there,
// by mistake or by someone who may add revisions but not read values, is
// withheld.
func TestSecretPutInARouteDomainIsNotShown(t *testing.T) {
	t.Parallel()
	s, env := wikiServer(t)
	s.AddMember(t, env, "eve@example.com", store.RoleViewer)
	admin := s.SignInLocal(t)
	const password, token = "S3cr3t!Pass#word", "d41d8cd98f00b204e980"
	for name, v := range map[string]string{"SESSION_SECRET": password, "APP_DOMAIN": token} {
		if resp, _ := s.PostForm(t, admin, envPath+"/values", url.Values{"name": {name}, "value": {v}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("set %s = %d, want 303", name, resp.StatusCode)
		}
	}
	manifest := strings.Replace(exampleManifest(t, "production"), `domain: "${APP_DOMAIN}"`,
		`domain: "x${SESSION_SECRET}"`+"\n        aliases: [\"${APP_DOMAIN}\", \"www.example.com\"]", 1)
	if resp, body := s.PostForm(t, admin, "/projects/team-wiki/revisions", url.Values{"manifest": {manifest}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add revision = %d, want 303:\n%s", resp.StatusCode, body)
	}
	// Deployed: only an active revision's hostnames are ever resolved.
	s.ActivateRevision(t, "team-wiki", "production", 2)
	eve := s.SignInAs(t, "eve@example.com", "Eve")
	status, page := s.Get(t, eve, envPath)
	if status != http.StatusOK {
		t.Fatalf("environment page = %d, want 200", status)
	}
	if strings.Contains(page, password) || strings.Contains(page, token) {
		t.Fatal("the environment page shows a value that is not a hostname")
	}
	if strings.Count(page, "not a hostname") != 2 || !strings.Contains(page, "www.example.com") {
		t.Errorf("want both expressions marked %q and the literal alias shown", "not a hostname")
	}
}

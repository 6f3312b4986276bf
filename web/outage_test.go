package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/store/storetest"
	"github.com/skali-dev/studio/web"
	"github.com/skali-dev/studio/web/webtest"
)

// outageSentence is what every answer given during a database outage says.
const outageSentence = "The database cannot be reached right now. Nothing was changed by this request unless it says otherwise; try again in a few seconds."

// databaseOutage cuts the Studio off its database for real, as a database
// server that goes away would: the test's database stops accepting
// connections (ALTER DATABASE ... ALLOW_CONNECTIONS false) and every
// connection open to it is ended by the server (pg_terminate_backend,
// waiting until each is gone), so the pool's connections break and new
// ones are refused. The returned function ends the outage; it also ends
// when the test does.
func databaseOutage(t *testing.T, s *webtest.Server) (end func()) {
	t.Helper()
	var name string
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	storetest.Exec(t, `ALTER DATABASE `+ident+` WITH ALLOW_CONNECTIONS false`)
	// The database's name is the test helper's own (letters, digits, _).
	// Statements waiting for a lock go first: ending the connection that
	// holds the lock first would let them finish.
	storetest.Exec(t, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = '`+name+`' AND wait_event_type = 'Lock'`)
	storetest.Exec(t, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = '`+name+`'`)
	ended := false
	end = func() {
		if !ended {
			ended = true
			storetest.Exec(t, `ALTER DATABASE `+ident+` WITH ALLOW_CONNECTIONS true`)
		}
	}
	t.Cleanup(end)
	return end
}

// checkOutageAnswer checks an answer given during the outage: 503, a
// Retry-After, and the sentence.
func checkOutageAnswer(t *testing.T, what string, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("%s during the outage = %d, want 503:\n%s", what, resp.StatusCode, pageMain(body))
		return
	}
	if got := resp.Header.Get("Retry-After"); got != "5" {
		t.Errorf("%s during the outage: Retry-After %q, want \"5\"", what, got)
	}
	if !strings.Contains(body, outageSentence) {
		t.Errorf("%s during the outage: the page lacks the sentence %q:\n%s", what, outageSentence, pageMain(body))
	}
}

// TestDatabaseOutageAnswers503 stops the database under a running Studio:
// every page and post of a signed-in person answers 503 with Retry-After
// and one calm sentence (never 500, never a sign-in redirect), nothing is
// changed, the Studio keeps serving, and once the database is back the same
// requests work again.
func TestDatabaseOutageAnswers503(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	s.CreateEnvironment(t, "", "production")
	admin := s.SignInLocal(t)
	const envPath = "/projects/hello-world/environments/production"
	if resp, _ := s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"one.example.test"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set a value before the outage: %d", resp.StatusCode)
	}
	// A sign-in link made before the outage, used during it.
	link := s.LocalLoginURL(t)

	pages := []string{"/", "/projects/hello-world", envPath, envPath + "/values", envPath + "/runs",
		envPath + "/members", "/projects/hello-world/revisions/1", "/audit", "/admin"}
	posts := []struct {
		path string
		form url.Values
	}{
		{envPath + "/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"two.example.test"}}},
		{envPath + "/values/import", url.Values{"dotenv": {"APP_DOMAIN=three.example.test\n"}}},
		{"/projects/hello-world/environments", url.Values{"name": {"staging"}}},
		{envPath + "/members", url.Values{"email": {"ada@example.test"}, "role": {"viewer"}}},
		{"/logout", nil},
	}
	get := func(c *http.Client, path string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Get(s.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, p := range pages {
		if resp, body := get(admin, p); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s before the outage = %d:\n%s", p, resp.StatusCode, pageMain(body))
		}
	}

	end := databaseOutage(t, s)
	for _, p := range pages {
		resp, body := get(admin, p)
		checkOutageAnswer(t, "GET "+p, resp, body)
		if resp.StatusCode == http.StatusServiceUnavailable && !strings.Contains(body, `href="`+p+`"`) {
			t.Errorf("GET %s during the outage: the page offers no way to try the same address again:\n%s", p, pageMain(body))
		}
	}
	for _, p := range posts {
		resp, body := s.PostForm(t, admin, p.path, p.form)
		checkOutageAnswer(t, "POST "+p.path, resp, body)
	}
	resp, body := get(s.NewClient(), strings.TrimPrefix(link, s.URL))
	checkOutageAnswer(t, "the sign-in link", resp, body)
	if _, resp, _ := s.DialStream(t, admin, envPath+"/events", nil); resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("event stream handshake during the outage: %v, want 503", resp)
	}
	if status, _ := s.Get(t, admin, "/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz during the outage = %d, want 503", status)
	}
	if status, _ := s.Get(t, admin, "/healthz"); status != http.StatusOK {
		t.Errorf("GET /healthz during the outage = %d, want 200 (the process is alive)", status)
	}
	// Someone not signed in still gets the sign-in page: it needs no database.
	if status, body := s.Get(t, s.NewClient(), "/login"); status != http.StatusOK {
		t.Errorf("GET /login without a session during the outage = %d:\n%s", status, pageMain(body))
	}

	end()
	for _, p := range pages {
		if resp, body := get(admin, p); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s after the outage = %d, want 200:\n%s", p, resp.StatusCode, pageMain(body))
		}
	}
	// Nothing posted during the outage was stored: the next version of the
	// value is 2, and the sign-in link was not used up.
	resp, _ = s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"APP_DOMAIN"}, "value": {"four.example.test"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("set a value after the outage: %d, want 303", resp.StatusCode)
	}
	if _, page := s.Get(t, admin, envPath+"/values"); !strings.Contains(page, "Saved APP_DOMAIN as version 2.") {
		t.Errorf("after the outage, the value's next version is not 2:\n%s", pageMain(page))
	}
	if _, page := s.Get(t, admin, "/projects/hello-world"); strings.Contains(page, `href="/projects/hello-world/environments/staging"`) {
		t.Errorf("the environment posted during the outage exists:\n%s", pageMain(page))
	}
	if resp, _ := get(s.NewClient(), strings.TrimPrefix(link, s.URL)); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the sign-in link tried during the outage, used after it = %d, want 303", resp.StatusCode)
	}
	for line := range strings.Lines(s.Logs.String()) {
		if strings.Contains(line, "status=500") {
			t.Errorf("a request answered 500: %s", line)
		}
	}
}

// holdTable takes a lock on table in mode on a connection of its own, so
// that the Studio's statements needing a conflicting lock wait, and returns
// a function that waits until one of the Studio's statements on the table
// is waiting for it. The outage ends the connection and with it the lock.
func holdTable(t *testing.T, s *webtest.Server, table, mode string) (waitForBlocked func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, s.DB.Pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN `+mode+` MODE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			var n int
			err := s.DB.Pool.QueryRow(ctx, `
				SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%' || $1 || '%'`,
				table).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no statement of the Studio waited for the lock on %s", table)
	}
}

// postInBackground posts form to path as c, from the Studio's own origin,
// and delivers the answer on the returned channel.
func postInBackground(s *webtest.Server, c *http.Client, path string, form url.Values) <-chan *http.Response {
	out := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.URL)
		resp, err := c.Do(req)
		if err != nil {
			out <- nil
			return
		}
		resp.Body.Close()
		out <- resp
	}()
	return out
}

// TestPostThatCommittedAnswersAsCommitted cuts the database off between an
// import's commit and the saving of the session that follows it (the
// session table is held, so the save waits; then the outage ends the
// waiting statement): the import answers as a committed import does, 303
// to the values page, not 500; that page answers 503 while the outage
// lasts, and shows the imported value once it ends.
func TestPostThatCommittedAnswersAsCommitted(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t, webtest.WithValueKeys())
	env := s.CreateEnvironment(t, "", "production")
	admin := s.SignInLocal(t)
	const envPath = "/projects/hello-world/environments/production"
	ctx := context.Background()

	// SHARE mode lets the session be read and the import commit, and
	// makes the session's save wait.
	waitForBlocked := holdTable(t, s, "sessions", "SHARE")
	answer := postInBackground(s, admin, envPath+"/values/import", url.Values{"dotenv": {"APP_DOMAIN=imported.example.test\n"}})
	waitForBlocked()
	stored, err := s.DB.StoredValues(ctx, env.ID)
	if err != nil || len(stored) != 1 || stored[0].Name != "APP_DOMAIN" || stored[0].Version != 1 {
		t.Fatalf("while the session's save waits, the import has not committed: %v %v", stored, err)
	}
	end := databaseOutage(t, s)
	var resp *http.Response
	select {
	case resp = <-answer:
	case <-time.After(20 * time.Second):
		t.Fatal("the import never answered")
	}
	if resp == nil {
		t.Fatal("the import's connection failed instead of answering")
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != envPath+"/values" {
		t.Fatalf("the committed import answered %d (Location %q), want 303 to %s/values", resp.StatusCode, resp.Header.Get("Location"), envPath)
	}
	if status, _ := s.Get(t, admin, envPath+"/values"); status != http.StatusServiceUnavailable {
		t.Errorf("the values page during the outage = %d, want 503", status)
	}
	if !strings.Contains(s.Logs.String(), "the change stands") {
		t.Error("the lost session save after a committed change was not logged")
	}
	end()
	status, page := s.Get(t, admin, envPath+"/values")
	if status != http.StatusOK || !regexp.MustCompile(`data-name="APP_DOMAIN"[^<]*>[\s\S]*?>\s*v1\s*<`).MatchString(page) {
		t.Errorf("the values page after the outage = %d, want 200 listing APP_DOMAIN at v1:\n%s", status, pageMain(page))
	}
	stored, err = s.DB.StoredValues(ctx, env.ID)
	if err != nil || len(stored) != 1 || stored[0].Version != 1 {
		t.Errorf("after the outage: %v %v, want APP_DOMAIN at version 1", stored, err)
	}
}

// TestSignedInUserUnreadableDuringOutage cuts the database off while the
// request reads the signed-in person (their session loaded already): the
// answer is 503, not the sign-in page a missing user would get.
func TestSignedInUserUnreadableDuringOutage(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	admin := s.SignInLocal(t)
	waitForBlocked := holdTable(t, s, "users", "ACCESS EXCLUSIVE")
	answer := make(chan *http.Response, 1)
	go func() {
		resp, err := admin.Get(s.URL + "/")
		if err != nil {
			answer <- nil
			return
		}
		resp.Body.Close()
		answer <- resp
	}()
	waitForBlocked()
	databaseOutage(t, s)
	select {
	case resp := <-answer:
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("GET / when the signed-in user cannot be read: %v, want 503", resp)
		}
		if got := resp.Header.Get("Retry-After"); got != "5" {
			t.Errorf("Retry-After %q, want \"5\"", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("GET / never answered")
	}
}

// TestMetricsDuringOutage: while the database cannot be reached, a scrape
// still answers 200 with the metrics that need no database, and the run
// queue's depth says it is unknown (-1).
func TestMetricsDuringOutage(t *testing.T) {
	t.Parallel()
	var metrics *web.Metrics
	s := webtest.Start(t, func(d *web.Deps) {
		metrics = web.NewMetrics(d.DB)
		d.Metrics = metrics
	})
	databaseOutage(t, s)
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape during the outage = %d, want 200:\n%s", rec.Code, body)
	}
	for _, want := range []string{"go_goroutines", "studio_run_queue_depth -1"} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape during the outage lacks %s", want)
		}
	}
}

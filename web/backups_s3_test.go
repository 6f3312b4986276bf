package web_test

import (
	"net"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
	"github.com/skali-dev/studio/web/webtest"
)

// s3TargetForm is the admin page's form for srv's bucket.
func s3TargetForm(srv *s3test.Server, bucket string) url.Values {
	return url.Values{"target": {"s3://" + bucket + "/studio"}, "endpoint": {srv.Endpoint}, "region": {srv.Region},
		"path_style": {"1"}, "access_key": {srv.Access}, "secret_key": {srv.Secret}}
}

// The S3 target through the admin page: refusals beside their field with
// nothing saved, a save, the keys shown as set and never again, a
// snapshot in the bucket, and the keys found in no page, log line, run
// log or audit record.
func TestBackupsS3TargetThroughTheAdminPage(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t, "backups")
	s := webtest.Start(t, webtest.WithDeploys(&webtest.Deploys{}))
	root := s.SignInLocal(t)
	s.CreateEnvironment(t, backupWebManifest, "production")
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + closed.Addr().String()
	closed.Close()

	const wrongSecret = "wrong-secret-4f9c2e7a1b"
	for _, c := range []struct {
		name, field, say string
		edit             func(url.Values)
	}{
		{"wrong secret key", "secret_key", "the secret key is wrong", func(v url.Values) { v.Set("secret_key", wrongSecret) }},
		{"missing bucket", "target", "does not exist", func(v url.Values) { v.Set("target", "s3://nothing-here/studio") }},
		{"unreachable endpoint", "endpoint", "cannot be reached", func(v url.Values) { v.Set("endpoint", dead) }},
	} {
		form := s3TargetForm(srv, "backups")
		c.edit(form)
		resp, body := s.PostForm(t, root, "/admin/backup-target", form)
		marked := regexp.MustCompile(`id="` + c.field + `"[^>]*aria-invalid="true"`)
		if resp.StatusCode != 422 || !marked.MatchString(body) || !strings.Contains(body, c.say) {
			t.Fatalf("%s: %d, want 422 with %q at %s\n%s", c.name, resp.StatusCode, c.say, c.field, pageMain(body))
		}
		if strings.Contains(body, wrongSecret) || strings.Contains(body, srv.Secret) || strings.Contains(body, srv.Access) {
			t.Fatalf("%s: the page shows a key again", c.name)
		}
		if got, _ := s.DB.BackupTarget(t.Context()); got != "" {
			t.Fatalf("%s: a refused target was stored: %q", c.name, got)
		}
	}

	if resp, body := s.PostForm(t, root, "/admin/backup-target", s3TargetForm(srv, "backups")); resp.StatusCode != 303 || resp.Header.Get("Location") != "/admin" {
		t.Fatalf("save: %d\n%s", resp.StatusCode, pageMain(body))
	}
	_, admin := s.Get(t, root, "/admin")
	for _, want := range []string{`value="s3://backups/studio"`, `value="` + srv.Endpoint + `"`, `data-testid="secret_key-set"`, `data-testid="access_key-set"`,
		`name="path_style" value="1" checked`} {
		if !strings.Contains(admin, want) {
			t.Fatalf("the admin page lacks %s\n%s", want, pageMain(admin))
		}
	}
	if strings.Contains(admin, `data-testid="target-problem"`) {
		t.Fatalf("the saved target reads as a problem:\n%s", pageMain(admin))
	}
	// Saved again with the key fields left empty: the stored keys are kept.
	keep := s3TargetForm(srv, "backups")
	keep.Del("access_key")
	keep.Del("secret_key")
	if resp, body := s.PostForm(t, root, "/admin/backup-target", keep); resp.StatusCode != 303 {
		t.Fatalf("save keeping the keys: %d\n%s", resp.StatusCode, pageMain(body))
	}

	s.ActivateRevision(t, "vault", "production", 1)
	const page = "/projects/vault/environments/production/backups"
	resp, _ := s.PostForm(t, root, page, nil)
	runPath := resp.Header.Get("Location")
	if resp.StatusCode != 303 || !strings.Contains(runPath, "/runs/") {
		t.Fatalf("manual backup: %d %s", resp.StatusCode, runPath)
	}
	run := waitForRun(t, s, root, runPath)
	if m := runStatus.FindStringSubmatch(run); m[1] != "succeeded" {
		t.Fatalf("backup run %v\n%s", m[1:], pageMain(run))
	}
	if objs := srv.Objects(t, "backups", "studio/vault/production/"); len(objs) != 1 {
		t.Fatalf("objects of the snapshot: %v", objs)
	}
	_, backups := s.Get(t, root, page)

	// The keys are nowhere a person or an operator reads.
	var audit, runLogs string
	s.DB.Pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(action || ' ' || coalesce(target, '') || ' ' || coalesce(detail::text, ''), E'\n'), '') FROM audit_events`).Scan(&audit)
	s.DB.Pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(text, E'\n'), '') FROM run_log_lines`).Scan(&runLogs)
	if !strings.Contains(audit, "backup.target-set s3://backups/studio") {
		t.Fatalf("no audit record of the target:\n%s", audit)
	}
	for where, text := range map[string]string{"the admin page": admin, "the backups page": backups, "the run page": run,
		"the logs": s.Logs.String(), "the audit records": audit, "the run logs": runLogs} {
		for what, key := range map[string]string{"secret key": srv.Secret, "access key": srv.Access, "wrong secret key": wrongSecret} {
			if strings.Contains(text, key) {
				t.Errorf("the %s is in %s", what, where)
			}
		}
	}
}

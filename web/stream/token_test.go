package stream_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestRunEventStreamAcceptsAnAPIToken: `studio runs watch` follows a run
// with a bearer token, no cookie: a token with viewer on staging follows a
// staging run, is refused production's (outside its scope) and is refused
// once revoked; an unknown token is refused with 401.
func TestRunEventStreamAcceptsAnAPIToken(t *testing.T) {
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"))
	prod := s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	s.AddMember(t, prod, "ci@example.test", store.RoleAdmin)
	s.AddMember(t, staging, "ci@example.test", store.RoleViewer)
	ci := s.SignInAs(t, "ci@example.test", "CI Person")
	id, secret := s.CreateToken(t, ci, "watcher", "", "hello-world/staging:viewer")

	stagingRun := s.CreateRun(t, staging, "deploy")
	prodRun := s.CreateRun(t, prod, "deploy")
	s.AppendRunEvent(t, stagingRun, "running", 0)
	bearer := http.Header{"Authorization": {"Bearer " + secret}}
	path := func(env string, run int64) string {
		return fmt.Sprintf("/projects/hello-world/environments/%s/runs/%d/events?after=0", env, run)
	}

	conn, resp, err := s.DialStream(t, nil, path("staging", stagingRun), bearer)
	if err != nil {
		t.Fatalf("a staging viewer token dials a staging run: %v (status %v)", err, resp)
	}
	if f := webtest.ReadFrame(t, conn); f.Seq != 1 || f.Run.Status != "running" {
		t.Fatalf("first frame %+v, want seq 1: run running", f)
	}
	s.AppendRunEvent(t, stagingRun, "succeeded", 0)
	if f := webtest.ReadFrame(t, conn); f.Seq != 2 || f.Run.Status != "succeeded" {
		t.Fatalf("live frame %+v, want seq 2: run succeeded", f)
	}

	// Production is outside the token's scope, though its owner is admin there.
	if _, resp, err := s.DialStream(t, nil, path("production", prodRun), bearer); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a staging token dials a production run: status %v, want 403", statusOf(resp))
	}
	// Neither a token nor a cookie: 401, as before.
	if _, resp, err := s.DialStream(t, nil, path("staging", stagingRun), nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no credentials: status %v, want 401", statusOf(resp))
	}
	unknown := http.Header{"Authorization": {"Bearer skst_" + strings.Repeat("x", 40)}}
	if _, resp, err := s.DialStream(t, nil, path("staging", stagingRun), unknown); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unknown token: status %v, want 401", statusOf(resp))
	}
	if resp, _ := s.PostForm(t, ci, fmt.Sprintf("/tokens/%d/revoke", id), nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d", resp.StatusCode)
	}
	if _, resp, err := s.DialStream(t, nil, path("staging", stagingRun), bearer); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked token: status %v, want 401", statusOf(resp))
	}
}

func statusOf(resp *http.Response) any {
	if resp == nil {
		return "no response"
	}
	return resp.StatusCode
}

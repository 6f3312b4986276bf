package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
)

// Requests a browser would never send (broken %-escapes, NUL bytes, text
// that is not UTF-8) are the sender's mistake: a 4xx page that says so, no
// 500, nothing stored changes, and the server keeps serving.
func TestMalformedRequestsGetA4xxAndChangeNothing(t *testing.T) {
	t.Parallel()
	s, env := wikiServer(t)
	s.AddMember(t, env, "vera@example.com", store.RoleViewer)
	admin := s.SignInLocal(t)
	if resp, _ := s.PostForm(t, admin, envPath+"/values", url.Values{"name": {"SESSION_SECRET"}, "value": {"kept-secret-1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set value = %d, want 303", resp.StatusCode)
	}
	vera := s.UserID(t, "vera@example.com")
	before := snapshot(t, s.DB)

	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", envPath + "/members", "email=%zz&role=viewer", http.StatusBadRequest},
		{"POST", fmt.Sprintf("%s/members/%d/role", envPath, vera), "role=%zz", http.StatusBadRequest},
		{"POST", envPath + "/members", "email=a%00b@example.com&role=viewer", http.StatusUnprocessableEntity},
		{"POST", envPath + "/members", "email=a%ffb@example.com&role=viewer", http.StatusUnprocessableEntity},
		{"POST", envPath + "/values", "name=%zz&value=x", http.StatusBadRequest},
		{"POST", envPath + "/values/%00/delete", "", http.StatusBadRequest},
		{"POST", envPath + "/values/prune", "names=A%00", http.StatusBadRequest},
		{"POST", "/validate", "manifest=%zz", http.StatusBadRequest},
		{"GET", "/projects/%00", "", http.StatusBadRequest},
		{"GET", "/audit?action=%00", "", http.StatusBadRequest},
		{"GET", "/audit?action=%ff", "", http.StatusBadRequest},
	} {
		req, err := http.NewRequest(tc.method, s.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.URL)
		resp, err := admin.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s %q = %d, want %d", tc.method, tc.path, tc.body, resp.StatusCode, tc.want)
		}
		if strings.Contains(string(body), "Something went wrong on our side") {
			t.Errorf("%s %s %q shows the internal-error sentence", tc.method, tc.path, tc.body)
		}
	}
	if after := snapshot(t, s.DB); after != before {
		t.Errorf("stored data changed:\nbefore %s\nafter  %s", before, after)
	}
	if status, _ := s.Get(t, admin, envPath+"/values"); status != http.StatusOK {
		t.Errorf("values page after the bad requests = %d, want 200", status)
	}
}

// snapshot summarises what the bad requests must not change: members with
// their roles, and value names with their versions.
func snapshot(t *testing.T, db *store.DB) string {
	t.Helper()
	var out string
	err := db.Pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT string_agg(user_id || ':' || role, ',' ORDER BY user_id) FROM memberships), '') || ' | ' ||
		coalesce((SELECT string_agg(name || ':' || version, ',' ORDER BY name) FROM environment_values), '')`).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

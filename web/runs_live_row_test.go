package web_test

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// runRowHTML returns the row of run id as a runs list page serves it.
func runRowHTML(page, id string) string {
	m := regexp.MustCompile(`(?s)<tr id="run-row-` + id + `".*?</tr>`).FindString(page)
	return m
}

// TestLiveRunRowKeepsTheRollback: the runs list follows the environment's
// stream, which swaps a run's row for the one it renders. After two
// deploys, the row the stream sends for the first (an earlier successful
// deploy) is the row the list serves, rollback included; the second, the
// active release, offers none either way. A viewer's list hides the
// rollback that live rows carry for everyone.
func TestLiveRunRowKeepsTheRollback(t *testing.T) {
	t.Parallel()
	s, admin := deployableWiki(t, &webtest.Deploys{}, &webtest.Resolver{}, "127.0.0.1")
	first := strings.TrimPrefix(startDeploy(t, s, admin, url.Values{}), wikiEnv+"/runs/")
	// A list that watches while the second deploy runs: when it becomes
	// the active release, the first deploy's row offers the rollback.
	env, err := s.DB.EnvironmentByName(t.Context(), "team-wiki", "production")
	if err != nil {
		t.Fatal(err)
	}
	watching, resp, err := s.DialStream(t, admin, wikiEnv+"/events?after="+strconv.FormatInt(env.LastEventSeq, 10), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer watching.Close()
	second := strings.TrimPrefix(startDeploy(t, s, admin, url.Values{"redeploy": {"1"}}), wikiEnv+"/runs/")
	if got := readRows(t, watching, first); !strings.Contains(got, "Roll back to this release") {
		t.Errorf("when the second deploy became the active release, the stream sent the first deploy's row as %q, want it with the rollback", got)
	}

	_, list := s.Get(t, admin, wikiEnv+"/runs")
	servedFirst, servedSecond := runRowHTML(list, first), runRowHTML(list, second)
	if !strings.Contains(servedFirst, "Roll back to this release") || strings.Contains(servedSecond, "Roll back to this release") {
		t.Fatalf("the served runs list offers a rollback on the wrong rows:\nfirst: %s\nsecond: %s", servedFirst, servedSecond)
	}

	// Replay the environment's stream from its start: each event about a
	// run carries that run's row as it is now.
	conn, resp, err := s.DialStream(t, admin, wikiEnv+"/events?after=0", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer conn.Close()
	live := map[string]string{}
	live[first] = readRows(t, conn, first)
	live[second] = readRows(t, conn, second)
	if live[first] != servedFirst {
		t.Errorf("the live row of the earlier deploy differs from the served one:\nlive:   %s\nserved: %s", live[first], servedFirst)
	}
	if live[second] != servedSecond {
		t.Errorf("the live row of the active release differs from the served one:\nlive:   %s\nserved: %s", live[second], servedSecond)
	}

	// A viewer's list marks the table so that the rollback a live row
	// carries stays hidden, and serves none itself.
	s.AddMember(t, env, "vera@example.com", store.RoleViewer)
	viewer := s.SignInAs(t, "vera@example.com", "Vera Viewer")
	_, list = s.Get(t, viewer, wikiEnv+"/runs")
	if !strings.Contains(list, `data-hide-rollback`) || strings.Contains(list, "Roll back to this release") {
		t.Error("a viewer's runs list offers a rollback or does not hide the ones live rows carry")
	}
}

// readRows reads an environment stream's frames until one carries the row
// of run id, and returns that row's last version in the frame.
func readRows(t *testing.T, conn *websocket.Conn, id string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_ = conn.SetReadDeadline(deadline)
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read frames for run %s's row: %v", id, err)
		}
		var f struct {
			Fragments []struct{ ID, HTML string } `json:"fragments"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		for _, fr := range f.Fragments {
			if fr.ID == "run-row-"+id {
				return fr.HTML
			}
		}
	}
}

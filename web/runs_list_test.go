package web_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/skali-dev/studio/web/webtest"
)

var (
	runRowRe = regexp.MustCompile(`<tr id="run-row-(\d+)"`)
	olderRe  = regexp.MustCompile(`<a class="button" href="([^"]+)">Older runs →</a>`)
	numberRe = regexp.MustCompile(`data-run-number="(\d+)"`)
	rangeRe  = regexp.MustCompile(`Runs <span data-range-first>(\d+)</span> to <span data-range-last>(\d+)</span>`)
)

// runRows returns the run numbers a runs list page shows, in order.
func runRows(page string) []int64 {
	var out []int64
	for _, m := range runRowRe.FindAllStringSubmatch(page, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, id)
	}
	return out
}

// TestRunsListIsReadPageByPage: an environment with more runs than a page
// holds lists the newest first, then the older ones page by page, each run
// once; another environment's runs never appear; a malformed page address
// says what is wrong.
func TestRunsListIsReadPageByPage(t *testing.T) {
	t.Parallel()
	s := webtest.Start(t)
	prod := s.CreateEnvironment(t, "", "production")
	staging := s.CreateEnvironment(t, "", "staging")
	c := s.SignInLocal(t)
	// 230 runs in production, interleaved with 30 in staging.
	if _, err := s.DB.Pool.Exec(context.Background(), `
		INSERT INTO runs (environment_id, kind)
		SELECT CASE WHEN g % 9 = 0 THEN $2::bigint ELSE $1::bigint END, 'deploy' FROM generate_series(1, 260) g`, prod.ID, staging.ID); err != nil {
		t.Fatal(err)
	}
	var want []int64
	rows, err := s.DB.Pool.Query(context.Background(), `SELECT id FROM runs WHERE environment_id = $1 ORDER BY id DESC`, prod.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		want = append(want, id)
	}
	rows.Close()

	const list = "/projects/hello-world/environments/production/runs"
	path := list
	var got []int64
	for page := 1; ; page++ {
		status, body := s.Get(t, c, path)
		if status != http.StatusOK {
			t.Fatalf("page %d (%s): %d\n%s", page, path, status, pageMain(body))
		}
		ids := runRows(body)
		if len(ids) == 0 || len(ids) > 100 {
			t.Fatalf("page %d shows %d runs, want 1 to 100", page, len(ids))
		}
		if page > 1 && !strings.Contains(body, `href="`+list+`">← Newest runs</a>`) {
			t.Errorf("page %d has no way back to the newest runs", page)
		}
		if page == 1 && strings.Contains(body, "Newest runs") {
			t.Error("the first page offers to go to the newest runs")
		}
		// Production counts its own runs: staging's,
		// interleaved, take none of its numbers.
		numbers := numberRe.FindAllStringSubmatch(body, -1)
		first, last := strconv.Itoa(len(want)-len(got)), strconv.Itoa(len(want)-len(got)-len(ids)+1)
		if len(numbers) != len(ids) || numbers[0][1] != first || numbers[len(numbers)-1][1] != last || !strings.Contains(body, `">#`+first+`</a>`) {
			t.Errorf("page %d numbers its runs from #%s to #%s, want #%s to #%s", page, numbers[0][1], numbers[len(numbers)-1][1], first, last)
		}
		if r := rangeRe.FindStringSubmatch(body); r == nil || r[1] != first || r[2] != last {
			t.Errorf("page %d does not say Runs %s to %s (%v)", page, first, last, r)
		}
		got = append(got, ids...)
		m := olderRe.FindStringSubmatch(body)
		if m == nil {
			break
		}
		if len(ids) != 100 {
			t.Errorf("page %d shows %d runs and a link to older ones, want a full page of 100", page, len(ids))
		}
		path = html.UnescapeString(m[1])
		if page > 5 {
			t.Fatal("more than 5 pages for 230 runs")
		}
	}
	if len(got) != len(want) {
		t.Fatalf("the pages list %d runs, want production's %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("run %d of the list is %d, want %d (newest first, each once, production's only)", i+1, got[i], want[i])
		}
	}

	for _, bad := range []string{"abc", "0", "-4", "1e3"} {
		status, body := s.Get(t, c, list+"?before="+bad)
		if status != http.StatusBadRequest || !strings.Contains(body, "before must be a run number") {
			t.Errorf("before=%s: %d, want 400 saying what before must be\n%s", bad, status, pageMain(body))
		}
	}
	// Past every run, even past 32 bits: the newest runs.
	status, body := s.Get(t, c, list+"?before=3000000000")
	if ids := runRows(body); status != http.StatusOK || len(ids) != 100 || ids[0] != want[0] {
		t.Errorf("before=3000000000: %d, %d runs, want 200 and the newest 100\n%s", status, len(ids), pageMain(body))
	}
	// Before the oldest run: an empty page that still leads back.
	status, body = s.Get(t, c, list+"?before="+strconv.FormatInt(want[len(want)-1], 10))
	if status != http.StatusOK || len(runRows(body)) != 0 || !strings.Contains(body, "No older runs.") || !strings.Contains(body, "← Newest runs") {
		t.Errorf("the page before the oldest run: %d\n%s", status, pageMain(body))
	}
}

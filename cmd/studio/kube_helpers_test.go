package main

// Helpers of the tests that run `studio serve --platform kubernetes`
// against the repository's test cluster (see runs/platform/kubernetes/
// clustertest): the Studio is this test binary started as a process of its
// own, and the cluster is read back with the kubectl built beside it, as an
// operator would.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// kubeCluster starts (once per test binary) the test cluster and returns
// it; the test skips when it was never built, fails under CI=true.
func kubeCluster(t *testing.T) *clustertest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Kubernetes test cluster and Studio processes")
	}
	c := clustertest.Start(t)
	if c.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	return c
}

// kubectl runs kubectl as the cluster's admin and returns its output.
func kubectl(t testing.TB, c *clustertest.Cluster, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.Kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubeObject reads one object (kubectl get -o json); nil when not found.
func kubeObject(t testing.TB, c *clustertest.Cluster, args ...string) map[string]any {
	t.Helper()
	out := kubectl(t, c, "", append(append([]string{"get"}, args...), "-o", "json", "--ignore-not-found")...)
	if strings.TrimSpace(out) == "" {
		return nil
	}
	var o map[string]any
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("kubectl get %s: %v", strings.Join(args, " "), err)
	}
	return o
}

// kubeItems lists objects (kubectl get -o json) and returns its items.
func kubeItems(t testing.TB, c *clustertest.Cluster, args ...string) []map[string]any {
	t.Helper()
	o := kubeObject(t, c, args...)
	var out []map[string]any
	items, _ := o["items"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

// field reads a path of keys and indexes in an object, as text ("" when
// absent).
func field(o any, path ...any) string {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := o.(map[string]any)
			o = m[k]
		case int:
			s, _ := o.([]any)
			if k >= len(s) {
				return ""
			}
			o = s[k]
		}
	}
	if o == nil {
		return ""
	}
	return fmt.Sprint(o)
}

// newKubeProject makes a database with the project of manifest, its
// environment production and values, and returns the database, its URL and
// the key that encrypts values (for the Studio processes a test starts on
// it).
func newKubeProject(t testing.TB, manifest string, values map[string]string) (db *store.DB, dbURL, key string) {
	t.Helper()
	dbURL = storetest.NewURL(t)
	key = store.GenerateKey()
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	addKubeProject(t, db, key, manifest, values)
	return db, dbURL, key
}

// addKubeProject adds the project of manifest, its environment production
// and values to the database.
func addKubeProject(t testing.TB, db *store.DB, key, manifest string, values map[string]string) {
	t.Helper()
	ctx := context.Background()
	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		t.Fatalf("manifest: %v", res.Errors())
	}
	p, _, err := db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: res.Definition.Name, Source: manifest, Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range values {
		if _, err := store.NewVault(db, keys).SetValue(ctx, store.Actor{}, env, k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// deployNewest starts a deploy of the project's newest revision through the
// deploy form of the Studio s, as c (signed in there: the sign-in link is
// good once), and returns the run's id.
func deployNewest(t testing.TB, s *studioProcess, c *http.Client, db *store.DB, project string) int64 {
	t.Helper()
	ctx := context.Background()
	var rev int
	var before int64
	db.Pool.QueryRow(ctx, `SELECT COALESCE(max(r.number), 0) FROM revisions r JOIN projects p ON p.id = r.project_id WHERE p.name = $1`, project).Scan(&rev)
	db.Pool.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM runs`).Scan(&before)
	where := postForm(t, c, s.addr+"/projects/"+project+"/environments/production/deploys", fmt.Sprintf("revision=%d", rev))
	var runID int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM runs WHERE id > $1 ORDER BY id LIMIT 1`, before).Scan(&runID); err != nil {
		t.Fatalf("the deploy of %s revision %d started no run (%v); the form went to %s", project, rev, err, where)
	}
	return runID
}

// runOutcome returns the run's status and reason.
func runOutcome(t testing.TB, db *store.DB, runID int64) (string, string) {
	t.Helper()
	r, err := db.RunByID(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status, r.Reason
}

// postForm posts a form as the page's own form does, expects the redirect
// that follows a change and returns where it goes.
func postForm(t testing.TB, c *http.Client, u, form string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST %s: %d", u, resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

package main

// The -watch-envs mode (issue 39): how many requests a minute the Studio
// makes of the API server while it follows the health of 1, 10 and 100
// deployed environments and nothing changes. The Studio may read only its
// own namespaces, so it holds one watch per kind and environment: what
// must not grow with the environments is the polling, not the number of
// open watches.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

// watchEnvs deploys environments of one application until there are
// counts[i] of them, opens each one's page (which starts following its
// health), waits for the watches to open, then counts the requests made
// during window.
func (b *bench) watchEnvs(ctx context.Context, counts []int, window time.Duration) error {
	const project = "watch"
	source, err := b.manifest(project, 1, "")
	if err != nil {
		return err
	}
	res := compiler.Compile([]byte(source))
	if !res.Valid() {
		return fmt.Errorf("manifest: %v", res.Errors())
	}
	p, _, err := b.db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: project, Source: source, Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		return err
	}
	fmt.Printf("%-26s %10s %10s %14s   %s\n", "", "requests", "per min", "open watches", "by verb (resource)")
	deployed := 0
	for _, n := range counts {
		for deployed < n {
			deployed++
			name := fmt.Sprintf("e%d", deployed)
			env, err := b.db.CreateEnvironment(ctx, store.Actor{}, p.ID, name)
			if err != nil {
				return err
			}
			for k, v := range map[string]string{"SESSION_SECRET": "bench-session-secret", "APP_DOMAIN": fmt.Sprintf("%s-%s.bench.test", project, name)} {
				if _, err := b.vault.SetValue(ctx, store.Actor{}, env, k, v); err != nil {
					return err
				}
			}
			if _, _, err := b.deployStudio(ctx, project, name, env.ID); err != nil {
				return err
			}
			// The environment's page reads its health: from here on the
			// Studio follows it.
			resp, err := b.client.Get(b.studioURL + "/projects/" + project + "/environments/" + name)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("the page of environment %s: %d", name, resp.StatusCode)
			}
			if b.verbose {
				fmt.Fprintf(os.Stderr, "kubebench: environment %s deployed and followed\n", name)
			}
		}
		// The watches the last pages started open within a few seconds.
		time.Sleep(10 * time.Second)
		start := len(b.studioAPI.Requests())
		time.Sleep(window)
		reqs := b.studioAPI.Requests()[start:]
		fmt.Printf("%-26s %10d %10.1f %14d   %s\n", fmt.Sprintf("%d environment(s), idle", n), len(reqs),
			float64(len(reqs))/window.Minutes(), b.studioAPI.Open(), verbsOf(reqs))
	}
	return nil
}

// verbsOf says reqs by verb and resource, most first.
func verbsOf(reqs []clustertest.Request) string {
	per := map[string]int{}
	for _, r := range reqs {
		k := r.Verb + " " + r.Resource
		if r.Path != "" {
			k = r.Verb + " " + r.Path
		}
		per[k]++
	}
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if per[a] != per[b] {
			return per[b] - per[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, per[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

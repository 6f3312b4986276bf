package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/browsertest"
)

// killedPodsManifest is an application of 8 real pods whose containers
// can be made to exit (the test application's POST /exit).
const killedPodsManifest = `name: painted
applications:
  web:
    image: registry.local/skali/testapp:latest
    command: ["/testapp", "serve"]
    ports:
      http:
        port: 8080
    health:
      readiness:
        http:
          port: http
          path: /readyz
    scaling:
      replicas:
        min: 8
        max: 8
`

// BenchmarkRealContainerKilledToPainted: a browser watches the
// environment page of `studio serve --platform kubernetes` on the
// real-node cluster while containers of the application are made to exit
// one after another (the test application's POST /exit, through its
// Service); for each it times the application card's restart count
// changing in the page, from the kill and from the moment a watch of the
// pods (kubectl get -w) saw the kubelet report it. Goal: kill → painted
// p99 ≤ 1 s. The kubelet notices a container's end by relisting (every
// second), so the second figure is the Studio's own part.
//
//	go test -run '^$' -bench RealContainerKilledToPainted -benchtime 20x ./cmd/studio/
func BenchmarkRealContainerKilledToPainted(b *testing.B) {
	cluster := clustertest.StartReal(b)
	db, dbURL, key := newKubeProject(b, killedPodsManifest, nil)
	const ns = "painted-production"
	b.Cleanup(func() { kubectl(b, cluster, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })
	s := startStudio(b, dbURL, key, "--platform", "kubernetes", "--kubeconfig", cluster.Kubeconfig)
	c := signedIn(b, s)
	runID := deployNewest(b, s, c, db, "painted")
	waitForRunEnd(b, db, runID)
	if status, reason := runOutcome(b, db, runID); status != store.RunSucceeded {
		b.Fatalf("deploy %s: %s", status, reason)
	}
	ip := field(kubeObject(b, cluster, "-n", ns, "service", "web"), "spec", "clusterIP")

	// The pods' restarts as the API server reports them.
	var mu sync.Mutex
	reported := map[int]time.Time{} // total restarts → when first seen
	restarts := map[string]int{}
	w := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=application", "-w",
		"-o", `jsonpath={.metadata.name} {.status.containerStatuses[0].restartCount}{"\n"}`)
	out, err := w.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Process.Kill(); w.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			name, n, ok := strings.Cut(sc.Text(), " ")
			k, err := strconv.Atoi(n)
			if !ok || err != nil {
				continue
			}
			mu.Lock()
			restarts[name] = max(restarts[name], k)
			total := 0
			for _, v := range restarts {
				total += v
			}
			if _, seen := reported[total]; !seen {
				reported[total] = time.Now()
			}
			mu.Unlock()
		}
	}()

	tok, err := db.CreateLoginToken(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	br := browsertest.NewFor(b, 10*time.Minute)
	br.Do(chromedp.Navigate(s.addr+"/login/local?token="+tok), chromedp.WaitVisible(chromedp.CSS("h1")))
	br.Do(chromedp.Navigate(s.addr+"/projects/painted/environments/production"), chromedp.WaitVisible(chromedp.CSS("#app-health-web [data-restarts]")))
	// The page notes when each restart count is first in the document,
	// at the frame after the change.
	browsertest.Eval[any](br, `window.paintedAt = {};
		new MutationObserver(() => {
			const el = document.querySelector("#app-health-web [data-restarts]");
			const n = el ? parseInt(el.textContent, 10) : NaN;
			if (!isNaN(n) && !(n in window.paintedAt)) requestAnimationFrame(() => { window.paintedAt[n] = Date.now(); });
		}).observe(document.body, {subtree: true, childList: true, characterData: true});`)
	painted := func(n int) (time.Time, bool) {
		ms := browsertest.Eval[float64](br, fmt.Sprintf(`window.paintedAt[%d] || 0`, n))
		return time.UnixMilli(int64(ms)), ms > 0
	}
	client := &http.Client{Timeout: 5 * time.Second}
	var fromKill, fromReport []time.Duration
	total := 0
	b.ResetTimer()
	for range b.N {
		total++
		killed := time.Now()
		resp, err := client.Post("http://"+ip+":8080/exit?code=3", "text/plain", nil)
		if err != nil {
			b.Fatalf("killing a container: %v", err)
		}
		resp.Body.Close()
		var at time.Time
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var ok bool
			if at, ok = painted(total); ok {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("restart %d was not painted within 30 s (the card says %q)", total, br.Text("#app-health-web"))
			}
		}
		fromKill = append(fromKill, at.Sub(killed))
		mu.Lock()
		if r, ok := reported[total]; ok {
			fromReport = append(fromReport, at.Sub(r))
		}
		mu.Unlock()
		// The next kill goes to a ready pod: the Service leaves out the
		// one restarting.
		time.Sleep(1500 * time.Millisecond)
	}
	b.StopTimer()
	p := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(float64(len(s))*q))]
	}
	b.ReportMetric(float64(p(fromKill, 0.5).Milliseconds()), "kill-to-painted-p50-ms")
	b.ReportMetric(float64(p(fromKill, 0.99).Milliseconds()), "kill-to-painted-p99-ms")
	if len(fromReport) > 0 {
		b.ReportMetric(float64(p(fromReport, 0.5).Milliseconds()), "reported-to-painted-p50-ms")
		b.ReportMetric(float64(p(fromReport, 0.99).Milliseconds()), "reported-to-painted-p99-ms")
	}
	b.Logf("%d kills: kill → painted p50 %s p99 %s; reported by the API server → painted (%d seen) p50 %s p99 %s",
		len(fromKill), p(fromKill, 0.5), p(fromKill, 0.99), len(fromReport), p(cmpOr(fromReport, fromKill), 0.5), p(cmpOr(fromReport, fromKill), 0.99))
}

func cmpOr(a, b []time.Duration) []time.Duration {
	if len(a) > 0 {
		return a
	}
	return b
}

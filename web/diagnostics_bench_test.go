package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler/kinds"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/web/webtest"
)

// fiftyApplications is a valid manifest with 50 applications, each with
// ports, a route, probes, resources and a database reference.
func fiftyApplications() string {
	var b strings.Builder
	b.WriteString("name: big-project\napplications:\n")
	for i := range 50 {
		fmt.Fprintf(&b, `  app-%d:
    image: ghcr.io/acme/app-%d:1.0.0
    environment:
      DATABASE_URL: "{{databases.data.url}}"
      SECRET_%d: "${SECRET_%d}"
    ports:
      http: {port: 8080}
    routes:
      public: {domain: "app-%d.${BASE_DOMAIN}", port: http}
    health:
      readiness:
        http: {port: http, path: /healthz}
    resources:
      requests: {cpu: 0.25, memory: 256MB}
    scaling:
      replicas: {min: 2, max: 2}
`, i, i, i, i, i)
	}
	b.WriteString("databases:\n  data:\n    engine: postgres\n    version: 18\n")
	return b.String()
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkCheckEndpoint measures issue 26's goal: the live editor's
// answer, through HTTP on loopback, for the production example and a
// 50-application manifest, against the compile itself. It reports p50 and
// p99 of both and their ratios (the goal is p99 <= 1.5x the compile); it
// asserts no time. Both are measured in the same goroutine on the same
// input after a warm-up, in alternating order; the HTTP time includes the
// client's side of the exchange (building the request, reading the answer).
// Beside them, the same client's round trip to GET /healthz (no work, no
// body) is the floor of any answer through HTTP on this machine: reported
// as floor-p50/p99, with what the endpoint adds beyond it relative to the
// compile (beyond-floor-p50-ratio), so that a ratio over the goal can be
// told apart as the handler's cost or the exchange's. Give it enough
// samples for a p99 that is not two or three stray ones: with 400, p99 is
// the fourth slowest of each (a collection or a preemption in either side
// moves the ratio by 0.3); with 2,000, the twentieth.
//
//	go test ./web -run '^$' -bench CheckEndpoint -benchtime 2000x
func BenchmarkCheckEndpoint(b *testing.B) {
	s := webtest.Start(b)
	c := s.NewClient()
	for _, tc := range []struct{ name, src string }{
		{"production", readExample(b, "production")},
		{"50-applications", fiftyApplications()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body, _ := json.Marshal(handlers.CheckRequest{Manifest: tc.src, Kind: "skali"})
			if r := kinds.Validate("", []byte(tc.src), kinds.Options{Kind: kinds.Skali}); !r.Valid() {
				b.Fatalf("the manifest is not valid: %v", r.Diagnostics)
			}
			var inServer []time.Duration // the compile's time in the handler (Server-Timing)
			post := func() time.Duration {
				t0 := time.Now()
				resp, err := c.Post(s.URL+"/validate/check", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took := time.Since(t0)
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				ms, err := strconv.ParseFloat(strings.TrimPrefix(resp.Header.Get("Server-Timing"), "compile;dur="), 64)
				if err != nil {
					b.Fatalf("Server-Timing %q: %v", resp.Header.Get("Server-Timing"), err)
				}
				inServer = append(inServer, time.Duration(ms*float64(time.Millisecond)))
				return took
			}
			floor := func() time.Duration {
				t0 := time.Now()
				resp, err := c.Get(s.URL + "/healthz")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return time.Since(t0)
			}
			compileOnce := func() time.Duration {
				t0 := time.Now()
				kinds.Validate("", []byte(tc.src), kinds.Options{Kind: kinds.Skali})
				return time.Since(t0)
			}
			// Warm both paths (the connection, the pools, the caches), then
			// measure them in turn on the same input, alternating which goes
			// first so that neither always inherits the other's garbage.
			for range 20 {
				post()
				compileOnce()
				floor()
			}
			var viaHTTP, compile, bare []time.Duration
			inServer = nil
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					viaHTTP = append(viaHTTP, post())
					compile = append(compile, compileOnce())
				} else {
					compile = append(compile, compileOnce())
					viaHTTP = append(viaHTTP, post())
				}
				bare = append(bare, floor())
				i++
			}
			b.StopTimer()
			hp50, hp99 := percentile(viaHTTP, 0.50), percentile(viaHTTP, 0.99)
			cp50, cp99 := percentile(compile, 0.50), percentile(compile, 0.99)
			b.ReportMetric(float64(hp50.Microseconds()), "http-p50-µs")
			b.ReportMetric(float64(hp99.Microseconds()), "http-p99-µs")
			b.ReportMetric(float64(cp50.Microseconds()), "compile-p50-µs")
			b.ReportMetric(float64(cp99.Microseconds()), "compile-p99-µs")
			b.ReportMetric(float64(hp50)/float64(cp50), "p50-ratio")
			b.ReportMetric(float64(hp99)/float64(cp99), "p99-ratio")
			fp50, fp99 := percentile(bare, 0.50), percentile(bare, 0.99)
			b.ReportMetric(float64(fp50.Microseconds()), "floor-p50-µs")
			b.ReportMetric(float64(fp99.Microseconds()), "floor-p99-µs")
			b.ReportMetric(float64(hp50-fp50)/float64(cp50), "beyond-floor-p50-ratio")
			// The same compile inside the handler: what the server's side
			// costs beyond it is the rest.
			sp50, sp99 := percentile(inServer, 0.50), percentile(inServer, 0.99)
			b.ReportMetric(float64(sp50.Microseconds()), "handler-compile-p50-µs")
			b.ReportMetric(float64(sp99.Microseconds()), "handler-compile-p99-µs")
		})
	}
}

// BenchmarkCheckInProcess splits the endpoint's cost without the network:
// the whole middleware chain and handler served in-process (a recorded
// response) against the compile alone, for the production example. Their
// difference is the endpoint's fixed cost on the server; allocations are
// reported per operation.
//
//	go test ./web -run '^$' -bench CheckInProcess -benchmem
func BenchmarkCheckInProcess(b *testing.B) {
	s := webtest.Start(b)
	src := readExample(b, "production")
	body, _ := json.Marshal(handlers.CheckRequest{Manifest: src, Kind: "skali"})
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, s.URL+"/validate/check", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			rec := httptest.NewRecorder()
			s.Config.Handler.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	})
	b.Run("compile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			kinds.Validate("", []byte(src), kinds.Options{Kind: kinds.Skali})
		}
	})
}

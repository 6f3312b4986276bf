package kubernetes

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/s3target"
	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
)

// The API server's exec stream can lose the end of a command's output and
// still report the command's success (kubernetes/kubernetes#124571; a
// scheduled snapshot failed so in CI on a loaded machine). A dump cut
// short, inside a table's data or after it, is taken again, and the file
// kept is the whole dump; one cut every time fails with where it ended.
// The API server is a stand-in serving only exec; the bucket is real S3.
func TestADumpCutShortIsTakenAgain(t *testing.T) {
	whole := "--\n-- PostgreSQL database dump\n--\n\nCOPY public.items (id) FROM stdin;\n1\n2\n\\.\n\n--\n-- PostgreSQL database dump complete\n--\n\n"
	inData := whole[:strings.Index(whole, "2\n")]
	afterData := whole[:strings.Index(whole, "-- PostgreSQL database dump complete")]
	for _, tc := range []struct {
		name    string
		outputs []string // what each exec sends, the last one repeated
		calls   int32
		want    string // the error, or "" for the whole dump kept
	}{
		{"cut inside the data, then whole", []string{inData, whole}, 2, ""},
		{"cut after the data twice, then whole", []string{afterData, afterData, whole}, 3, ""},
		{"cut every time", []string{inData}, dumpAttempts, "pg_dump in pod data-1 ended inside the data of table public.items"},
		{"cut after the data every time", []string{afterData}, dumpAttempts, "pg_dump in pod data-1 succeeded but its output ended before the dump's end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := websocket.Upgrader{Subprotocols: []string{execProtocol}}
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				if r.URL.Path != "/api/v1/namespaces/shop-production/pods/data-1/exec" || r.URL.Query().Get("command") != "pg_dump" {
					http.Error(w, "not a dump: "+r.URL.String(), http.StatusBadRequest)
					return
				}
				conn, err := up.Upgrade(w, r, nil)
				if err != nil {
					return
				}
				defer conn.Close()
				out := tc.outputs[min(n, len(tc.outputs))-1]
				conn.WriteMessage(websocket.BinaryMessage, append([]byte{execStdout}, out...))
				conn.WriteMessage(websocket.BinaryMessage, append([]byte{execStatus}, `{"metadata":{},"status":"Success"}`...))
			}))
			defer api.Close()
			p := New(&Client{server: api.URL, http: api.Client()}, Options{})
			defer p.Close()

			srv := s3test.Start(t, "backups")
			tg, err := s3target.New(s3target.Config{URL: "s3://backups/studio", Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
				AccessKey: srv.Access, SecretKey: srv.Secret})
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Client().Close()
			ctx := context.Background()
			if err := tg.Mark(ctx, "inst"); err != nil {
				t.Fatal(err)
			}
			loc := platform.SnapshotLocation{Target: tg, Installation: "inst", Dir: "shop/production/snap-1"}
			svc := platform.SnapshotService{Kind: "database", Name: "data"}
			file, err := p.dumpWhole(ctx, envNames{namespace: "shop-production"}, "data-1", svc, loc)
			if calls.Load() != tc.calls {
				t.Errorf("pg_dump ran %d times, want %d", calls.Load(), tc.calls)
			}
			if tc.want != "" {
				if err == nil || err.Error() != tc.want {
					t.Fatalf("dump: %v, want %q", err, tc.want)
				}
				if _, err := tg.Size(ctx, "inst", loc.Dir, snapshotFileName(svc)); err == nil {
					t.Error("a cut dump was kept in the bucket")
				}
				return
			}
			if err != nil {
				t.Fatalf("dump: %v", err)
			}
			rc, err := tg.Open(ctx, "inst", loc.Dir, file.File)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if want := whole + snapshotTrailer + `{"tables":[{"table":"public.items","rows":2}]}` + "\n"; string(got) != want {
				t.Fatalf("the bucket holds\n%q\nwant the whole dump and its counts\n%q", got, want)
			}
		})
	}
}

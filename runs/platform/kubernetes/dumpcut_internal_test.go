package kubernetes

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/archive"
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

			tg, ctx := testTarget(t)
			loc := platform.SnapshotLocation{Target: tg, Installation: "inst", Dir: "shop/production/snap-1"}
			svc := platform.SnapshotService{Kind: "database", Name: "data"}
			file, err := p.dumpWhole(ctx, envNames{namespace: "shop-production"}, "data-1", svc, loc)
			if calls.Load() != tc.calls {
				t.Errorf("pg_dump ran %d times, want %d", calls.Load(), tc.calls)
			}
			got, ok := kept(t, tg, loc, svc, file, err, tc.want)
			if want := whole + snapshotTrailer + `{"tables":[{"table":"public.items","rows":2}]}` + "\n"; ok && string(got) != want {
				t.Fatalf("the bucket holds\n%q\nwant the whole dump and its counts\n%q", got, want)
			}
		})
	}
}

// A volume's archive cut short (no manifest at its end) is taken again;
// one that never arrives whole, or whose files do not match its manifest,
// is not kept. The bucket is real S3.
func TestAnArchiveCutShortIsTakenAgain(t *testing.T) {
	var whole bytes.Buffer
	aw := archive.NewWriter(&whole)
	body := strings.Repeat("photo bytes ", 4000)
	if err := aw.File("a.jpg", int64(len(body)), 0o644, time.Unix(1700000000, 0), 0, 0, strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if _, err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	cut := whole.Bytes()[:whole.Len()/2]
	// The manifest's checksum of a.jpg no longer matches its bytes.
	wrong := bytes.Replace(whole.Bytes(), []byte("photo bytes"), []byte("PHOTO bytes"), 1)
	for _, tc := range []struct {
		name    string
		outputs [][]byte
		calls   int
		want    string
	}{
		{"cut, then whole", [][]byte{cut, whole.Bytes()}, 2, ""},
		{"cut every time", [][]byte{cut}, dumpAttempts, "the archive of volume web/photos was cut short: the archive cannot be read: unexpected EOF"},
		{"not matching its manifest", [][]byte{wrong}, 1, "the archive of volume web/photos does not check: a.jpg does not match its checksum from when the snapshot was taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, ctx := testTarget(t)
			p := New(nil, Options{})
			defer p.Close()
			loc := platform.SnapshotLocation{Target: tg, Installation: "inst", Dir: "shop/production/snap-1"}
			svc := platform.SnapshotService{Kind: "volume", Name: "web/photos"}
			calls := 0
			file, err := p.archiveWhole(ctx, envNames{namespace: "shop-production"}, svc, loc, func(w io.Writer) error {
				calls++
				_, err := w.Write(tc.outputs[min(calls, len(tc.outputs))-1])
				return err
			})
			if calls != tc.calls {
				t.Errorf("the archive was streamed %d times, want %d", calls, tc.calls)
			}
			if got, ok := kept(t, tg, loc, svc, file, err, tc.want); ok && !bytes.Equal(got, whole.Bytes()) {
				t.Fatalf("the bucket holds %d bytes, want the whole archive's %d", len(got), whole.Len())
			}
		})
	}
}

// kept checks a snapshot's outcome: with want, the error is want and no
// file is in the bucket; else it returns the file's bytes (ok true).
func kept(t *testing.T, tg *s3target.Target, loc platform.SnapshotLocation, svc platform.SnapshotService, file platform.SnapshotFile,
	err error, want string) (got []byte, ok bool) {
	t.Helper()
	ctx := context.Background()
	if want != "" {
		if err == nil || err.Error() != want {
			t.Fatalf("snapshot: %v, want %q", err, want)
		}
		if _, err := tg.Size(ctx, "inst", loc.Dir, snapshotFileName(svc)); err == nil {
			t.Error("a snapshot that is not whole was kept in the bucket")
		}
		return nil, false
	}
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	rc, err := tg.Open(ctx, "inst", loc.Dir, file.File)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err = io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return got, true
}

// testTarget is a marked S3 target on the S3 test server.
func testTarget(t *testing.T) (*s3target.Target, context.Context) {
	t.Helper()
	srv := s3test.Start(t, "backups")
	tg, err := s3target.New(s3target.Config{URL: "s3://backups/studio", Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.Access, SecretKey: srv.Secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Client().Close)
	ctx := context.Background()
	if err := tg.Mark(ctx, "inst"); err != nil {
		t.Fatal(err)
	}
	return tg, ctx
}

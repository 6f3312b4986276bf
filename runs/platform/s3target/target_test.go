package s3target_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/s3target"
	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
)

func target(t *testing.T, srv *s3test.Server, url string, edit func(*s3target.Config)) *s3target.Target {
	t.Helper()
	cfg := s3target.Config{URL: url, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true, AccessKey: srv.Access, SecretKey: srv.Secret, PartSize: 5 << 20}
	if edit != nil {
		edit(&cfg)
	}
	tg, err := s3target.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Client().Close)
	return tg
}

// Saving checks for real: each wrong setting is refused with its
// sentence, against a server that checks signatures, and nothing is
// written.
func TestMarkRefusesWhatTheServerRefuses(t *testing.T) {
	srv := s3test.Start(t, "backups")
	ctx := context.Background()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := closed.Addr().String()
	closed.Close()
	for _, c := range []struct {
		name, url  string
		edit       func(*s3target.Config)
		field, say string
	}{
		{"wrong secret key", "s3://backups/studio", func(c *s3target.Config) { c.SecretKey = "not-the-secret" }, "secret_key", "SignatureDoesNotMatch"},
		{"unknown access key", "s3://backups/studio", func(c *s3target.Config) { c.AccessKey = "AKIANOBODY" }, "access_key", "does not know this access key"},
		{"missing bucket", "s3://no-such-bucket/studio", nil, "target", "The bucket no-such-bucket does not exist"},
		{"unreachable endpoint", "s3://backups/studio", func(c *s3target.Config) { c.Endpoint = "http://" + deadAddr }, "endpoint", "cannot be reached"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := target(t, srv, c.url, c.edit).Mark(ctx, "studio-one")
			if err == nil || !strings.Contains(err.Error(), c.say) || s3target.FieldOf(err) != c.field {
				t.Fatalf("Mark: %v (field %s), want %q on %s", err, s3target.FieldOf(err), c.say, c.field)
			}
			if strings.Contains(err.Error(), srv.Secret) {
				t.Fatal("the refusal repeats the secret key")
			}
		})
	}
	if objs := srv.Objects(t, "backups", ""); len(objs) != 0 {
		t.Fatalf("refused saves left objects: %v", objs)
	}
	// Storage that lets these credentials read but not write.
	ro := s3test.StartReadOnly(t, "backups")
	err := target(t, ro, "s3://backups/studio", nil).Mark(ctx, "studio-one")
	if err == nil || !strings.Contains(err.Error(), "refused to let these credentials write") || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("a refused write: %v", err)
	}
}

// The marker: written on save, accepted again for the same installation,
// refused for another one; nothing outside the prefix is touched.
func TestMarkerNamesTheInstallation(t *testing.T) {
	srv := s3test.Start(t, "backups")
	ctx := context.Background()
	tg := target(t, srv, "s3://backups/team/studio", nil)
	if err := tg.Mark(ctx, "studio-one"); err != nil {
		t.Fatal(err)
	}
	if err := tg.Mark(ctx, "studio-one"); err != nil {
		t.Fatalf("saved again by the same installation: %v", err)
	}
	err := tg.Mark(ctx, "studio-two")
	if err == nil || !strings.Contains(err.Error(), "another Skali installation") || !strings.Contains(err.Error(), "studio-one") {
		t.Fatalf("another installation's prefix: %v", err)
	}
	if err := tg.Check(ctx, "studio-two", true); err == nil || !strings.Contains(err.Error(), "another Skali installation's") {
		t.Fatalf("check by another installation: %v", err)
	}
	if err := tg.Check(ctx, "studio-one", true); err != nil {
		t.Fatal(err)
	}
	objs := srv.Objects(t, "backups", "")
	if len(objs) != 1 || objs["team/studio/.skali-backup-target"] == 0 {
		t.Fatalf("objects after saving: %v, want the marker only", objs)
	}
	// A prefix without the marker (deleted) is gone for snapshots.
	if err := srv.Client(t, "backups").Delete(ctx, "team/studio/.skali-backup-target"); err != nil {
		t.Fatal(err)
	}
	var te *platform.TargetError
	if err := tg.Check(ctx, "studio-one", false); !errors.As(err, &te) || !te.Gone {
		t.Fatalf("check without the marker: %v", err)
	}
}

// A file larger than a part streams as a multipart upload: its size and
// SHA-256 are the bytes written, it reads back whole, and Remove deletes
// the snapshot's folder only.
func TestWriteReadRemove(t *testing.T) {
	srv := s3test.Start(t, "backups")
	ctx := context.Background()
	tg := target(t, srv, "s3://backups/studio", nil)
	if err := tg.Mark(ctx, "inst"); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 12<<20+12345) // three parts of 5 MiB
	rand.Read(data)
	sum := sha256.Sum256(data)
	for _, dir := range []string{"shop/production/snap-1", "shop/production/snap-2"} {
		w, err := tg.Create(ctx, "inst", dir, "database-main.snapshot")
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 1 << 20 {
			if _, err := w.Write(data[off:min(off+1<<20, len(data))]); err != nil {
				t.Fatal(err)
			}
		}
		f, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if f.Size != int64(len(data)) || f.SHA256 != hex.EncodeToString(sum[:]) || f.File != "database-main.snapshot" {
			t.Fatalf("committed %+v", f)
		}
	}
	small, err := tg.Create(ctx, "inst", "shop/production/snap-1", "bucket-files.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(small, "small")
	if f, err := small.Commit(); err != nil || f.Size != 5 {
		t.Fatalf("small file: %+v %v", f, err)
	}
	loc := platform.SnapshotLocation{Target: tg, Installation: "inst", Dir: "shop/production/snap-1"}
	if n, err := tg.Size(ctx, "inst", loc.Dir, "database-main.snapshot"); err != nil || n != int64(len(data)) {
		t.Fatalf("size %d %v", n, err)
	}
	if err := platform.VerifyFile(ctx, loc, platform.SnapshotFile{File: "database-main.snapshot", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}); err != nil {
		t.Fatal(err)
	}
	rc, err := tg.Open(ctx, "inst", loc.Dir, "database-main.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("the object read back is not what was written")
	}
	if _, err := tg.Size(ctx, "inst", loc.Dir, "volume-x.snapshot"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing object: %v", err)
	}
	if err := tg.Remove(ctx, "inst", "shop/production/snap-1"); err != nil {
		t.Fatal(err)
	}
	objs := srv.Objects(t, "backups", "")
	if len(objs) != 2 || objs["studio/shop/production/snap-2/database-main.snapshot"] != int64(len(data)) || objs["studio/.skali-backup-target"] == 0 {
		t.Fatalf("after removing snap-1: %v", objs)
	}
}

// An abandoned file leaves nothing: no object, no multipart upload.
func TestAbortLeavesNoUpload(t *testing.T) {
	srv := s3test.Start(t, "backups")
	ctx, cancel := context.WithCancel(context.Background())
	tg := target(t, srv, "s3://backups/studio", nil)
	if err := tg.Mark(ctx, "inst"); err != nil {
		t.Fatal(err)
	}
	w, err := tg.Create(ctx, "inst", "shop/production/snap", "database-main.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for range 11 { // two parts uploaded
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	ups, err := tg.Client().ListMultipart(context.Background(), "studio/")
	if err != nil || len(ups) != 1 {
		t.Fatalf("uploads in progress: %v %v, want 1", ups, err)
	}
	cancel() // the run is cancelled mid-upload
	if _, err := w.Write(chunk); err == nil {
		if _, err := w.Commit(); err == nil {
			t.Fatal("a file written after its context ended was committed")
		}
	}
	w.Abort()
	if ups, err := tg.Client().ListMultipart(context.Background(), "studio/"); err != nil || len(ups) != 0 {
		t.Fatalf("uploads left after the abort: %v %v", ups, err)
	}
	if objs := srv.Objects(t, "backups", "studio/shop/"); len(objs) != 0 {
		t.Fatalf("objects left after the abort: %v", objs)
	}
}

func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://backups/studio":   "backups|studio",
		"s3://backups":          "backups|",
		"s3://backups/a/b/":     "backups|a/b",
		"s3://AK:SK@backups/x":  "error",
		"s3://Backups/x":        "error",
		"s3://backups/../x":     "error",
		"s3://backups//x":       "error",
		"https://backups/x":     "error",
		"s3://ba/x":             "error",
		"s3://backups/x?y":      "error",
		"s3://my.backups-1/a-b": "my.backups-1|a-b",
	} {
		b, p, err := s3target.ParseURL(in)
		got := b + "|" + p
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("ParseURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// Virtual-hosted addressing: the bucket in the host name, signed as such
// (the server checks the signature over its Host header).
func TestVirtualHostedAddressing(t *testing.T) {
	srv := s3test.Start(t, "backups")
	ctx := context.Background()
	_, port, _ := net.SplitHostPort(srv.Addr)
	tg := target(t, srv, "s3://backups/studio", func(c *s3target.Config) {
		c.Endpoint = "http://" + s3test.VirtualDomain + ":" + port
		c.PathStyle = false
	})
	tg.Client().DialVia(srv.Addr)
	if err := tg.Mark(ctx, "inst"); err != nil {
		t.Fatal(err)
	}
	w, err := tg.Create(ctx, "inst", "shop/production/snap", "volume-a-b.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "virtual")
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	objs := srv.Objects(t, "backups", "")
	if objs["studio/shop/production/snap/volume-a-b.snapshot"] != 7 || objs["studio/.skali-backup-target"] == 0 {
		t.Fatalf("objects written virtual-hosted: %v", objs)
	}
	// A wrong secret key is refused there too: the signature is checked.
	bad := target(t, srv, "s3://backups/studio", func(c *s3target.Config) {
		c.Endpoint, c.PathStyle, c.SecretKey = "http://"+s3test.VirtualDomain+":"+port, false, "wrong"
	})
	bad.Client().DialVia(srv.Addr)
	if err := bad.Mark(ctx, "inst"); s3target.FieldOf(err) != "secret_key" {
		t.Fatalf("a wrong secret key, virtual-hosted: %v", err)
	}
}

// A file written again after its writer was lost mid-upload (the Studio
// process was killed; the run resumes the step) aborts the upload left
// behind: only the new one remains, and once it completes, none.
func TestCreateAbortsTheUploadALostWriterLeft(t *testing.T) {
	srv := s3test.Start(t, "backups")
	ctx := context.Background()
	tg := target(t, srv, "s3://backups/studio", nil)
	if err := tg.Mark(ctx, "inst"); err != nil {
		t.Fatal(err)
	}
	lost, err := tg.Create(ctx, "inst", "shop/production/snap", "database-main.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	lost.Write(make([]byte, 6<<20)) // one part uploaded, then the process dies
	if err := s3target.WaitForParts(lost); err != nil {
		t.Fatal(err)
	}
	if ups, _ := tg.Client().ListMultipart(ctx, "studio/"); len(ups) != 1 {
		t.Fatalf("uploads after the lost writer: %v", ups)
	}
	again, err := tg.Create(ctx, "inst", "shop/production/snap", "database-main.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	if ups, _ := tg.Client().ListMultipart(ctx, "studio/"); len(ups) != 0 {
		t.Fatalf("the lost writer's upload is still there: %v", ups)
	}
	again.Write(make([]byte, 6<<20))
	if f, err := again.Commit(); err != nil || f.Size != 6<<20 {
		t.Fatalf("commit %+v %v", f, err)
	}
	if ups, _ := tg.Client().ListMultipart(ctx, "studio/"); len(ups) != 0 {
		t.Fatalf("uploads left: %v", ups)
	}
}

// A storage that answers 503 SlowDown (or cuts a connection) now and then
// does not fail a snapshot: the request is sent again, signed again.
func TestPassingFailuresAreRetried(t *testing.T) {
	srv := s3test.Start(t, "backups")
	ctx := context.Background()
	up, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(up)
	var n atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 3 {
		case 1: // every third request: the storage is busy
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer front.Close()
	tg := target(t, srv, "s3://backups/studio", func(c *s3target.Config) { c.Endpoint = front.URL })
	if err := tg.Mark(ctx, "inst"); err != nil {
		t.Fatal(err)
	}
	w, err := tg.Create(ctx, "inst", "shop/production/snap", "database-main.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 11<<20)
	rand.Read(data)
	w.Write(data)
	f, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	loc := platform.SnapshotLocation{Target: tg, Installation: "inst", Dir: "shop/production/snap"}
	if err := platform.VerifyFile(ctx, loc, platform.SnapshotFile{File: f.File, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}); err != nil {
		t.Fatal(err)
	}
	if n.Load() < 9 {
		t.Fatalf("only %d requests reached the front: the failures were not exercised", n.Load())
	}
}

// A snapshot cancelled while a part is in flight aborts its upload only
// once that part is answered: a server that has received a part's body
// stores it even when the client hangs up, and a part stored after the
// abort would list the upload again. The front below is such a server:
// it holds the first part after reading its body and stores it whatever
// the client does, until the upload's abort arrives or a second passes.
func TestACancelWaitsForThePartInFlightBeforeAborting(t *testing.T) {
	srv := s3test.Start(t, "backups")
	up, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(up)
	held, abortSeen := make(chan struct{}), make(chan struct{})
	var holding, abortedWhileHeld atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodPut && q.Get("partNumber") == "1":
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			holding.Store(true)
			close(held)
			select {
			case <-abortSeen:
			case <-time.After(time.Second):
			}
			holding.Store(false)
			// Stored whatever the client did meanwhile.
			out := r.Clone(context.Background())
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			proxy.ServeHTTP(w, out)
		case r.Method == http.MethodDelete && q.Has("uploadId"):
			if holding.Load() {
				abortedWhileHeld.Store(true)
				close(abortSeen)
			}
			proxy.ServeHTTP(w, r)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer front.Close()
	tg := target(t, srv, "s3://backups/studio", func(c *s3target.Config) { c.Endpoint = front.URL })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := tg.Mark(ctx, "inst"); err != nil {
		t.Fatal(err)
	}
	w, err := tg.Create(ctx, "inst", "shop/production/snap", "database-main.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 6<<20)); err != nil { // the first part goes
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the first part did not reach the server within a minute")
	}
	cancel() // the run is cancelled while the part is stored
	w.Abort()
	if abortedWhileHeld.Load() {
		t.Error("the upload was aborted while its part in flight was still unanswered")
	}
	if ups, err := srv.Client(t, "backups").ListMultipart(context.Background(), "studio/"); err != nil || len(ups) != 0 {
		t.Fatalf("uploads left after the abort: %v %v", ups, err)
	}
	if objs := srv.Objects(t, "backups", "studio/shop/"); len(objs) != 0 {
		t.Fatalf("objects left after the abort: %v", objs)
	}
}

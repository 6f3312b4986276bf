package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
)

// The volume agent as the helper pods run it: a bucket's objects archived
// (endpoint and keys from the claim's environment) and extracted into
// another bucket make it hold exactly them, large ones in parts, what it
// held before gone; a volume's files likewise between two directories.
func TestVolumeAgentArchivesAndExtracts(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t, "source", "target")
	host, port, _ := net.SplitHostPort(srv.Addr)
	// The bucket's variables go to the agent's process, as the helper
	// pod's environment; the test's own stays as it is.
	bucket := func(name string) []string {
		return []string{"BUCKET_HOST=" + host, "BUCKET_PORT=" + port, "BUCKET_NAME=" + name, "BUCKET_REGION=" + srv.Region,
			"AWS_ACCESS_KEY_ID=" + srv.Access, "AWS_SECRET_ACCESS_KEY=" + srv.Secret}
	}
	ctx := context.Background()
	src, dst := srv.Client(t, "source"), srv.Client(t, "target")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20+3) // 16 MiB and 48 bytes: two parts
	objects := map[string][]byte{"a.txt": []byte("first"), "deep/key with spaces/é.bin": big, "empty": {}}
	for k, v := range objects {
		if err := src.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := dst.Put(ctx, "stale.txt", []byte("not in the snapshot")); err != nil {
		t.Fatal(err)
	}
	var archive, out bytes.Buffer
	if err := volumeAgent(bucket("source"), nil, &archive, "bucket-archive"); err != nil {
		t.Fatal(err)
	}
	if err := volumeAgent(bucket("target"), bytes.NewReader(archive.Bytes()), &out, "bucket-extract"); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != fmt.Sprintf("3 objects, %d bytes", len(big)+5) {
		t.Fatalf("extract says %q", got)
	}
	objs, err := dst.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(objects) {
		t.Fatalf("the target holds %v, want the 3 objects of the snapshot", objs)
	}
	for _, o := range objs {
		rc, _, err := dst.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(body, objects[o.Key]) {
			t.Fatalf("%s differs after the round trip", o.Key)
		}
	}

	// A changed byte in the archive: the extraction fails, naming it.
	changed := bytes.Replace(archive.Bytes(), []byte("first"), []byte("First"), 1)
	if err := volumeAgent(bucket("target"), bytes.NewReader(changed), io.Discard, "bucket-extract"); err == nil || !strings.Contains(err.Error(), "objects/0 does not match its checksum") {
		t.Fatalf("a changed archive: %v", err)
	}

	// A volume's files.
	from, to := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(from, "photos"), 0o755)
	os.WriteFile(filepath.Join(from, "photos", "cat.jpg"), big[:1000], 0o640)
	os.WriteFile(filepath.Join(to, "later.txt"), []byte("gone after the restore"), 0o600)
	archive.Reset()
	if err := runVolumeAgent(ctx, []string{"archive", from}, nil, &archive); err != nil {
		t.Fatal(err)
	}
	if err := runVolumeAgent(ctx, []string{"extract", to}, bytes.NewReader(archive.Bytes()), io.Discard); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "photos", "cat.jpg")); err != nil || !bytes.Equal(b, big[:1000]) {
		t.Fatalf("photos/cat.jpg after the extraction: %v", err)
	}
	if _, err := os.Stat(filepath.Join(to, "later.txt")); err == nil {
		t.Fatal("a file the snapshot did not have stays")
	}
	if err := runVolumeAgent(ctx, []string{"nonsense"}, nil, io.Discard); err == nil {
		t.Fatal("an unknown command was accepted")
	}
}

// volumeAgent runs `studio volume-agent args` as a helper pod does: this
// test binary as a process of its own (STUDIO_TEST_MAIN), env added to its
// environment, stdin and stdout the archive. Its error carries what the
// agent printed on stderr.
func volumeAgent(env []string, stdin io.Reader, stdout io.Writer, args ...string) error {
	cmd := exec.Command(os.Args[0], append([]string{"volume-agent"}, args...)...)
	cmd.Env = append(append(os.Environ(), "STUDIO_TEST_MAIN=1"), env...)
	cmd.Stdin, cmd.Stdout = stdin, stdout
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("studio volume-agent %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return nil
}

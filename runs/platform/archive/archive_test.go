package archive

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case d.Type().IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

// A directory archived and extracted over another is byte for byte the
// first: files, nested folders, empty files, links (not followed) and
// modes; what the target held before is gone.
func TestWriteDirAndExtractRoundTrip(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "alpha", "docs/b/c.bin": strings.Repeat("\x00\xff", 70000), "empty": ""})
	if err := os.Symlink("../a.txt", filepath.Join(src, "docs", "link")); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(src, "a.txt"), 0o600)
	var buf bytes.Buffer
	sum, err := WriteDir(&buf, src)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 3 || sum.Bytes != 5+140000 {
		t.Fatalf("archived %+v", sum)
	}
	dst := t.TempDir()
	writeTree(t, dst, map[string]string{"a.txt": "written after the snapshot", "new/file": "gone after the restore"})
	got, err := Extract(bytes.NewReader(buf.Bytes()), dst, true)
	if err != nil {
		t.Fatal(err)
	}
	if got != sum {
		t.Fatalf("extracted %+v, archived %+v", got, sum)
	}
	want, have := readTree(t, src), readTree(t, dst)
	if len(want) != len(have) {
		t.Fatalf("extracted %v, want %v", keys(have), keys(want))
	}
	for k, v := range want {
		if have[k] != v {
			t.Fatalf("%s differs after the round trip", k)
		}
	}
	if st, _ := os.Stat(filepath.Join(dst, "a.txt")); st.Mode().Perm() != 0o600 {
		t.Fatalf("a.txt has mode %v", st.Mode().Perm())
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A changed byte, a cut stream, an entry outside the folder: each is an
// error naming what is wrong.
func TestReadRefusesWhatDoesNotMatch(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"one": "first file", "two": "second file"})
	var buf bytes.Buffer
	if _, err := WriteDir(&buf, src); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	changed := bytes.Replace(good, []byte("second file"), []byte("second fil!"), 1)
	if _, err := Read(bytes.NewReader(changed), func(Entry) error { return nil }); err == nil || err.Error() != "two does not match its checksum from when the snapshot was taken" {
		t.Fatalf("a changed byte: %v", err)
	}
	if _, err := Read(bytes.NewReader(good[:1024]), func(Entry) error { return nil }); err == nil {
		t.Fatal("a cut archive was read without an error")
	}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("x"))
	tw.Close()
	dst := t.TempDir()
	if _, err := Extract(&evil, filepath.Join(dst), false); err == nil || !strings.Contains(err.Error(), "outside its folder") {
		t.Fatalf("an entry outside the folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "escape")); err == nil {
		t.Fatal("an entry was written outside the folder")
	}
}

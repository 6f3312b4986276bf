// Package archive is the snapshot format of a volume's files and of a
// bucket's objects: a tar stream (PAX) of the entries, followed by a
// manifest entry listing each regular file's size and SHA-256, so that a
// restore or a drill checks every file it wrote against what was read
// when the snapshot was taken. It imports only the standard library: the
// Studio's volume agent (studio volume-agent, run in a helper pod next to
// a volume) writes and extracts it, and the Kubernetes platform reads it.
package archive

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ManifestName is the name of the manifest entry, last in the stream; no
// entry of the data has an absolute name.
const ManifestName = "/.skali-manifest.json"

// maxManifest bounds the manifest read back (a million files of 200
// bytes).
const maxManifest = 256 << 20

// File is one regular file's record in the manifest.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest lists the regular files of an archive.
type Manifest struct {
	Files []File `json:"files"`
}

// Summary is what an archive held or an extraction wrote.
type Summary struct {
	Files int
	Bytes int64
}

// Writer writes an archive: entries, then the manifest on Close.
type Writer struct {
	tw       *tar.Writer
	manifest Manifest
	sum      Summary
}

// NewWriter starts an archive on w.
func NewWriter(w io.Writer) *Writer { return &Writer{tw: tar.NewWriter(w)} }

// Dir adds a directory entry.
func (a *Writer) Dir(name string, mode fs.FileMode, mtime time.Time, uid, gid int) error {
	return a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(mode.Perm()), ModTime: mtime, Uid: uid, Gid: gid, Format: tar.FormatPAX})
}

// Symlink adds a symbolic link entry.
func (a *Writer) Symlink(name, target string, mtime time.Time, uid, gid int) error {
	return a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: mtime, Uid: uid, Gid: gid, Format: tar.FormatPAX})
}

// KeyRecord is the PAX record of an object's key in a bucket's archive,
// whose entries are named objects/N (a key need not be a file name).
const KeyRecord = "SKALI.key"

// File adds a regular file of size bytes read from r, hashing it.
func (a *Writer) File(name string, size int64, mode fs.FileMode, mtime time.Time, uid, gid int, r io.Reader) error {
	return a.file(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: int64(mode.Perm()), ModTime: mtime, Uid: uid, Gid: gid, Format: tar.FormatPAX}, r)
}

// Object adds a bucket's object of size bytes read from r as the n-th
// entry, its key in the entry's KeyRecord.
func (a *Writer) Object(n int, key string, size int64, r io.Reader) error {
	return a.file(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("objects/%d", n), Size: size, Mode: 0o600, Format: tar.FormatPAX,
		PAXRecords: map[string]string{KeyRecord: key}}, r)
}

func (a *Writer) file(hdr *tar.Header, r io.Reader) error {
	name, size := hdr.Name, hdr.Size
	if err := a.tw.WriteHeader(hdr); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(a.tw, io.TeeReader(io.LimitReader(r, size), h))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%s changed size while it was read (%d of %d bytes)", name, n, size)
	}
	a.manifest.Files = append(a.manifest.Files, File{Name: name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))})
	a.sum.Files++
	a.sum.Bytes += size
	return nil
}

// Close writes the manifest and ends the archive.
func (a *Writer) Close() (Summary, error) {
	data, err := json.Marshal(a.manifest)
	if err != nil {
		return a.sum, err
	}
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: ManifestName, Size: int64(len(data)), Mode: 0o600, Format: tar.FormatPAX}); err != nil {
		return a.sum, err
	}
	if _, err := a.tw.Write(data); err != nil {
		return a.sum, err
	}
	return a.sum, a.tw.Close()
}

// WriteDir archives everything under dir (not following symbolic links;
// sockets, devices and pipes are skipped), in name order.
func WriteDir(w io.Writer, dir string) (Summary, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Summary{}, err
	}
	defer root.Close()
	a := NewWriter(w)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		info, err := root.Lstat(name)
		if err != nil {
			return err
		}
		uid, gid := owner(info)
		switch m := info.Mode(); {
		case m.IsDir():
			return a.Dir(name, m, info.ModTime(), uid, gid)
		case m&fs.ModeSymlink != 0:
			target, err := root.Readlink(name)
			if err != nil {
				return err
			}
			return a.Symlink(name, target, info.ModTime(), uid, gid)
		case m.IsRegular():
			f, err := root.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			return a.File(name, info.Size(), m, info.ModTime(), uid, gid, f)
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	return a.Close()
}

// Entry is one entry read from an archive, for Read.
type Entry struct {
	Header *tar.Header
	// Body is a regular file's content (nil for others); what Read's
	// callback does not read of it is hashed all the same.
	Body io.Reader
}

// ErrNoManifest is an archive that ends without its manifest: cut short.
var ErrNoManifest = errors.New("the archive ends without its manifest: it was cut short")

// Read reads an archive, calling each for every entry but the manifest,
// and checks every regular file against the manifest at its end: same
// names, sizes and SHA-256. A mismatch is an error naming the file.
func Read(r io.Reader, each func(Entry) error) (Summary, error) {
	tr := tar.NewReader(r)
	got := map[string]File{}
	var sum Summary
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return sum, ErrNoManifest
		}
		if err != nil {
			return sum, fmt.Errorf("the archive cannot be read: %w", err)
		}
		if h.Name == ManifestName {
			data, err := io.ReadAll(io.LimitReader(tr, maxManifest))
			if err != nil {
				return sum, fmt.Errorf("the archive's manifest cannot be read: %v", err)
			}
			var m Manifest
			if err := json.Unmarshal(data, &m); err != nil {
				return sum, fmt.Errorf("the archive's manifest cannot be read: %v", err)
			}
			return sum, check(m, got)
		}
		if err := validName(h.Name); err != nil {
			return sum, err
		}
		e := Entry{Header: h}
		var hr *hashReader
		if h.Typeflag == tar.TypeReg {
			hr = &hashReader{r: tr, h: sha256.New()}
			e.Body = hr
		}
		if err := each(e); err != nil {
			return sum, err
		}
		if hr != nil {
			if _, err := io.Copy(io.Discard, hr); err != nil {
				return sum, fmt.Errorf("the archive cannot be read: %w", err)
			}
			got[h.Name] = File{Name: h.Name, Size: hr.n, SHA256: hex.EncodeToString(hr.h.Sum(nil))}
			sum.Files++
			sum.Bytes += hr.n
		}
	}
}

func check(m Manifest, got map[string]File) error {
	if len(m.Files) != len(got) {
		return fmt.Errorf("the archive holds %d files, its manifest %d", len(got), len(m.Files))
	}
	for _, want := range m.Files {
		g, ok := got[want.Name]
		switch {
		case !ok:
			return fmt.Errorf("%s is in the manifest but not in the archive", want.Name)
		case g.Size != want.Size:
			return fmt.Errorf("%s has %d bytes, %d when the snapshot was taken", want.Name, g.Size, want.Size)
		case g.SHA256 != want.SHA256:
			return fmt.Errorf("%s does not match its checksum from when the snapshot was taken", want.Name)
		}
	}
	return nil
}

type hashReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

// validName refuses an entry that would land outside the directory it is
// extracted into.
func validName(name string) error {
	clean := strings.TrimSuffix(name, "/")
	if clean == "" || !fs.ValidPath(clean) {
		return fmt.Errorf("the archive has an entry named %q, outside its folder", name)
	}
	return nil
}

// Extract writes the archive into dir, which it first empties when
// replace is set (a restore makes the volume exactly the snapshot's), and
// checks every file against the manifest. Owners are set when the process
// may (root), modes and times always. Links cannot point the writes
// outside dir: every write goes through an os.Root of dir.
func Extract(r io.Reader, dir string, replace bool) (Summary, error) {
	if replace {
		if err := emptyDir(dir); err != nil {
			return Summary{}, err
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Summary{}, err
	}
	defer root.Close()
	type later struct {
		name  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []later
	asRoot := os.Geteuid() == 0
	sum, err := Read(r, func(e Entry) error {
		h := e.Header
		name := strings.TrimSuffix(h.Name, "/")
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil && path.Dir(name) != "." {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, later{name, fs.FileMode(h.Mode).Perm(), h.ModTime})
		case tar.TypeSymlink:
			root.Remove(name)
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
			if asRoot {
				root.Lchown(name, h.Uid, h.Gid)
			}
			return nil
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, e.Body); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := root.Chmod(name, fs.FileMode(h.Mode).Perm()); err != nil {
				return err
			}
			root.Chtimes(name, h.ModTime, h.ModTime)
		default:
			return nil
		}
		if asRoot {
			root.Chown(name, h.Uid, h.Gid)
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	// Directories last, deepest first: their files are in.
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i].name) > len(dirs[j].name) })
	for _, d := range dirs {
		root.Chmod(d.name, d.mode)
		root.Chtimes(d.name, d.mtime, d.mtime)
	}
	return sum, nil
}

// emptyDir removes everything in dir, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"io/fs"
	"strings"
)

// Target is a backup target: where the files of snapshots are written and
// read. Both kinds implement it, a directory on the Studio's machine (the
// local platform's DirectoryTarget) and an S3-compatible bucket prefix
// (package s3target), so a platform writes and reads snapshots the same
// way whatever the target. Every name is relative to the target: dir is a
// snapshot's folder (project/environment/snapshot), name a file in it;
// nothing is ever written outside the target.
type Target interface {
	// String names the target for people, without any credential.
	String() string
	// Mark checks for real that the target can be written, read back and
	// deleted from, refuses one whose marker names another installation,
	// and writes installation's marker. Its errors are sentences for the
	// installation admin setting it.
	Mark(ctx context.Context, installation string) error
	// Check says why snapshots cannot be read (or, with write, written)
	// now: a *TargetError (gone, unmarked, another installation's,
	// read-only), or nil.
	Check(ctx context.Context, installation string, write bool) error
	// Create starts writing the file name of snapshot dir, after checking
	// that the target is still installation's. Nothing is visible under
	// that name until Commit succeeds; Abort (or a Commit that fails)
	// leaves nothing behind.
	Create(ctx context.Context, installation, dir, name string) (TargetWriter, error)
	// Size returns the size of a snapshot's file: an error wrapping
	// fs.ErrNotExist when it is missing, a *NotRegularError when it is not
	// a plain file, a SnapshotProblem when the whole snapshot is gone.
	Size(ctx context.Context, installation, dir, name string) (int64, error)
	// Open opens a snapshot's file for reading.
	Open(ctx context.Context, installation, dir, name string) (io.ReadCloser, error)
	// Remove deletes snapshot dir and everything in it (and any upload
	// into it that never completed); nothing outside it.
	Remove(ctx context.Context, installation, dir string) error
}

// TargetWriter streams one snapshot file to its target. Its memory is
// bounded whatever the file's size.
type TargetWriter interface {
	io.Writer
	// Commit makes the file visible and returns its name, size and SHA-256.
	Commit() (SnapshotFile, error)
	// Abort abandons the file; it is safe after Commit (then a no-op).
	Abort()
}

// TargetMarker is the file (or object), at the top of a backup target,
// that names the installation whose target it is. It is written when the
// target is set and checked before every snapshot: a target that lost it
// is gone, unmounted or replaced.
const TargetMarker = ".skali-backup-target"

// MarkerText is the marker naming installation, in a directory target and
// (as an object) in an S3 one.
func MarkerText(installation string) string {
	return "This is the backup target of a Skali Studio. Do not edit or delete this file:\n" +
		"the Studio writes snapshots here only while it finds it.\ninstallation " + installation + "\n"
}

// MarkerOwner returns the installation a marker's text names.
func MarkerOwner(text []byte) (string, error) {
	for line := range strings.Lines(string(text)) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "installation "); ok && id != "" {
			return id, nil
		}
	}
	return "", errors.New("it names no installation")
}

// NotRegularError is a snapshot file that is not a plain file (a link, a
// directory, a device): Problem says which.
type NotRegularError struct{ Problem string }

func (e *NotRegularError) Error() string { return e.Problem }

// SnapshotProblem is what is wrong with a whole snapshot ("its directory
// is missing"), said as it is.
type SnapshotProblem string

func (e SnapshotProblem) Error() string { return string(e) }

// Summer counts and hashes what is written through it, for a
// TargetWriter's SnapshotFile.
type Summer struct {
	h hash.Hash
	n int64
}

// NewSummer returns an empty Summer.
func NewSummer() *Summer { return &Summer{h: sha256.New()} }

func (s *Summer) Write(p []byte) (int, error) {
	s.h.Write(p)
	s.n += int64(len(p))
	return len(p), nil
}

// File is what was written, as name.
func (s *Summer) File(name string) SnapshotFile {
	return SnapshotFile{File: name, Size: s.n, SHA256: hex.EncodeToString(s.h.Sum(nil))}
}

// validFileName refuses a snapshot file name that is not one path element.
func validFileName(name string) bool {
	return fs.ValidPath(name) && name != "." && !strings.Contains(name, "/")
}

// fileProblem says what is wrong with a snapshot file without any path.
func fileProblem(file SnapshotFile, err error) error {
	var fe *SnapshotFileError
	var te *TargetError
	var sp SnapshotProblem
	var nr *NotRegularError
	switch {
	case errors.As(err, &fe), errors.As(err, &te), errors.As(err, &sp):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return &SnapshotFileError{File: file.File, Problem: "is missing"}
	case errors.As(err, &nr):
		return &SnapshotFileError{File: file.File, Problem: "cannot be read: " + nr.Problem}
	}
	return &SnapshotFileError{File: file.File, Problem: "cannot be read: " + err.Error()}
}

// CheckSnapshot says quickly (presence and size, nothing read) why the
// files of the snapshot at loc cannot be restored, or nil.
func CheckSnapshot(ctx context.Context, loc SnapshotLocation, files []SnapshotFile) error {
	if err := loc.Target.Check(ctx, loc.Installation, false); err != nil {
		return err
	}
	return checkSizes(files, func(name string) (int64, error) {
		return loc.Target.Size(ctx, loc.Installation, loc.Dir, name)
	})
}

// TargetLister is a target that lists the files under a folder with their
// sizes in a few requests (an S3 prefix), so that checking many snapshots
// needs no request per file.
type TargetLister interface {
	// Sizes returns the size of every file under dir, by its path
	// relative to dir.
	Sizes(ctx context.Context, installation, dir string) (map[string]int64, error)
}

// CheckSnapshotSizes is CheckSnapshot's verdict on a snapshot's files from
// sizes listed beforehand (by file name), its target checked already.
func CheckSnapshotSizes(files []SnapshotFile, sizes map[string]int64) error {
	return checkSizes(files, func(name string) (int64, error) {
		n, ok := sizes[name]
		if !ok {
			return 0, fs.ErrNotExist
		}
		return n, nil
	})
}

func checkSizes(files []SnapshotFile, size func(name string) (int64, error)) error {
	for _, file := range files {
		if !validFileName(file.File) {
			return &SnapshotFileError{File: file.File, Problem: "is not a snapshot file name"}
		}
		n, err := size(file.File)
		if err != nil {
			return fileProblem(file, err)
		}
		if n != file.Size {
			return &SnapshotFileError{File: file.File, Problem: "is not the size recorded when it was written"}
		}
	}
	return nil
}

// VerifySnapshot reads every file of the snapshot at loc and checks its
// size and SHA-256 against what was recorded. It stops when ctx ends.
func VerifySnapshot(ctx context.Context, loc SnapshotLocation, files []SnapshotFile) error {
	for _, file := range files {
		if err := VerifyFile(ctx, loc, file); err != nil {
			return err
		}
	}
	return nil
}

// VerifyFile reads one snapshot file in chunks, stopping when ctx ends,
// and checks it against what was recorded. A mismatch says so without any
// checksum: the file may not be the snapshot's at all.
func VerifyFile(ctx context.Context, loc SnapshotLocation, file SnapshotFile) error {
	return CopyVerified(ctx, loc, file, io.Discard)
}

// CopyVerified streams a snapshot's file from its target into dst while
// checking it: present, the size and SHA-256 recorded when it was written
// (a *SnapshotFileError naming the file when not). What dst received is
// only good when it returns nil.
func CopyVerified(ctx context.Context, loc SnapshotLocation, file SnapshotFile, dst io.Writer) error {
	if !validFileName(file.File) {
		return &SnapshotFileError{File: file.File, Problem: "is not a snapshot file name"}
	}
	f, err := loc.Target.Open(ctx, loc.Installation, loc.Dir, file.File)
	if err != nil {
		return fileProblem(file, err)
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 256<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if n > file.Size {
			break // longer than recorded: no need to read the rest
		}
		if _, werr := dst.Write(buf[:k]); werr != nil {
			return werr
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fileProblem(file, err)
		}
	}
	if n != file.Size {
		return &SnapshotFileError{File: file.File, Problem: "is not the size recorded when it was written"}
	}
	if hex.EncodeToString(h.Sum(nil)) != file.SHA256 {
		return &SnapshotFileError{File: file.File, Problem: "does not match its recorded checksum"}
	}
	return nil
}

package runs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// BackupPlatform snapshots and restores an environment's services.
type BackupPlatform interface {
	// CheckTarget says why the platform cannot write snapshots to target
	// (a directory for the local platform), or nil.
	CheckTarget(target string) error
	// Snapshot writes one service's snapshot into dir and returns its file.
	Snapshot(ctx context.Context, envID int64, svc SnapshotService, dir string) (SnapshotFile, error)
	// RemoveSnapshot deletes a snapshot's directory.
	RemoveSnapshot(ctx context.Context, dir string) error
	// StopEnvironment and StartEnvironment stop and start every application
	// around a restore.
	StopEnvironment(ctx context.Context, envID int64) error
	StartEnvironment(ctx context.Context, envID int64) error
	// Restore replays one service from its snapshot file after verifying
	// its size and SHA-256.
	Restore(ctx context.Context, envID int64, svc SnapshotService, dir string, file SnapshotFile) error
}

// SnapshotService is a database, bucket or volume to snapshot.
type SnapshotService struct {
	// Kind is database, bucket or volume; a volume's Name is app/volume.
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// String is how the service reads: "database main".
func (s SnapshotService) String() string { return s.Kind + " " + s.Name }

// SnapshotFile is one service's snapshot file.
type SnapshotFile struct {
	File   string `json:"file"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// fileName is the service's file in a snapshot directory.
func (s SnapshotService) fileName() string {
	return s.Kind + "-" + strings.ReplaceAll(s.Name, "/", "-") + ".snapshot"
}

// CheckTarget implements BackupPlatform: the local platform writes to a
// directory on the Studio's machine, which must exist and be writable.
func (l *Local) CheckTarget(target string) error {
	if strings.Contains(target, "://") {
		return errors.New("The local platform writes snapshots to a directory on the Studio's machine (an absolute path such as /var/backups/skali); it cannot write to " + strings.SplitN(target, "://", 2)[0] + ":// URLs.")
	}
	if !filepath.IsAbs(target) {
		return errors.New("Write an absolute directory path, such as /var/backups/skali.")
	}
	st, err := os.Stat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("This directory does not exist on the Studio's machine. Create it first.")
	}
	if err != nil {
		return fmt.Errorf("This directory cannot be read: %s.", pathErrText(err))
	}
	if !st.IsDir() {
		return errors.New("This is a file, not a directory.")
	}
	f, err := os.CreateTemp(target, ".skali-target-check-*")
	if err != nil {
		return fmt.Errorf("The Studio cannot write to this directory: %s.", pathErrText(err))
	}
	name := f.Name()
	_, werr := f.WriteString("skali backup target check\n")
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, cerr, rerr); err != nil {
		return fmt.Errorf("The Studio cannot write to this directory: %s.", pathErrText(err))
	}
	return nil
}

// pathErrText is an OS error without the path it repeats.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Snapshot implements BackupPlatform: the local platform has no real data,
// so it writes a simulated dump of the service (a header and random
// bytes) and records its size and SHA-256.
func (l *Local) Snapshot(ctx context.Context, envID int64, svc SnapshotService, dir string) (SnapshotFile, error) {
	if err := l.step(ctx); err != nil {
		return SnapshotFile{}, err
	}
	if r := l.Faults.get(func(f *Faults) string { return f.Snapshot[svc.String()] }); r != "" {
		return SnapshotFile{}, fmt.Errorf("%s", r)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return SnapshotFile{}, err
	}
	name := svc.fileName()
	f, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return SnapshotFile{}, err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	w := io.MultiWriter(f, h)
	n1, err := fmt.Fprintf(w, "skali local platform snapshot\nenvironment %d\n%s\n", envID, svc)
	if err == nil {
		var n2 int64
		n2, err = io.CopyN(w, rand.Reader, 4096)
		n1 += int(n2)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return SnapshotFile{}, err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return SnapshotFile{}, err
	}
	return SnapshotFile{File: name, Size: int64(n1), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// RemoveSnapshot implements BackupPlatform.
func (l *Local) RemoveSnapshot(ctx context.Context, dir string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("runs: refusing to remove snapshot directory %q", dir)
	}
	return os.RemoveAll(dir)
}

// StopEnvironment implements BackupPlatform.
func (l *Local) StopEnvironment(ctx context.Context, envID int64) error { return l.step(ctx) }

// StartEnvironment implements BackupPlatform.
func (l *Local) StartEnvironment(ctx context.Context, envID int64) error { return l.step(ctx) }

// Restore implements BackupPlatform: the file must be there with the size
// and SHA-256 recorded when it was written.
func (l *Local) Restore(ctx context.Context, envID int64, svc SnapshotService, dir string, file SnapshotFile) error {
	if err := l.step(ctx); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, file.File))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the snapshot file %s is missing", file.File)
	}
	if err != nil {
		return fmt.Errorf("the snapshot file %s cannot be read: %s", file.File, pathErrText(err))
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("the snapshot file %s cannot be read: %s", file.File, pathErrText(err))
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != file.Size || sum != file.SHA256 {
		return fmt.Errorf("the snapshot file %s is corrupted: its SHA-256 is %s…, recorded %s…", file.File, sum[:12], file.SHA256[:min(12, len(file.SHA256))])
	}
	return nil
}

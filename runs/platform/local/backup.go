package local

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
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/skali-dev/studio/runs/platform"
)

// TargetMarker is the file, at the top of a backup target, that names the
// installation whose target it is. It is written when the target is set
// and checked before every snapshot: a target that lost it is gone,
// unmounted or replaced.
const TargetMarker = ".skali-backup-target"

// TargetFault makes a backup target fail between two snapshot files, as a
// real disk does, for tests and demos: once AfterFiles snapshot files have
// been written through the platform, nothing more can be created under
// any target. A full disk (the default) answers "no space left on device"
// and still lets files be removed; one remounted read-only (ReadOnly)
// answers "read-only file system" to removals too.
type TargetFault struct {
	AfterFiles int  `json:"afterFiles"`
	ReadOnly   bool `json:"readOnly,omitempty"`
	written    int
}

// wroteSnapshotFile counts a snapshot file written, for Faults.Target.
func (l *Platform) wroteSnapshotFile() {
	if l.Faults == nil {
		return
	}
	l.Faults.mu.Lock()
	defer l.Faults.mu.Unlock()
	if t := l.Faults.Target; t != nil {
		t.written++
	}
}

// targetFault is the error Faults.Target answers a creation (create) or
// a removal with, or nil.
func (l *Platform) targetFault(create bool) error {
	if l.Faults == nil {
		return nil
	}
	l.Faults.mu.Lock()
	defer l.Faults.mu.Unlock()
	t := l.Faults.Target
	switch {
	case t == nil || t.written < t.AfterFiles:
		return nil
	case t.ReadOnly:
		return syscall.EROFS
	case create:
		return syscall.ENOSPC
	}
	return nil
}

// targetFS is a backup target opened as an os.Root: every path stays
// inside it. fault, when set, is asked before each creation and removal
// and makes it fail as a full or read-only disk would (Faults.Target);
// everything else is os.Root's own call on the real files.
type targetFS struct {
	*os.Root
	fault func(create bool) error
}

func (t *targetFS) refuse(op, name string, create bool) error {
	if t.fault == nil {
		return nil
	}
	if err := t.fault(create); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// OpenFile is os.Root's, refused by the fault when it would create name.
func (t *targetFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := t.refuse("open", name, true); err != nil {
			return nil, err
		}
	}
	return t.Root.OpenFile(name, flag, perm)
}

// Mkdir is os.Root's, refused by the fault.
func (t *targetFS) Mkdir(name string, perm fs.FileMode) error {
	if err := t.refuse("mkdir", name, true); err != nil {
		return err
	}
	return t.Root.Mkdir(name, perm)
}

// Rename is os.Root's, refused by the fault.
func (t *targetFS) Rename(oldname, newname string) error {
	if err := t.refuse("rename", newname, true); err != nil {
		return err
	}
	return t.Root.Rename(oldname, newname)
}

// Remove is os.Root's, refused by the fault when name exists.
func (t *targetFS) Remove(name string) error {
	if _, err := t.Root.Lstat(name); err == nil {
		if err := t.refuse("remove", name, false); err != nil {
			return err
		}
	}
	return t.Root.Remove(name)
}

// RemoveAll is os.Root's, refused by the fault when name exists.
func (t *targetFS) RemoveAll(name string) error {
	if _, err := t.Root.Lstat(name); err == nil {
		if err := t.refuse("unlinkat", name, false); err != nil {
			return err
		}
	}
	return t.Root.RemoveAll(name)
}

// fileName is the service's file in a snapshot directory.
func fileName(s platform.SnapshotService) string {
	return s.Kind + "-" + strings.ReplaceAll(s.Name, "/", "-") + ".snapshot"
}

// targetPath checks the form of a local target.
func targetPath(target string) error {
	if strings.Contains(target, "://") {
		return errors.New("The local platform writes snapshots to a directory on the Studio's machine (an absolute path such as /var/backups/skali); it cannot write to " + strings.SplitN(target, "://", 2)[0] + ":// URLs.")
	}
	if !filepath.IsAbs(target) {
		return errors.New("Write an absolute directory path, such as /var/backups/skali.")
	}
	return nil
}

// SetTarget implements platform.BackupPlatform: the directory must exist (it is
// never created: a missing directory is more often an unmounted disk than
// a wish), be a directory itself rather than a symbolic link, be writable,
// and not be marked by another installation. Its marker is written.
func (l *Platform) SetTarget(target, installation string) error {
	if err := targetPath(target); err != nil {
		return err
	}
	st, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("This directory does not exist on the Studio's machine. Create it (or mount its disk) first.")
	}
	if err != nil {
		return fmt.Errorf("This directory cannot be read: %s.", pathErrText(err))
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		dest, _ := os.Readlink(target)
		return fmt.Errorf("This is a symbolic link (to %s). The Studio does not follow links to its backups: write the directory itself.", dest)
	}
	if !st.IsDir() {
		return errors.New("This is a file, not a directory.")
	}
	r, err := os.OpenRoot(target)
	if err != nil {
		return fmt.Errorf("This directory cannot be opened: %s.", pathErrText(err))
	}
	defer r.Close()
	root := &targetFS{Root: r}
	if rst, err := root.Stat("."); err != nil || !os.SameFile(st, rst) {
		return errors.New("This directory changed while it was checked. Try again.")
	}
	if err := writable(root, st); err != nil {
		return fmt.Errorf("The Studio cannot write to this directory: %s.", err)
	}
	owner, err := readMarker(root)
	switch {
	case err == nil && owner == installation:
		return nil // set again: it is this installation's already
	case err == nil:
		return fmt.Errorf("This directory holds the backups of another Skali installation (its %s file names installation %s). Choose another directory; if that installation is gone for good, delete the file first.", TargetMarker, owner)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("This directory's %s file cannot be read: %s.", TargetMarker, err)
	}
	if err := writeFileAtomic(root, TargetMarker, []byte(markerText(installation))); err != nil {
		return fmt.Errorf("The Studio cannot write to this directory: %s.", pathErrText(err))
	}
	return nil
}

func markerText(installation string) string {
	return "This directory is the backup target of a Skali Studio. Do not edit or delete this file:\n" +
		"the Studio writes snapshots here only while it finds it.\ninstallation " + installation + "\n"
}

// readMarker returns the installation the target's marker names.
func readMarker(root *targetFS) (string, error) {
	f, err := openRegular(root, TargetMarker)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "installation "); ok && id != "" {
			return id, nil
		}
	}
	return "", errors.New("it names no installation")
}

// writable says why nothing can be created in the directory root, or nil.
// A directory that no one may write to (chmod a-w) counts as read-only even
// for a Studio running as root, which the kernel would let write anyway.
func writable(root *targetFS, st fs.FileInfo) error {
	if st.Mode().Perm()&0o222 == 0 {
		return errors.New("it is read-only (no one may write to it)")
	}
	name := ".skali-write-check-" + rand.Text()
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return errors.New(pathErrText(err))
	}
	_, werr := f.WriteString("skali backup target check\n")
	cerr := f.Close()
	rerr := root.Remove(name)
	if err := errors.Join(werr, cerr, rerr); err != nil {
		return errors.New(pathErrText(err))
	}
	return nil
}

// openTarget opens target as a root that nothing under it can escape,
// after checking that it is still this installation's target: a real
// directory (not a link), with its marker. write also checks that a file
// can be created in it.
func (l *Platform) openTarget(target, installation string, write bool) (*targetFS, error) {
	gone := func(problem string) error { return &platform.TargetError{Target: target, Problem: problem, Gone: true} }
	st, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, gone("does not exist (deleted, or its disk is not mounted); the Studio does not create it again")
	case err != nil:
		return nil, gone("cannot be read: " + pathErrText(err))
	case st.Mode()&fs.ModeSymlink != 0:
		return nil, gone("has been replaced by a symbolic link; the Studio does not follow links to its backups")
	case !st.IsDir():
		return nil, gone("is no longer a directory")
	}
	r, err := os.OpenRoot(target)
	if err != nil {
		return nil, gone("cannot be opened: " + pathErrText(err))
	}
	root := &targetFS{Root: r, fault: l.targetFault}
	if rst, err := root.Stat("."); err != nil || !os.SameFile(st, rst) {
		root.Close()
		return nil, gone("changed while it was opened")
	}
	owner, err := readMarker(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		root.Close()
		return nil, gone("has no " + TargetMarker + " file: its disk may not be mounted, or it was set before the Studio marked its targets (set it again on the installation page)")
	case err != nil:
		root.Close()
		return nil, gone("has a " + TargetMarker + " file that cannot be read")
	case owner != installation:
		root.Close()
		return nil, gone("is marked as another Skali installation's (its " + TargetMarker + " file names installation " + owner + ")")
	}
	if write {
		if err := writable(root, st); err != nil {
			root.Close()
			return nil, &platform.TargetError{Target: target, Problem: "cannot be written: " + err.Error()}
		}
	}
	return root, nil
}

// CheckTarget implements platform.BackupPlatform.
func (l *Platform) CheckTarget(target, installation string) error {
	if err := targetPath(target); err != nil {
		return &platform.TargetError{Target: target, Problem: "is not a directory path", Gone: true}
	}
	root, err := l.openTarget(target, installation, true)
	if err != nil {
		return err
	}
	return root.Close()
}

// snapshotDirs checks that every component of dir under root is a real
// directory, not a symbolic link: os.Root keeps every path inside the
// target, and this keeps a link planted inside it from redirecting a
// snapshot into another one. It returns fs.ErrNotExist when a component
// is missing.
func snapshotDirs(root *targetFS, dir string) error { return walkSnapshotDirs(root, dir, false) }

// makeSnapshotDirs creates the missing directories of dir under root, one
// component at a time, refusing any that is a link or not a directory.
func makeSnapshotDirs(root *targetFS, dir string) error { return walkSnapshotDirs(root, dir, true) }

// walkSnapshotDirs checks each component of dir under root in turn,
// creating a missing one when create is set (its errors then read as
// sentences) and refusing a link or anything that is not a directory.
func walkSnapshotDirs(root *targetFS, dir string, create bool) error {
	if !fs.ValidPath(dir) || dir == "." {
		return fmt.Errorf("runs: bad snapshot directory %q", dir)
	}
	p := ""
	for part := range strings.SplitSeq(dir, "/") {
		p = path.Join(p, part)
		st, err := root.Lstat(p)
		if create && errors.Is(err, fs.ErrNotExist) {
			if err := root.Mkdir(p, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
				return errors.New(pathErrText(err))
			}
			st, err = root.Lstat(p)
		}
		switch {
		case err != nil && create:
			return errors.New(pathErrText(err))
		case err != nil:
			return err
		case st.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link, which the Studio does not follow", p)
		case !st.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		}
	}
	return nil
}

// openRegular opens name under root for reading if it is a regular file
// itself: a symbolic link, a FIFO or a device is refused, never opened in
// a way that could block.
func openRegular(root *targetFS, name string) (*os.File, error) {
	st, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errNotRegular(st.Mode())
	}
	// O_NONBLOCK: should a FIFO take the file's place after the check, the
	// open returns at once and the check below refuses it.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fst, err := f.Stat()
	if err != nil || !fst.Mode().IsRegular() || !os.SameFile(st, fst) {
		f.Close()
		return nil, errors.New("it changed while it was opened")
	}
	return f, nil
}

func errNotRegular(m fs.FileMode) error {
	switch {
	case m&fs.ModeSymlink != 0:
		return errors.New("it is a symbolic link, which the Studio does not follow")
	case m.IsDir():
		return errors.New("it is a directory")
	default:
		return errors.New("it is not a regular file")
	}
}

// writeFileAtomic writes name under root through a temporary file.
func writeFileAtomic(root *targetFS, name string, data []byte) error {
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+"-"+rand.Text())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}

// pathErrText is an OS error without the path it repeats.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return err.Error()
}

// Snapshot implements platform.BackupPlatform: the local platform has no real data,
// so it writes a simulated dump of the service (a header and random
// bytes) and records its size and SHA-256.
func (l *Platform) Snapshot(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation) (platform.SnapshotFile, error) {
	if err := l.step(ctx); err != nil {
		return platform.SnapshotFile{}, err
	}
	if r := l.Faults.get(func(f *Faults) string { return f.Snapshot[svc.String()] }); r != "" {
		return platform.SnapshotFile{}, fmt.Errorf("%s", r)
	}
	root, err := l.openTarget(loc.Target, loc.Installation, true)
	if err != nil {
		return platform.SnapshotFile{}, err
	}
	defer root.Close()
	if err := makeSnapshotDirs(root, loc.Dir); err != nil {
		return platform.SnapshotFile{}, err
	}
	name := fileName(svc)
	var buf strings.Builder
	fmt.Fprintf(&buf, "skali local platform snapshot\nenvironment %d\n%s\n", env.ID, svc)
	if _, err := io.CopyN(&buf, rand.Reader, 4096); err != nil {
		return platform.SnapshotFile{}, err
	}
	data := []byte(buf.String())
	if err := writeFileAtomic(root, path.Join(loc.Dir, name), data); err != nil {
		return platform.SnapshotFile{}, errors.New(pathErrText(err))
	}
	l.wroteSnapshotFile()
	sum := sha256.Sum256(data)
	return platform.SnapshotFile{File: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, nil
}

// openSnapshot opens loc's directory for reading: the target must still be
// this installation's and every directory a real one.
func (l *Platform) openSnapshot(loc platform.SnapshotLocation) (*targetFS, error) {
	root, err := l.openTarget(loc.Target, loc.Installation, false)
	if err != nil {
		return nil, err
	}
	if err := snapshotDirs(root, loc.Dir); err != nil {
		root.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("its directory is missing")
		}
		return nil, err
	}
	return root, nil
}

// CheckSnapshot implements platform.BackupPlatform.
func (l *Platform) CheckSnapshot(ctx context.Context, loc platform.SnapshotLocation, files []platform.SnapshotFile) error {
	root, err := l.openSnapshot(loc)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, file := range files {
		st, err := root.Lstat(path.Join(loc.Dir, file.File))
		if err != nil {
			return fileProblem(file, err)
		}
		if !st.Mode().IsRegular() {
			return fileProblem(file, errNotRegular(st.Mode()))
		}
		if st.Size() != file.Size {
			return &platform.SnapshotFileError{File: file.File, Problem: "is not the size recorded when it was written"}
		}
	}
	return nil
}

// fileProblem says what is wrong with a snapshot file without repeating
// any path.
func fileProblem(file platform.SnapshotFile, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &platform.SnapshotFileError{File: file.File, Problem: "is missing"}
	}
	return &platform.SnapshotFileError{File: file.File, Problem: "cannot be read: " + pathErrText(err)}
}

// verifyFile reads one snapshot file in chunks, stopping when ctx ends,
// and checks it against what was recorded. A mismatch says so without
// any checksum: the file may not be the snapshot's at all.
func verifyFile(ctx context.Context, root *targetFS, dir string, file platform.SnapshotFile) error {
	if !fs.ValidPath(file.File) || strings.Contains(file.File, "/") {
		return &platform.SnapshotFileError{File: file.File, Problem: "is not a snapshot file name"}
	}
	f, err := openRegular(root, path.Join(dir, file.File))
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
		if err == io.EOF {
			break
		}
		if err != nil {
			return fileProblem(file, err)
		}
	}
	if n != file.Size {
		return &platform.SnapshotFileError{File: file.File, Problem: "is not the size recorded when it was written"}
	}
	if hex.EncodeToString(h.Sum(nil)) != file.SHA256 {
		return &platform.SnapshotFileError{File: file.File, Problem: "does not match its recorded checksum"}
	}
	return nil
}

// VerifySnapshot implements platform.BackupPlatform.
func (l *Platform) VerifySnapshot(ctx context.Context, loc platform.SnapshotLocation, files []platform.SnapshotFile) error {
	root, err := l.openSnapshot(loc)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, file := range files {
		if err := verifyFile(ctx, root, loc.Dir, file); err != nil {
			return err
		}
	}
	return nil
}

// RemoveSnapshot implements platform.BackupPlatform: nothing outside the snapshot's
// own directory is touched, whatever links were planted in the target.
func (l *Platform) RemoveSnapshot(ctx context.Context, loc platform.SnapshotLocation) error {
	root, err := l.openTarget(loc.Target, loc.Installation, false)
	if err != nil {
		return err
	}
	defer root.Close()
	parent := path.Dir(loc.Dir)
	if parent != "." {
		if err := snapshotDirs(root, parent); errors.Is(err, fs.ErrNotExist) {
			return nil // nothing there to remove
		} else if err != nil {
			return err
		}
	}
	// RemoveAll removes a link in the snapshot's place, not what it
	// points to, and never follows links inside the directory.
	if err := root.RemoveAll(loc.Dir); err != nil {
		return errors.New(pathErrText(err))
	}
	return nil
}

// StopEnvironment implements platform.BackupPlatform.
func (l *Platform) StopEnvironment(ctx context.Context, env platform.Env) error { return l.step(ctx) }

// StartEnvironment implements platform.BackupPlatform.
func (l *Platform) StartEnvironment(ctx context.Context, env platform.Env) error { return l.step(ctx) }

// Restore implements platform.BackupPlatform: the file must be there with the size
// and SHA-256 recorded when it was written.
func (l *Platform) Restore(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation, file platform.SnapshotFile) error {
	if err := l.step(ctx); err != nil {
		return err
	}
	root, err := l.openSnapshot(loc)
	if err != nil {
		return err
	}
	defer root.Close()
	return verifyFile(ctx, root, loc.Dir, file)
}

package local

import (
	"context"
	"crypto/rand"
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
const TargetMarker = platform.TargetMarker

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

// DirectoryTarget implements platform.DirectoryTargets: a directory on
// the Studio's machine as a backup target.
func (l *Platform) DirectoryTarget(target string) (platform.Target, error) {
	if err := targetPath(target); err != nil {
		return nil, err
	}
	return &dirTarget{path: target, fault: l.targetFault, wrote: l.wroteSnapshotFile}, nil
}

// dirTarget is a directory as a platform.Target. Every path under it is
// opened through os.Root without following symbolic links.
type dirTarget struct {
	path  string
	fault func(create bool) error
	wrote func()
}

func (d *dirTarget) String() string { return d.path }

// Mark implements platform.Target: the directory must exist (it is never
// created: a missing directory is more often an unmounted disk than a
// wish), be a directory itself rather than a symbolic link, be writable,
// and not be marked by another installation. Its marker is written.
func (d *dirTarget) Mark(ctx context.Context, installation string) error {
	target := d.path
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
	if err := writeFileAtomic(root, TargetMarker, []byte(platform.MarkerText(installation))); err != nil {
		return fmt.Errorf("The Studio cannot write to this directory: %s.", pathErrText(err))
	}
	return nil
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
	return platform.MarkerOwner(b)
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
func (d *dirTarget) open(installation string, write bool) (*targetFS, error) {
	target := d.path
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
	root := &targetFS{Root: r, fault: d.fault}
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

// Check implements platform.Target.
func (d *dirTarget) Check(ctx context.Context, installation string, write bool) error {
	root, err := d.open(installation, write)
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
		return &platform.NotRegularError{Problem: "it is a symbolic link, which the Studio does not follow"}
	case m.IsDir():
		return &platform.NotRegularError{Problem: "it is a directory"}
	default:
		return &platform.NotRegularError{Problem: "it is not a regular file"}
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

// Create implements platform.Target: the file is written under a
// temporary name in the snapshot's directory and renamed into place by
// Commit.
func (d *dirTarget) Create(ctx context.Context, installation, dir, name string) (platform.TargetWriter, error) {
	if !fs.ValidPath(name) || strings.Contains(name, "/") {
		return nil, fmt.Errorf("runs: bad snapshot file name %q", name)
	}
	root, err := d.open(installation, true)
	if err != nil {
		return nil, err
	}
	if err := makeSnapshotDirs(root, dir); err != nil {
		root.Close()
		return nil, err
	}
	final := path.Join(dir, name)
	tmp := path.Join(dir, "."+name+"-"+rand.Text())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		root.Close()
		return nil, errors.New(pathErrText(err))
	}
	return &dirWriter{d: d, root: root, f: f, tmp: tmp, final: final, name: name, sum: platform.NewSummer()}, nil
}

// dirWriter streams one snapshot file into its temporary file.
type dirWriter struct {
	d                *dirTarget
	root             *targetFS
	f                *os.File
	tmp, final, name string
	sum              *platform.Summer
	done             bool
}

func (w *dirWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.sum.Write(p[:n])
	if err != nil {
		return n, errors.New(pathErrText(err))
	}
	return n, nil
}

func (w *dirWriter) Commit() (platform.SnapshotFile, error) {
	if w.done {
		return platform.SnapshotFile{}, errors.New("runs: snapshot file written twice")
	}
	w.done = true
	defer w.root.Close()
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(w.tmp, w.final)
	}
	if err != nil {
		w.root.Remove(w.tmp)
		return platform.SnapshotFile{}, errors.New(pathErrText(err))
	}
	if w.d.wrote != nil {
		w.d.wrote()
	}
	return w.sum.File(w.name), nil
}

func (w *dirWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	w.root.Remove(w.tmp)
	w.root.Close()
}

// Snapshot implements platform.BackupPlatform: the local platform has no
// real data, so it streams a simulated dump of the service (a header and
// random bytes, SnapshotSize of them in all) to the target.
func (l *Platform) Snapshot(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation) (platform.SnapshotFile, error) {
	if err := l.step(ctx); err != nil {
		return platform.SnapshotFile{}, err
	}
	if r := l.Faults.get(func(f *Faults) string { return f.Snapshot[svc.String()] }); r != "" {
		return platform.SnapshotFile{}, fmt.Errorf("%s", r)
	}
	w, err := loc.Target.Create(ctx, loc.Installation, loc.Dir, fileName(svc))
	if err != nil {
		return platform.SnapshotFile{}, err
	}
	defer w.Abort()
	header := fmt.Sprintf("skali local platform snapshot\nenvironment %d\n%s\n", env.ID, svc)
	if _, err := io.WriteString(w, header); err != nil {
		return platform.SnapshotFile{}, err
	}
	size := l.SnapshotSize
	if size <= 0 {
		size = 4096
	}
	if err := copyRandom(ctx, w, size); err != nil {
		return platform.SnapshotFile{}, err
	}
	return w.Commit()
}

// copyRandom writes n random bytes to w in chunks, stopping when ctx ends.
func copyRandom(ctx context.Context, w io.Writer, n int64) error {
	buf := make([]byte, 64<<10)
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := int64(len(buf))
		if n < k {
			k = n
		}
		rand.Read(buf[:k])
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// openSnapshot opens dir for reading: the target must still be this
// installation's and every directory a real one.
func (d *dirTarget) openSnapshot(installation, dir string) (*targetFS, error) {
	root, err := d.open(installation, false)
	if err != nil {
		return nil, err
	}
	if err := snapshotDirs(root, dir); err != nil {
		root.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, platform.SnapshotProblem("its directory is missing")
		}
		return nil, err
	}
	return root, nil
}

// Size implements platform.Target.
func (d *dirTarget) Size(ctx context.Context, installation, dir, name string) (int64, error) {
	root, err := d.openSnapshot(installation, dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	st, err := root.Lstat(path.Join(dir, name))
	if err != nil {
		return 0, osProblem(err)
	}
	if !st.Mode().IsRegular() {
		return 0, errNotRegular(st.Mode())
	}
	return st.Size(), nil
}

// osProblem keeps fs.ErrNotExist and drops the path of other errors.
func osProblem(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var nr *platform.NotRegularError
	if errors.As(err, &nr) {
		return err
	}
	return errors.New(pathErrText(err))
}

// Open implements platform.Target: only a regular file is opened.
func (d *dirTarget) Open(ctx context.Context, installation, dir, name string) (io.ReadCloser, error) {
	root, err := d.openSnapshot(installation, dir)
	if err != nil {
		return nil, err
	}
	f, err := openRegular(root, path.Join(dir, name))
	if err != nil {
		root.Close()
		return nil, osProblem(err)
	}
	return &rootFile{File: f, root: root}, nil
}

// rootFile is a file that closes its target's root with it.
type rootFile struct {
	*os.File
	root *targetFS
}

func (f *rootFile) Close() error {
	err := f.File.Close()
	f.root.Close()
	return err
}

// Remove implements platform.Target: nothing outside the snapshot's own
// directory is touched, whatever links were planted in the target.
func (d *dirTarget) Remove(ctx context.Context, installation, dir string) error {
	root, err := d.open(installation, false)
	if err != nil {
		return err
	}
	defer root.Close()
	parent := path.Dir(dir)
	if parent != "." {
		if err := snapshotDirs(root, parent); errors.Is(err, fs.ErrNotExist) {
			return nil // nothing there to remove
		} else if err != nil {
			return err
		}
	}
	// RemoveAll removes a link in the snapshot's place, not what it
	// points to, and never follows links inside the directory.
	if err := root.RemoveAll(dir); err != nil {
		return errors.New(pathErrText(err))
	}
	return nil
}

// StopEnvironment implements platform.BackupPlatform.
func (l *Platform) StopEnvironment(ctx context.Context, env platform.Env) error { return l.step(ctx) }

// StartEnvironment implements platform.BackupPlatform.
func (l *Platform) StartEnvironment(ctx context.Context, env platform.Env) error { return l.step(ctx) }

// Restore implements platform.BackupPlatform: the file must be there with
// the size and SHA-256 recorded when it was written.
func (l *Platform) Restore(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation, file platform.SnapshotFile) error {
	if err := l.step(ctx); err != nil {
		return err
	}
	return platform.VerifyFile(ctx, loc, file)
}

// RestoreScratch implements platform.ScratchRestorer: the local platform's
// simulated services are their snapshot file, so a drill restores the file
// into scratch, checking its size and SHA-256 as it streams, and reads the
// restored copy back to prove it is whole. Its simulated databases have no
// tables, so none are counted.
func (l *Platform) RestoreScratch(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation, file platform.SnapshotFile, scratch string) (platform.ScratchCheck, error) {
	if err := l.step(ctx); err != nil {
		return platform.ScratchCheck{}, err
	}
	root, err := os.OpenRoot(scratch)
	if err != nil {
		return platform.ScratchCheck{}, fmt.Errorf("the scratch directory cannot be opened: %s", pathErrText(err))
	}
	defer root.Close()
	f, err := root.OpenFile(fileName(svc), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return platform.ScratchCheck{}, fmt.Errorf("the scratch copy cannot be created: %s", pathErrText(err))
	}
	err = platform.CopyVerified(ctx, loc, file, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("the scratch copy cannot be written: %s", pathErrText(cerr))
	}
	if err != nil {
		return platform.ScratchCheck{}, err
	}
	st, err := root.Stat(fileName(svc))
	if err != nil {
		return platform.ScratchCheck{}, fmt.Errorf("the scratch copy is gone: %s", pathErrText(err))
	}
	if st.Size() != file.Size {
		return platform.ScratchCheck{}, &platform.SnapshotFileError{File: file.File, Problem: "was not restored whole"}
	}
	return platform.ScratchCheck{Objects: 1, Bytes: st.Size()}, nil
}

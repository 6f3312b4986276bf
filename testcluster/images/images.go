// Package images builds OCI images from files on this machine, without a
// container daemon, and pushes them to a registry: the test application's
// image (also the pause image), the Studio's image (the contents the
// repository's Dockerfile describes), a PostgreSQL operand image from
// the machine's Debian postgresql-15 files and CloudNativePG's operator
// image from its manager binary.
package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Layer is one image layer being written: a tar archive whose parent
// directories are added before their entries.
type Layer struct {
	buf  bytes.Buffer
	tw   *tar.Writer
	seen map[string]bool
}

// NewLayer starts an empty layer.
func NewLayer() *Layer {
	l := &Layer{seen: map[string]bool{}}
	l.tw = tar.NewWriter(&l.buf)
	return l
}

// Epoch is the modification time of every entry, so that the same files
// make the same layer digest.
var epoch = time.Unix(0, 0)

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

func (l *Layer) parents(p string) error {
	dir := path.Dir(p)
	if dir == "." || dir == "/" || l.seen[dir] {
		return nil
	}
	return l.Dir("/"+dir, 0o755, 0, 0)
}

// Dir adds a directory with its owner and mode.
func (l *Layer) Dir(p string, mode int64, uid, gid int) error {
	p = clean(p)
	if l.seen[p] {
		return nil
	}
	if err := l.parents(p); err != nil {
		return err
	}
	l.seen[p] = true
	return l.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: gid, ModTime: epoch, Format: tar.FormatPAX})
}

// File adds a regular file.
func (l *Layer) File(p string, data []byte, mode int64, uid, gid int) error {
	p = clean(p)
	if l.seen[p] {
		return nil
	}
	if err := l.parents(p); err != nil {
		return err
	}
	l.seen[p] = true
	if err := l.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Size: int64(len(data)), Mode: mode, Uid: uid, Gid: gid, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := l.tw.Write(data)
	return err
}

// Symlink adds a symbolic link.
func (l *Layer) Symlink(p, target string) error {
	p = clean(p)
	if l.seen[p] {
		return nil
	}
	if err := l.parents(p); err != nil {
		return err
	}
	l.seen[p] = true
	return l.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX})
}

// Copy adds the machine's file, directory tree or symlink src at p (root
// owned, modes kept).
func (l *Layer) Copy(p, src string) error { return l.CopyExcept(p, src, nil) }

// CopyExcept is Copy without the files and directories (with their
// contents) for which skip is true; skip is given the machine's path.
func (l *Layer) CopyExcept(p, src string, skip func(string) bool) error {
	return filepath.WalkDir(src, func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip != nil && skip(f) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(src, f)
		dst := path.Join(p, filepath.ToSlash(rel))
		info, err := os.Lstat(f)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(f)
			if err != nil {
				return err
			}
			return l.Symlink(dst, t)
		case info.IsDir():
			return l.Dir(dst, int64(info.Mode().Perm()), 0, 0)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			return l.File(dst, data, int64(info.Mode().Perm()), 0, 0)
		}
		return nil // sockets, devices: not in images
	})
}

// Done closes the archive and returns it as an uncompressed OCI layer
// (application/vnd.oci.image.layer.v1.tar), pushed as it is: the images
// travel over loopback to a registry on the same machine, where gzip
// would only cost CPU, twice (to digest the layer, then to push it) and
// once more for containerd to unpack it.
func (l *Layer) Done() (v1.Layer, error) {
	if err := l.tw.Close(); err != nil {
		return nil, err
	}
	return static.NewLayer(l.buf.Bytes(), types.OCIUncompressedLayer), nil
}

// Image makes an OCI image for linux/amd64 of the layers with the config.
func Image(cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// Push writes img to ref (REGISTRY/REPO:TAG) over plain HTTP: the
// registries here are on loopback.
func Push(ref string, img v1.Image) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(r, img, remote.WithTransport(http.DefaultTransport))
}

// WriteTar writes img as a tarball that `docker load`, `podman load` and
// `ctr images import` read, tagged ref.
func WriteTar(file, ref string, img v1.Image) error {
	r, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(file, r, img)
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TestApp is the test application's image: the static binary at /testapp,
// run as 65532 (a non-root user Pod Security's restricted profile accepts).
func TestApp(binary string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	l := NewLayer()
	if err := l.File("/testapp", data, 0o755, 0, 0); err != nil {
		return nil, err
	}
	if err := l.Dir("/tmp", 0o1777, 0, 0); err != nil {
		return nil, err
	}
	layer, err := l.Done()
	if err != nil {
		return nil, err
	}
	return Image(v1.Config{Entrypoint: []string{"/testapp"}, Cmd: []string{"serve"}, User: "65532:65532",
		Env: []string{"PATH=" + defaultPath}, ExposedPorts: map[string]struct{}{"8080/tcp": {}}}, layer)
}

// Pause is the pods' sandbox image: the test application in its pause
// mode, as 65535 like Kubernetes' own.
func Pause(binary string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	l := NewLayer()
	if err := l.File("/pause", data, 0o755, 0, 0); err != nil {
		return nil, err
	}
	layer, err := l.Done()
	if err != nil {
		return nil, err
	}
	return Image(v1.Config{Entrypoint: []string{"/pause", "pause"}, User: "65535:65535"}, layer)
}

// base adds what distroless/static holds: users root, nobody and nonroot
// (65532), CA certificates and time zones from this machine, /tmp and the
// home directories.
func base(l *Layer) error {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\ntty:x:5:\nstaff:x:50:\n"
	for _, step := range []func() error{
		func() error { return l.File("/etc/passwd", []byte(passwd), 0o644, 0, 0) },
		func() error { return l.File("/etc/group", []byte(group), 0o644, 0, 0) },
		func() error { return l.File("/etc/nsswitch.conf", []byte("hosts: files dns\n"), 0o644, 0, 0) },
		func() error { return l.Dir("/root", 0o700, 0, 0) },
		func() error { return l.Dir("/home/nonroot", 0o700, 65532, 65532) },
		func() error { return l.Dir("/tmp", 0o1777, 0, 0) },
		func() error {
			return l.Copy("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt")
		},
		func() error { return l.Copy("/usr/share/zoneinfo", "/usr/share/zoneinfo") },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// Studio builds cmd/studio from the repository at src as the Dockerfile
// does (static, trimmed paths, stripped) and makes the image the
// Dockerfile describes: the binary at /usr/local/bin/studio, an empty
// /var/lib/studio owned by nonroot, the same environment, port, user and
// command, on distroless/static's contents.
func Studio(src string) (v1.Image, error) {
	tmp, err := os.MkdirTemp("", "imagetool-studio-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "studio")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/studio")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the Studio in %s: %v: %s", src, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	l := NewLayer()
	if err := base(l); err != nil {
		return nil, err
	}
	if err := l.File("/usr/local/bin/studio", data, 0o755, 0, 0); err != nil {
		return nil, err
	}
	if err := l.Dir("/var/lib/studio", 0o755, 65532, 65532); err != nil {
		return nil, err
	}
	layer, err := l.Done()
	if err != nil {
		return nil, err
	}
	return Image(v1.Config{
		Entrypoint: []string{"/usr/local/bin/studio"}, Cmd: []string{"serve"},
		// distroless' nonroot:nonroot, numeric so that the kubelet can
		// check runAsNonRoot.
		User: "65532:65532",
		Env: []string{"PATH=" + defaultPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			"STUDIO_ADDR=0.0.0.0:8080", "STUDIO_DATA_DIR=/var/lib/studio", "STUDIO_LOG_FORMAT=json"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
	}, layer)
}

// PostgresDirs are the machine's Debian postgresql-15 files the operand
// image holds.
var PostgresDirs = []string{"/usr/lib/postgresql/15", "/usr/share/postgresql/15"}

// PostgresUID is the operand image's postgres user: CloudNativePG runs
// its instances as 26 (its own images' and Red Hat's postgres user), and
// initdb and peer authentication need the user in /etc/passwd.
const PostgresUID = 26

// Postgres makes a PostgreSQL 15 image from the machine's Debian files:
// the server's binaries, extensions and share directory, the libraries
// they load (as ldd finds them), time zones, the C.UTF-8 locale, /bin/sh,
// and a postgres user with uid 26; /usr is merged (/bin, /lib, /lib64 and /sbin link into it).
// It is also CloudNativePG's operand image: the operator's init container
// copies its instance manager to /controller, which runs initdb, pg_ctl
// and postgres from PATH and archive commands through /bin/sh.
func Postgres() (v1.Image, error) {
	for _, d := range PostgresDirs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("PostgreSQL 15 is not installed here (%s: %v): apt-get install postgresql-15", d, err)
		}
	}
	l := NewLayer()
	for _, s := range [][2]string{{"/bin", "usr/bin"}, {"/lib", "usr/lib"}, {"/lib64", "usr/lib64"}, {"/sbin", "usr/sbin"}} {
		if err := l.Symlink(s[0], s[1]); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"/usr/bin", "/usr/lib", "/usr/lib64", "/usr/sbin"} {
		if err := l.Dir(d, 0o755, 0, 0); err != nil {
			return nil, err
		}
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\npostgres:x:%d:%d:PostgreSQL:/var/lib/postgresql:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", PostgresUID, PostgresUID)
	group := fmt.Sprintf("root:x:0:\npostgres:x:%d:\nnogroup:x:65534:\n", PostgresUID)
	if err := l.File("/etc/passwd", []byte(passwd), 0o644, 0, 0); err != nil {
		return nil, err
	}
	if err := l.File("/etc/group", []byte(group), 0o644, 0, 0); err != nil {
		return nil, err
	}
	if err := l.Dir("/tmp", 0o1777, 0, 0); err != nil {
		return nil, err
	}
	if err := l.Dir("/var/lib/postgresql", 0o755, PostgresUID, PostgresUID); err != nil {
		return nil, err
	}
	if err := l.Dir("/var/run/postgresql", 0o2775, PostgresUID, PostgresUID); err != nil {
		return nil, err
	}
	if err := l.Dir("/run/postgresql", 0o2775, PostgresUID, PostgresUID); err != nil {
		return nil, err
	}
	var elfs []string
	// C.UTF-8, the image's LANG (initdb checks every locale category).
	for _, d := range append(PostgresDirs, "/usr/share/zoneinfo", "/usr/lib/locale/C.utf8") {
		if err := l.CopyExcept(d, d, postgresJIT); err != nil {
			return nil, err
		}
		_ = filepath.WalkDir(d, func(f string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() && postgresJIT(f) {
				return filepath.SkipDir
			}
			if err == nil && e.Type().IsRegular() && !postgresJIT(f) && isELF(f) {
				elfs = append(elfs, f)
			}
			return nil
		})
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		return nil, err
	}
	if err := l.Copy("/usr/bin/"+filepath.Base(sh), sh); err != nil {
		return nil, err
	}
	if err := l.Symlink("/usr/bin/sh", filepath.Base(sh)); err != nil {
		return nil, err
	}
	elfs = append(elfs, sh)
	libs, err := sharedLibraries(elfs)
	if err != nil {
		return nil, err
	}
	for _, lib := range libs {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return nil, err
		}
		if err := l.File(usrMerged(lib), data, 0o755, 0, 0); err != nil {
			return nil, err
		}
	}
	layer, err := l.Done()
	if err != nil {
		return nil, err
	}
	return Image(v1.Config{
		User: fmt.Sprintf("%d:%d", PostgresUID, PostgresUID),
		Env:  []string{"PATH=/usr/lib/postgresql/15/bin:" + defaultPath, "PGDATA=/var/lib/postgresql/data", "LANG=C.UTF-8"},
		Cmd:  []string{"/usr/lib/postgresql/15/bin/postgres"}, ExposedPorts: map[string]struct{}{"5432/tcp": {}},
	}, layer)
}

// postgresJIT is true for PostgreSQL's LLVM JIT provider and its bitcode:
// left out of the image, they would bring libLLVM and libz3 (133 of its
// 245 MB). Without the provider the server runs every query without JIT,
// as it does when the jit setting is off; nothing else changes.
func postgresJIT(f string) bool {
	dir, base := filepath.Split(f)
	return strings.HasSuffix(dir, "/lib/") && (strings.HasPrefix(base, "llvmjit") || base == "bitcode")
}

func usrMerged(p string) string {
	for _, d := range []string{"/lib/", "/lib64/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(p, d) {
			return "/usr" + p
		}
	}
	return p
}

func isELF(f string) bool {
	e, err := elf.Open(f)
	if err != nil {
		return false
	}
	e.Close()
	return true
}

// sharedLibraries are the libraries ldd finds for the files, the dynamic
// loader included.
func sharedLibraries(files []string) ([]string, error) {
	set := map[string]bool{}
	for i := 0; i < len(files); i += 50 {
		out, err := exec.Command("ldd", files[i:min(i+50, len(files))]...).Output()
		if err != nil && len(out) == 0 {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				return nil, fmt.Errorf("ldd: %w", err)
			}
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
				set[f[2]] = true
			case len(f) >= 1 && strings.HasPrefix(f[0], "/") && !strings.HasSuffix(f[0], ":"):
				set[f[0]] = true // the loader: /lib64/ld-linux-x86-64.so.2 (0x...)
			}
		}
	}
	var libs []string
	for lib := range set {
		libs = append(libs, lib)
	}
	sort.Strings(libs)
	return libs, nil
}

// CNPGOperator is CloudNativePG's operator image from its manager binary
// (a static Go binary): what the project's Dockerfile makes, the binary
// at /operator/manager_amd64 (the operator finds the architectures it can
// hand to instances by that name, from the working directory /) and
// /manager linked to it, on distroless/static's contents, as nonroot. The
// operator runs it as the controller, and its init container copies it
// into every instance pod (/manager bootstrap /controller/manager).
func CNPGOperator(manager string) (v1.Image, error) {
	data, err := os.ReadFile(manager)
	if err != nil {
		return nil, err
	}
	l := NewLayer()
	if err := base(l); err != nil {
		return nil, err
	}
	if err := l.File("/operator/manager_amd64", data, 0o755, 0, 0); err != nil {
		return nil, err
	}
	if err := l.Symlink("/manager", "operator/manager_amd64"); err != nil {
		return nil, err
	}
	layer, err := l.Done()
	if err != nil {
		return nil, err
	}
	return Image(v1.Config{Entrypoint: []string{"/manager"}, User: "65532:65532", WorkingDir: "/",
		Env: []string{"PATH=" + defaultPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}}, layer)
}

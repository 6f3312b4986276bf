package images

import (
	"archive/tar"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushAndPull pushes img to a registry on loopback and reads it back as a
// client that pulls would: its config and its files (path -> header).
func pushAndPull(t *testing.T, img v1.Image) (*v1.ConfigFile, map[string]*tar.Header) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/skali/x:latest"
	if err := Push(ref, img); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	mt, _ := got.MediaType()
	if mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s, want OCI", mt)
	}
	cf, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	layers, err := got.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files["/"+strings.TrimSuffix(h.Name, "/")] = h
		}
		rc.Close()
	}
	return cf, files
}

func testApp(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testapp")
	cmd := exec.Command("go", "build", "-o", bin, "../testapp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return bin
}

func TestTestAppAndPauseImages(t *testing.T) {
	bin := testApp(t)
	img, err := TestApp(bin)
	if err != nil {
		t.Fatal(err)
	}
	cf, files := pushAndPull(t, img)
	if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/testapp" {
		t.Fatalf("config: %+v", cf.Config)
	}
	if h := files["/testapp"]; h == nil || h.Mode&0o111 == 0 {
		t.Fatalf("/testapp: %+v", h)
	}
	pause, err := Pause(bin)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ = pushAndPull(t, pause)
	if strings.Join(cf.Config.Entrypoint, " ") != "/pause pause" {
		t.Fatalf("pause entrypoint %v", cf.Config.Entrypoint)
	}
	// The same binary makes the same image.
	again, _ := TestApp(bin)
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same files differ: %s, %s", d1, d2)
	}
}

func TestStudioImageHasTheDockerfilesContents(t *testing.T) {
	started := time.Now()
	img, err := Studio("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %s", time.Since(started).Round(100*time.Millisecond))
	cf, files := pushAndPull(t, img)
	c := cf.Config
	if strings.Join(c.Entrypoint, " ") != "/usr/local/bin/studio" || strings.Join(c.Cmd, " ") != "serve" || c.User != "65532:65532" {
		t.Errorf("entrypoint %v, cmd %v, user %q", c.Entrypoint, c.Cmd, c.User)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v", c.ExposedPorts)
	}
	env := strings.Join(c.Env, " ")
	for _, want := range []string{"STUDIO_ADDR=0.0.0.0:8080", "STUDIO_DATA_DIR=/var/lib/studio", "STUDIO_LOG_FORMAT=json"} {
		if !strings.Contains(env, want) {
			t.Errorf("env %v lacks %s", c.Env, want)
		}
	}
	if h := files["/usr/local/bin/studio"]; h == nil || h.Mode&0o111 == 0 || h.Size < 1<<20 {
		t.Errorf("/usr/local/bin/studio: %+v", h)
	}
	if h := files["/var/lib/studio"]; h == nil || h.Typeflag != tar.TypeDir || h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("/var/lib/studio: %+v", h)
	}
	for _, f := range []string{"/etc/passwd", "/etc/ssl/certs/ca-certificates.crt", "/usr/share/zoneinfo/UTC", "/tmp"} {
		if files[f] == nil {
			t.Errorf("%s is missing", f)
		}
	}
}

func TestPostgresImageHoldsTheServerAndWhatItLoads(t *testing.T) {
	if _, err := os.Stat(PostgresDirs[0]); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("PostgreSQL 15 is not installed")
		}
		t.Skip("PostgreSQL 15 is not installed")
	}
	started := time.Now()
	img, err := Postgres()
	if err != nil {
		t.Fatal(err)
	}
	cf, files := pushAndPull(t, img)
	t.Logf("built and pushed in %s", time.Since(started).Round(100*time.Millisecond))
	if cf.Config.User != "26:26" {
		t.Errorf("user %q", cf.Config.User)
	}
	for _, f := range []string{"/usr/lib/postgresql/15/bin/postgres", "/usr/lib/postgresql/15/bin/initdb", "/usr/share/postgresql/15/postgres.bki",
		"/usr/lib64/ld-linux-x86-64.so.2", "/usr/lib/locale/C.utf8/LC_CTYPE", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/sh", "/bin", "/etc/passwd", "/usr/share/zoneinfo/UTC"} {
		if files[f] == nil {
			t.Errorf("%s is missing", f)
		}
	}
	if h := files["/bin"]; h != nil && (h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/bin") {
		t.Errorf("/bin is not a link to usr/bin: %+v", h)
	}
	if h := files["/var/lib/postgresql"]; h == nil || h.Uid != PostgresUID {
		t.Errorf("/var/lib/postgresql: %+v", h)
	}
	// Without the JIT provider, nothing pulls LLVM in (133 of 245 MB).
	for f := range files {
		if strings.Contains(f, "llvmjit") || strings.Contains(f, "/bitcode") || strings.Contains(f, "libLLVM") || strings.Contains(f, "libz3") {
			t.Errorf("%s is in the image", f)
		}
	}
}

// The operator's image is laid out as CloudNativePG's Dockerfile lays it
// out: the operator lists the architectures it can give instances from
// operator/manager_* in its working directory, and runs /manager.
func TestCNPGOperatorImageHasTheReleaseLayout(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := CNPGOperator(bin)
	if err != nil {
		t.Fatal(err)
	}
	cf, files := pushAndPull(t, img)
	if strings.Join(cf.Config.Entrypoint, " ") != "/manager" || cf.Config.WorkingDir != "/" || cf.Config.User != "65532:65532" {
		t.Errorf("entrypoint %v, working directory %q, user %q", cf.Config.Entrypoint, cf.Config.WorkingDir, cf.Config.User)
	}
	if h := files["/operator/manager_amd64"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
		t.Errorf("/operator/manager_amd64: %+v", h)
	}
	if h := files["/manager"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "operator/manager_amd64" {
		t.Errorf("/manager: %+v", h)
	}
}

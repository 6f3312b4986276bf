package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The README's two ways: pushed to a registry (as the test cluster's), and
// written as a tarball docker load reads.
func TestTestAppPushedAndWrittenAsATarball(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := run("testapp", host, "", "", "v1", "../../.."); err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(host+"/skali/testapp:v1", name.Insecure)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("the pushed image: %v", err)
	}
	cf, _ := img.ConfigFile()
	if strings.Join(cf.Config.Entrypoint, " ") != "/testapp" {
		t.Fatalf("entrypoint %v", cf.Config.Entrypoint)
	}
	file := filepath.Join(t.TempDir(), "testapp.tar")
	if err := run("testapp", "", file, "", "v1", "../../.."); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("registry.local/skali/testapp:v1")
	fromTar, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatalf("the tarball: %v", err)
	}
	// The same image (its config names the same layers' contents); the
	// tarball's manifest is Docker's.
	d1, _ := img.ConfigName()
	d2, _ := fromTar.ConfigName()
	if d1 != d2 {
		t.Errorf("the pushed image's ID %s and the tarball's %s differ", d1, d2)
	}
	if err := run("nope", host, "", "", "v1", "../../.."); err == nil || !strings.Contains(err.Error(), "unknown image") {
		t.Errorf("an unknown image: %v", err)
	}
	_ = os.Remove(file)
}

// Command imagetool builds OCI images without a container daemon and
// pushes them to a registry (or writes them as a tarball for docker load,
// podman load or ctr images import):
//
//	go run ./cmd/imagetool --registry "$(cat /tmp/skali-cluster/registry)" studio
//	go run ./cmd/imagetool --tar studio.tar studio
//
// Images: studio (the repository's cmd/studio with the Dockerfile's
// contents), testapp and pause (the test application), postgres (the
// machine's Debian postgresql-15 files). Each is named REGISTRY/skali/NAME:TAG
// unless --ref gives the full name.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/skali-dev/studio/testcluster/images"
)

func main() {
	registry := flag.String("registry", "", "push to this registry (host:port, plain HTTP), e.g. the test cluster's DIR/registry")
	tarFile := flag.String("tar", "", "write a tarball here instead of pushing")
	ref := flag.String("ref", "", "the image's full name (default REGISTRY/skali/NAME:TAG, or registry.local/skali/NAME:TAG with --tar)")
	tag := flag.String("tag", "latest", "the image's tag")
	src := flag.String("source", "..", "the repository's root (for studio, and testapp's source under testcluster/)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: imagetool (--registry HOST:PORT | --tar FILE) [--ref NAME] [--tag TAG] studio|testapp|pause|postgres")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || (*registry == "") == (*tarFile == "") {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *registry, *tarFile, *ref, *tag, *src); err != nil {
		fmt.Fprintln(os.Stderr, "imagetool:", err)
		os.Exit(1)
	}
}

func run(what, registry, tarFile, ref, tag, src string) error {
	started := time.Now()
	root, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	var img v1.Image
	switch what {
	case "studio":
		img, err = images.Studio(root)
	case "testapp", "pause":
		bin, berr := buildTestApp(filepath.Join(root, "testcluster"))
		if berr != nil {
			return berr
		}
		defer os.RemoveAll(filepath.Dir(bin))
		if what == "testapp" {
			img, err = images.TestApp(bin)
		} else {
			img, err = images.Pause(bin)
		}
	case "postgres":
		img, err = images.Postgres()
	default:
		return fmt.Errorf("unknown image %q (studio, testapp, pause, postgres)", what)
	}
	if err != nil {
		return err
	}
	if ref == "" {
		host := registry
		if host == "" {
			host = "registry.local"
		}
		ref = fmt.Sprintf("%s/skali/%s:%s", host, what, tag)
	}
	if tarFile != "" {
		err = images.WriteTar(tarFile, ref, img)
	} else {
		err = images.Push(ref, img)
	}
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	size := int64(0)
	if layers, err := img.Layers(); err == nil {
		for _, l := range layers {
			if s, err := l.Size(); err == nil {
				size += s
			}
		}
	}
	where := "pushed"
	if tarFile != "" {
		where = "written to " + tarFile + " as"
	}
	fmt.Printf("%s %s@%s (%.1f MB of layers) in %s\n", where, ref, digest, float64(size)/1e6, time.Since(started).Round(100*time.Millisecond))
	return nil
}

// buildTestApp builds the test application statically into a temporary
// directory.
func buildTestApp(dir string) (string, error) {
	tmp, err := os.MkdirTemp("", "imagetool-testapp-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(tmp, "testapp")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testapp")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("building the test application: %v: %s", err, out)
	}
	return bin, nil
}

package main

// CloudNativePG for real (--cnpg, with --nodes real): the operator built
// from its Go module (cnpg/, a module of its own: its graph is on
// Kubernetes 0.34, this one's on 0.36), its image and the PostgreSQL
// operand image pushed to the in-process registry, its release manifest
// applied with those local image names (the real CRDs replace the reduced
// one in crds/), and a provisioner of hostPath volumes for the instances'
// claims.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/skali-dev/studio/testcluster/images"
)

const (
	cnpgModule  = "github.com/cloudnative-pg/cloudnative-pg"
	cnpgVersion = "v1.27.1"
	// cnpgImage is the operator's image as the release manifest names it,
	// and cnpgLocalImage the name it is pushed under here.
	cnpgImage      = "ghcr.io/cloudnative-pg/cloudnative-pg:1.27.1"
	cnpgLocalImage = "registry.local/cloudnative-pg/cloudnative-pg:1.27.1"
	cnpgNamespace  = "cnpg-system"
	cnpgDeployment = "cnpg-controller-manager"
	// PostgresImage is the operand image built from the machine's Debian
	// PostgreSQL 15, the operator's default for a Cluster without
	// imageName. PostgresRepo's tags 17 and 18 (the majors the Studio's
	// manifests accept) are the same image: CloudNativePG reads the major
	// from the tag for its checks, while the instance configures the
	// server from its data directory's own version, so a Cluster asking
	// for 17 runs PostgreSQL 15 here.
	postgresRepo  = "registry.local/skali/postgres"
	postgresImage = postgresRepo + ":15"
	// The played provisioner's class, the cluster's default on a real
	// node: each claim gets a hostPath volume under stateDir.
	storageClass      = "standard"
	volumeProvisioner = "testcluster.skali.dev/hostpath"
)

var cnpgBinaries = []string{"cnpg-manager"}

// cnpgStamp identifies the operator's build: its wrapper module, the
// flags and Go.
func cnpgStamp() (string, error) {
	gomod, err := os.ReadFile(filepath.Join("cnpg", "go.mod"))
	if err != nil {
		return "", fmt.Errorf("run it from the testcluster directory (cnpg/go.mod not found): %w", err)
	}
	sum := sha256.Sum256([]byte(string(gomod) + cnpgLdflags + runtime.Version()))
	return hex.EncodeToString(sum[:]), nil
}

const cnpgLdflags = "-s -w"

// cnpgBuilt reports whether bin holds the operator of this stamp.
func cnpgBuilt(bin string) (bool, error) {
	return builtWith(bin, "cnpg-stamp", cnpgStamp, cnpgBinaries)
}

// buildCNPG builds the operator's manager (static, as its release does)
// into bin/cnpg-manager unless this version is there.
func buildCNPG(ctx context.Context, bin string) error {
	if ok, err := cnpgBuilt(bin); ok || err != nil {
		return err
	}
	st, _ := cnpgStamp()
	started := time.Now()
	fmt.Fprintf(os.Stderr, "testcluster: building the CloudNativePG operator %s (a cold build takes about 3.5 minutes on 2 cores, 1 GB of memory)\n", cnpgVersion)
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", cnpgLdflags, "-o", filepath.Join(bin, "cnpg-manager"), cnpgModule+"/cmd/manager")
	cmd.Dir = "cnpg"
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the CloudNativePG operator: %w", err)
	}
	fmt.Fprintf(os.Stderr, "testcluster: built the operator in %s\n", time.Since(started).Round(time.Second))
	return os.WriteFile(filepath.Join(bin, "cnpg-stamp"), []byte(st), 0o644)
}

// cnpgRelease is the operator's release manifest, read from its module
// (the wrapper module's go.sum checks it).
func cnpgRelease(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", cnpgModule+"@"+cnpgVersion)
	cmd.Dir = "cnpg"
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("downloading %s: %w", cnpgModule, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("downloading %s: %s", cnpgModule, info.Error)
	}
	b, err := os.ReadFile(filepath.Join(info.Dir, "releases", "cnpg-"+strings.TrimPrefix(cnpgVersion, "v")+".yaml"))
	if err != nil {
		return "", err
	}
	release := string(b)
	if strings.Count(release, cnpgImage) < 2 {
		return "", fmt.Errorf("the release manifest does not name the operator's image %s as expected", cnpgImage)
	}
	return strings.ReplaceAll(release, cnpgImage, cnpgLocalImage), nil
}

// pushCNPGImages pushes the operator's image and the operand image.
func (c *cluster) pushCNPGImages() error {
	started := time.Now()
	op, err := images.CNPGOperator(filepath.Join(c.bin, "cnpg-manager"))
	if err != nil {
		return err
	}
	if err := images.Push(c.real.registry+strings.TrimPrefix(cnpgLocalImage, "registry.local"), op); err != nil {
		return fmt.Errorf("pushing the operator's image: %w", err)
	}
	pg, err := images.Postgres()
	if err != nil {
		return err
	}
	for _, tag := range []string{"15", "17", "18"} {
		if err := images.Push(c.real.registry+strings.TrimPrefix(postgresRepo, "registry.local")+":"+tag, pg); err != nil {
			return fmt.Errorf("pushing the PostgreSQL image: %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "testcluster: the CloudNativePG and PostgreSQL images were built and pushed in %s\n", time.Since(started).Round(100*time.Millisecond))
	return nil
}

// storageYAML is the default StorageClass of the played provisioner.
const storageYAML = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ` + storageClass + `
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: ` + volumeProvisioner + `
reclaimPolicy: Delete
volumeBindingMode: Immediate
`

// cnpgConfigYAML is the operator's configuration: the operand image of a
// Cluster without imageName.
const cnpgConfigYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cnpg-controller-manager-config
  namespace: ` + cnpgNamespace + `
data:
  POSTGRES_IMAGE_NAME: ` + postgresImage + `
`

// probeClusterYAML is created with a server-side dry run until the
// operator's webhooks accept it: the operator is Available before it has
// put its CA into the webhook configurations.
const probeClusterYAML = `apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {name: probe, namespace: default}
spec:
  instances: 1
  storage: {size: 1Gi}
`

// installCNPG applies the release manifest (the real CRDs, the operator's
// namespace, RBAC, webhooks and Deployment) and waits until the operator
// is Available and its webhooks answer.
func (c *cluster) installCNPG(ctx context.Context) error {
	started := time.Now()
	release, err := cnpgRelease(ctx)
	if err != nil {
		return err
	}
	if err := c.kubectlApply(ctx, release); err != nil {
		return fmt.Errorf("applying CloudNativePG's release manifest: %w", err)
	}
	if err := c.kubectlApply(ctx, cnpgConfigYAML); err != nil {
		return err
	}
	if err := c.kubectl(ctx, nil, "-n", cnpgNamespace, "wait", "deployment/"+cnpgDeployment, "--for=condition=Available", "--timeout=180s"); err != nil {
		return fmt.Errorf("the CloudNativePG operator did not become Available (kubectl -n %s logs deployment/%s): %w", cnpgNamespace, cnpgDeployment, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.kubectl(ctx, strings.NewReader(probeClusterYAML), "create", "--dry-run=server", "-f", "-")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CloudNativePG operator's webhooks do not accept a Cluster: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stderr, "testcluster: the CloudNativePG operator %s is Available (%s)\n", cnpgVersion, time.Since(started).Round(100*time.Millisecond))
	return os.WriteFile(filepath.Join(c.dir, "cnpg"), []byte(cnpgVersion+"\n"), 0o644)
}

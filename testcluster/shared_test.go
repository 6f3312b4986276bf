package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A shared cluster (--shared) says it is ready in the share's note, runs
// while a process holds users.lock (well past the grace), and once none
// does, removes the note and stops by itself.
func TestSharedClusterRunsWhileUsedThenStops(t *testing.T) {
	bin := binDir(t)
	if ok, err := built(bin); err != nil || !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the cluster's binaries are not built in %s", bin)
		}
		t.Skipf("the cluster's binaries are not built in %s", bin)
	}
	dir, share := t.TempDir(), t.TempDir()
	prog := filepath.Join(dir, "testcluster")
	if out, err := exec.Command("go", "build", "-o", prog, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	// Used from before it starts, as the test binary that starts it does.
	users, err := os.OpenFile(filepath.Join(share, "users.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	if err := syscall.Flock(int(users.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "--dir", dir, "--bin", bin, "--nodes", "1", "--shared", share)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	note := filepath.Join(share, "cluster")
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if b, err := os.ReadFile(note); err == nil {
			if got := strings.Fields(string(b)); len(got) != 2 || got[0] != dir {
				t.Fatalf("the note says %q, want the cluster's directory and pid", b)
			}
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the cluster stopped before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no note within 3 minutes")
		}
	}
	kubectl := filepath.Join(dir, "bin", "kubectl")
	if out, err := exec.Command(kubectl, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "get", "nodes").CombinedOutput(); err != nil {
		t.Fatalf("the shared cluster does not answer: %v: %s", err, out)
	}

	// Used: it outlives its grace.
	select {
	case err := <-exited:
		t.Fatalf("the cluster stopped while used: %v", err)
	case <-time.After(sharedGrace + 3*time.Second):
	}

	// Unused: it goes, and says so by removing its note first.
	released := time.Now()
	if err := syscall.Flock(int(users.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the cluster exited with %v, want 0", err)
		}
		t.Logf("stopped %s after its last user", time.Since(released).Round(100*time.Millisecond))
	case <-time.After(sharedGrace + time.Minute):
		t.Fatal("the cluster still runs a minute past its grace with no user")
	}
	if _, err := os.Stat(note); !os.IsNotExist(err) {
		t.Errorf("the note is still there after the cluster stopped (%v)", err)
	}
}

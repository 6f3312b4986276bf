package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// build compiles the test application as the image holds it (static).
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testapp")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestExitPrintsAndExitsWithItsCode(t *testing.T) {
	bin := build(t)
	cmd := exec.Command(bin, "exit", "--code", "3", "--stdout", "to stdout")
	cmd.Env = append(os.Environ(), "TESTAPP_STDERR=to stderr")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v, want exit code 3", err)
	}
	if out.String() != "to stdout\n" || errb.String() != "to stderr\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errb.String())
	}
}

func TestServeBecomesReadyAfterItsDelayOrNever(t *testing.T) {
	bin := build(t)
	addr := freeAddr(t)
	start := time.Now()
	cmd := exec.Command(bin, "serve", "--addr", addr, "--ready-after", "700ms", "--say", "hello")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "healthz", 5*time.Second, func() bool { c, _ := get("http://" + addr + "/healthz"); return c == 200 })
	if c, _ := get("http://" + addr + "/readyz"); c != 503 && time.Since(start) < 700*time.Millisecond {
		t.Fatalf("ready before its delay: %d", c)
	}
	waitFor(t, "readyz", 5*time.Second, func() bool { c, _ := get("http://" + addr + "/readyz"); return c == 200 })
	if time.Since(start) < 700*time.Millisecond {
		t.Fatal("ready before its delay")
	}
	if c, body := get("http://" + addr + "/"); c != 200 || !strings.HasPrefix(body, "hello from ") {
		t.Fatalf("/: %d %q", c, body)
	}
	// SIGTERM: a clean stop.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}

	addr = freeAddr(t)
	never := exec.Command(bin, "serve", "--addr", addr)
	never.Env = append(os.Environ(), "TESTAPP_NEVER_READY=true")
	if err := never.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = never.Process.Kill(); _ = never.Wait() })
	waitFor(t, "healthz", 5*time.Second, func() bool { c, _ := get("http://" + addr + "/healthz"); return c == 200 })
	time.Sleep(300 * time.Millisecond) // a never-ready server stays not ready: there is no event to wait for
	if c, _ := get("http://" + addr + "/readyz"); c != 503 {
		t.Fatalf("never-ready answered readyz with %d", c)
	}
}

func TestAllocateReportsWhatItHolds(t *testing.T) {
	bin := build(t)
	cmd := exec.Command(bin, "allocate", "--mib", "32")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 4096)
	var got string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(got, "allocated 32 MiB") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		got += string(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(got, "allocated 32 MiB") {
		t.Fatalf("output %q", got)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.Atoi(f[1])
			if kb < 32*1024 {
				t.Fatalf("resident %d kB after allocating 32 MiB", kb)
			}
		}
	}
}

// postgres starts a private PostgreSQL (the machine's Debian server) on a
// loopback port with SCRAM passwords; as root it runs as the postgres user.
func postgres(t *testing.T) string {
	t.Helper()
	binDir := "/usr/lib/postgresql/15/bin"
	if _, err := os.Stat(filepath.Join(binDir, "postgres")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("PostgreSQL 15 is not installed")
		}
		t.Skip("PostgreSQL 15 is not installed (apt-get install postgresql-15)")
	}
	dir, err := os.MkdirTemp("", "testapp-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root and there is no postgres user")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	initdb := exec.Command(filepath.Join(binDir, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "app", "--pwfile", pw, "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	pg := exec.Command(filepath.Join(binDir, "postgres"), "-D", filepath.Join(dir, "data"), "-h", "127.0.0.1", "-p", port, "-k", dir)
	pg.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var log bytes.Buffer
	pg.Stdout, pg.Stderr = &log, &log
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Process.Signal(syscall.SIGINT); _ = pg.Wait() })
	waitFor(t, "postgres listening", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "postgres://app:s3cret%20pass@" + addr + "/postgres?sslmode=disable"
}

func TestMigrateThenServeRows(t *testing.T) {
	url := postgres(t)
	bin := build(t)
	env := append(os.Environ(), "DATABASE_URL="+url)
	for _, note := range []string{"first", "it's second"} {
		m := exec.Command(bin, "migrate")
		m.Env = append(env, "TESTAPP_NOTE="+note)
		out, err := m.CombinedOutput()
		if err != nil {
			t.Fatalf("migrate: %v: %s", err, out)
		}
		// sslmode=disable: the server sees the app user, without TLS.
		if !strings.Contains(string(out), "connected as app, no TLS") {
			t.Fatalf("migrate did not say how it connected: %s", out)
		}
	}
	// A wrong password: a clear error, exit 1.
	bad := exec.Command(bin, "migrate")
	bad.Env = append(os.Environ(), "DATABASE_URL="+strings.Replace(url, "s3cret%20pass", "wrong", 1))
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "password authentication failed") {
		t.Fatalf("a wrong password: %v: %s", err, out)
	}
	addr := freeAddr(t)
	s := exec.Command(bin, "serve", "--addr", addr)
	s.Env = env
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Process.Kill(); _ = s.Wait() })
	waitFor(t, "serving", 5*time.Second, func() bool { c, _ := get("http://" + addr + "/healthz"); return c == 200 })
	if c, body := get("http://" + addr + "/rows"); c != 200 || body != "1 first\n2 it's second\n" {
		t.Fatalf("/rows: %d %q", c, body)
	}
}

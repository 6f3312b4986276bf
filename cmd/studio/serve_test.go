package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestServeOnAFreshDataDirectory runs `studio serve` as the README says, on
// an empty data directory: it starts its own PostgreSQL, serves /healthz,
// prints a sign-in link that works, and leaves no PostgreSQL behind when
// stopped.
func TestServeOnAFreshDataDirectory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster from scratch")
	}
	dir, err := os.MkdirTemp("", "studio-serve-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// No database URL, whatever the test's environment says: the flag
	// wins over DATABASE_URL (t.Setenv would keep the test serial).
	noDatabaseURL := "--database-url="

	ctx, cancel := context.WithCancel(context.Background())
	out, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{noDatabaseURL, "--addr", "127.0.0.1:0", "--data-dir", dir, "--public-url", "http://studio.test"}, outW, io.Discard)
		outW.Close()
	}()
	lines := bufio.NewScanner(out)
	var addr, link string
	for (addr == "" || link == "") && lines.Scan() {
		line := lines.Text()
		if rest, ok := strings.CutPrefix(line, "Skali Studio is serving on "); ok {
			addr = rest
		}
		if rest, ok := strings.CutPrefix(line, "Sign in: "); ok {
			link = rest
		}
	}
	go io.Copy(io.Discard, out)
	if addr == "" || link == "" {
		cancel()
		t.Fatalf("serve printed no address or sign-in link (address %q): %v", addr, <-done)
	}

	resp, err := http.Get(addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", resp.StatusCode)
	}
	if !strings.HasPrefix(link, "http://studio.test/login/local?token=") {
		t.Errorf("sign-in link %q does not use the public URL", link)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err = client.Get(addr + strings.TrimPrefix(link, "http://studio.test"))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "Local administrator") {
		t.Errorf("after following the printed link the page does not show the local administrator as signed in")
	}
	// login-link without --addr reads the running Studio's address from
	// the data directory.
	var linkOut strings.Builder
	if err := runLoginLink(ctx, []string{noDatabaseURL, "--data-dir", dir}, &linkOut, io.Discard); err != nil {
		t.Fatalf("login-link: %v", err)
	}
	if got := linkOut.String(); !strings.HasPrefix(got, "Sign in: http://studio.test/login/local?token=") {
		t.Errorf("login-link printed %q, want a link on the running Studio's address", got)
	}
	if fi, err := os.Stat(dir + "/postgres.password"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("postgres password file: %v, mode %v; want mode 0600", err, fi.Mode().Perm())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after a stop signal, want nil", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60s of its stop signal")
	}
	if _, err := os.Stat(dir + "/postgres/postmaster.pid"); err == nil {
		t.Error("postmaster.pid is still there: PostgreSQL was not stopped")
	}
	if _, err := os.Stat(dir + "/studio.url"); err == nil {
		t.Error("studio.url is still there after the Studio stopped")
	}
}

// TestServeStartsAgainAfterAKeyRotation follows the README's rotation on a
// data directory: `studio keys rotate` while the Studio is stopped, then
// `studio serve` again. The rotation leaves the new key alone in
// secret.key, and the Studio starts on it: its own secrets (the edge's)
// moved to the new key with the values.
func TestServeStartsAgainAfterAKeyRotation(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster from scratch")
	}
	dir, err := os.MkdirTemp("", "studio-rotate-test-") // not t.TempDir: PostgreSQL's user must reach it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// No database URL and no key, whatever the test's environment says:
	// the private PostgreSQL and the key file of the data directory. The
	// flags win over DATABASE_URL and STUDIO_SECRET_KEY in serve, and
	// rotate runs as a process of its own with both empty (t.Setenv would
	// keep the test serial).
	serve := func() (addr string, stop func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		out, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- runServe(ctx, []string{"--database-url=", "--secret-key=", "--addr", "127.0.0.1:0", "--data-dir", dir}, outW, io.Discard)
			outW.Close()
		}()
		lines := bufio.NewScanner(out)
		for addr == "" && lines.Scan() {
			addr, _ = strings.CutPrefix(lines.Text(), "Skali Studio is serving on ")
		}
		go io.Copy(io.Discard, out)
		if addr == "" {
			cancel()
			t.Fatalf("serve did not start: %v", <-done)
		}
		return addr, func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve returned %v after a stop signal", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("serve did not stop within 60s")
			}
		}
	}

	addr, stop := serve()
	resp, err := http.Get(addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stop()

	var out, errOut strings.Builder
	rotate := exec.Command(os.Args[0], "keys", "rotate", "--data-dir", dir)
	rotate.Env = append(os.Environ(), "STUDIO_TEST_MAIN=1", "DATABASE_URL=", "STUDIO_SECRET_KEY=")
	rotate.Stdout, rotate.Stderr = &out, &errOut
	if err := rotate.Run(); err != nil {
		t.Fatalf("keys rotate: %v: %s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "installation secrets re-encrypted") || strings.Contains(out.String(), " 0 installation secrets") {
		t.Errorf("keys rotate says:\n%s\nwant the installation's secrets re-encrypted", out.String())
	}
	keys, err := os.ReadFile(dir + "/secret.key")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(string(keys)), "\n"); n != 1 {
		t.Errorf("secret.key holds %d keys after the rotation, want the new one alone:\n%s", n, keys)
	}

	addr, stop = serve()
	defer stop()
	resp, err = http.Get(addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz after the rotation = %d, want 200", resp.StatusCode)
	}
}

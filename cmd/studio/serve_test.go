package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strings"
	"testing"
	"time"
)

// TestServeOnAFreshDataDirectory runs `studio serve` as the README says, on
// an empty data directory: it starts its own PostgreSQL, serves /healthz,
// prints a sign-in link that works, and leaves no PostgreSQL behind when
// stopped.
func TestServeOnAFreshDataDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster from scratch")
	}
	dir, err := os.MkdirTemp("", "studio-serve-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t.Setenv("DATABASE_URL", "")

	ctx, cancel := context.WithCancel(context.Background())
	out, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--addr", "127.0.0.1:0", "--data-dir", dir, "--public-url", "http://studio.test"}, outW, io.Discard)
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
}

// Package pgserver runs the private PostgreSQL server of the embedded
// default: initdb on first use, postgres on a loopback port with a generated
// password, supervised and restarted if it dies, stopped with the Studio.
package pgserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures a private PostgreSQL server.
type Options struct {
	// Dir is the Studio's data directory; the cluster lives in Dir/postgres.
	Dir string
	// Logger receives start, stop and restart messages (never the password).
	Logger *slog.Logger
	// Ephemeral trades durability for speed (fsync off): for tests only.
	Ephemeral bool
}

// Server is a private PostgreSQL server started from the initdb and
// postgres binaries on the machine. It listens on a free loopback port with a
// generated password, restarts itself when its process dies unexpectedly, and
// stops when Stop is called or when the Studio process dies (the kernel sends
// it SIGINT through the parent-death signal, so even kill -9 of the Studio
// leaves no server behind for long).
type Server struct {
	opts     Options
	log      *slog.Logger
	binDir   string
	dataDir  string
	port     int
	password string
	cred     *syscall.Credential
	logFile  *os.File

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	stopping bool
	done     chan struct{}
}

const postgresUser = "studio"

// Start initialises the cluster in opts.Dir on first use, clears what
// a killed earlier run left behind, starts the server and waits until it
// accepts connections.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgserver: data directory: %w", err)
	}
	p := &Server{opts: opts, log: opts.Logger, dataDir: filepath.Join(dir, "postgres"), done: make(chan struct{})}
	if p.binDir, err = findPostgresBinaries(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgserver: create data directory: %w", err)
	}
	if os.Geteuid() == 0 {
		if p.cred, err = postgresCredential(dir); err != nil {
			return nil, err
		}
	}
	if p.password, err = loadOrCreateSecret(filepath.Join(dir, "postgres.password")); err != nil {
		return nil, err
	}
	if p.logFile, err = os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("pgserver: open postgres log: %w", err)
	}
	if _, err := os.Stat(filepath.Join(p.dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := p.initdb(); err != nil {
			p.logFile.Close()
			return nil, err
		}
	}
	if err := p.clearStale(); err != nil {
		p.logFile.Close()
		return nil, err
	}
	if p.port, err = freePort(); err != nil {
		p.logFile.Close()
		return nil, err
	}
	if err := p.start(); err != nil {
		p.logFile.Close()
		return nil, err
	}
	if err := p.waitReady(ctx, 60*time.Second); err != nil {
		p.Stop()
		return nil, err
	}
	go p.supervise()
	return p, nil
}

// URL is the connection string of the studio database on this server.
func (p *Server) URL() string { return p.DatabaseURL("studio") }

// DatabaseURL is the connection string of the named database on this server.
func (p *Server) DatabaseURL(name string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(postgresUser, p.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)),
		Path:     "/" + name,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop shuts the server down (fast shutdown) and waits for it to exit.
func (p *Server) Stop() {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.stopping = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	defer close(p.done)
	defer p.logFile.Close()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	p.log.Info("private PostgreSQL stopped")
}

// Interrupt sends the running server SIGINT, PostgreSQL's fast shutdown:
// every connection is cut and the server exits, as in an operator's
// restart. The supervisor starts it again after a few seconds (tests of
// what a database restart does to the Studio).
func (p *Server) Interrupt() error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return errors.New("pgserver: not running")
	}
	return cmd.Process.Signal(syscall.SIGINT)
}

// supervise restarts the server when it exits without Stop having been
// called, so that a crashed or externally stopped database comes back and
// /readyz turns green again.
func (p *Server) supervise() {
	backoff := restartDelay
	for {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		<-exited
		p.mu.Lock()
		stopping := p.stopping
		p.mu.Unlock()
		if stopping {
			return
		}
		p.log.Warn("private PostgreSQL exited unexpectedly; restarting", "in", backoff.String())
		select {
		case <-time.After(backoff):
		case <-p.done:
			return
		}
		p.mu.Lock()
		if p.stopping {
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		_ = p.clearStale()
		if err := p.start(); err != nil {
			p.log.Error("restart private PostgreSQL", "err", err)
			backoff = min(backoff*2, 30*time.Second)
			// start failed: make the loop wait on a closed channel
			p.mu.Lock()
			p.exited = closedChan()
			p.mu.Unlock()
			continue
		}
		backoff = restartDelay
	}
}

// restartDelay is how long the supervisor waits before restarting a server
// that exited unexpectedly, doubling after each failed start up to 30s. A
// few seconds let an operator who stopped it see /readyz answer 503, and
// keep a crash loop from spinning.
const restartDelay = 3 * time.Second

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func (p *Server) start() error {
	args := []string{
		"-D", p.dataDir,
		"-p", strconv.Itoa(p.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=200",
		"-c", "logging_collector=off",
	}
	if p.opts.Ephemeral {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(p.binDir, "postgres"), args...)
	cmd.Dir = filepath.Dir(p.dataDir)
	cmd.Stdout = p.logFile
	cmd.Stderr = p.logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: p.cred,
		// SIGINT is PostgreSQL's fast shutdown: if the Studio dies, even by
		// kill -9, the server shuts down cleanly instead of lingering.
		Pdeathsig: syscall.SIGINT,
		Setpgid:   true,
	}
	exited := make(chan struct{})
	startErr := make(chan error, 1)
	// The parent-death signal fires when the thread that started the child
	// exits, so the starting goroutine keeps its thread until the child is gone.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			startErr <- err
			close(exited)
			return
		}
		startErr <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	if err := <-startErr; err != nil {
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	p.log.Info("private PostgreSQL started", "data", p.dataDir, "port", p.port)
	return nil
}

func (p *Server) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	url := p.DatabaseURL("postgres")
	for {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		select {
		case <-exited:
			return fmt.Errorf("pgserver: postgres exited during start-up: %s", p.logTail())
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, url)
		cancel()
		if err == nil {
			defer conn.Close(ctx)
			return p.ensureDatabase(ctx, conn, "studio")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgserver: postgres did not accept connections within %s: %w", limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *Server) ensureDatabase(ctx context.Context, conn *pgx.Conn, name string) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("pgserver: look up database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("pgserver: create database: %w", err)
	}
	return nil
}

func (p *Server) initdb() error {
	// initdb writes into a sibling directory that is renamed into place once
	// it has finished, so an interrupted first start never leaves a
	// half-made cluster behind that a later start would try to use.
	initDir := p.dataDir + ".init"
	if err := os.RemoveAll(initDir); err != nil {
		return fmt.Errorf("pgserver: clear %s: %w", initDir, err)
	}
	if err := os.MkdirAll(initDir, 0o700); err != nil {
		return fmt.Errorf("pgserver: create postgres directory: %w", err)
	}
	pwfile := filepath.Join(filepath.Dir(p.dataDir), "postgres.pwfile")
	if err := os.WriteFile(pwfile, []byte(p.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgserver: write password file: %w", err)
	}
	defer os.Remove(pwfile)
	if err := p.chown(initDir); err != nil {
		return err
	}
	if err := p.chown(pwfile); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(p.binDir, "initdb"),
		"-D", initDir, "-U", postgresUser, "--auth=scram-sha-256", "--pwfile="+pwfile,
		"-E", "UTF8", "--no-locale", "--no-instructions")
	cmd.Dir = filepath.Dir(p.dataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.RemoveAll(initDir)
		return fmt.Errorf("pgserver: initdb failed: %w: %s", err, lastLines(out.String(), 5))
	}
	if err := os.RemoveAll(p.dataDir); err != nil {
		return fmt.Errorf("pgserver: clear %s: %w", p.dataDir, err)
	}
	if err := os.Rename(initDir, p.dataDir); err != nil {
		return fmt.Errorf("pgserver: move new cluster into place: %w", err)
	}
	p.log.Info("created private PostgreSQL cluster", "data", p.dataDir)
	return nil
}

// clearStale makes sure no server from an earlier, killed run still holds
// the data directory: an orphaned postgres is shut down, a lock file whose
// process is gone or is not postgres is removed.
func (p *Server) clearStale() error {
	lock := filepath.Join(p.dataDir, "postmaster.pid")
	data, err := os.ReadFile(lock)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("pgserver: read postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return os.Remove(lock)
	}
	if !isPostgresProcess(pid) {
		p.log.Info("removing stale postmaster.pid", "pid", pid)
		return os.Remove(lock)
	}
	p.log.Warn("an earlier private PostgreSQL is still running; shutting it down", "pid", pid)
	_ = syscall.Kill(pid, syscall.SIGINT)
	deadline := time.Now().Add(30 * time.Second)
	for isPostgresProcess(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			return fmt.Errorf("pgserver: an earlier postgres (pid %d) on %s does not stop; stop it and try again", pid, p.dataDir)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func isPostgresProcess(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// A zombie is gone as far as the data directory is concerned.
		if _, rest, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(rest, "Z") {
			return false
		}
	}
	name, _, _ := strings.Cut(string(cmdline), "\x00")
	return filepath.Base(name) == "postgres" || strings.HasPrefix(string(cmdline), "postgres:")
}

func (p *Server) chown(path string) error {
	if p.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
		return fmt.Errorf("pgserver: hand %s to the postgres user: %w", path, err)
	}
	return nil
}

func (p *Server) logTail() string {
	data, err := os.ReadFile(p.logFile.Name())
	if err != nil {
		return "(no log)"
	}
	return lastLines(string(data), 5)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// postgresCredential returns the credential of the postgres system user,
// which PostgreSQL needs because it refuses to run as root.
func postgresCredential(dir string) (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("PostgreSQL refuses to run as root and this machine has no 'postgres' system user: " +
			"install PostgreSQL (apt-get install -y postgresql creates the user), run the Studio as a normal user, or set DATABASE_URL")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The postgres user must be able to reach its data directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgserver: data directory permissions: %w", err)
	}
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			break
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return nil, fmt.Errorf("PostgreSQL runs as the 'postgres' user, which cannot enter %s: "+
				"choose a data directory it can reach with --data-dir (for example under /var/lib/studio) or set DATABASE_URL", d)
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// findPostgresBinaries finds the directory holding initdb and postgres: on
// PATH first, then Debian's versioned directories, newest first.
func findPostgresBinaries() (string, error) {
	if path, err := exec.LookPath("postgres"); err == nil {
		dir := filepath.Dir(path)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	for _, m := range matches {
		dir := filepath.Dir(m)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server found (initdb and postgres): install it with 'apt-get install -y postgresql' or set DATABASE_URL")
}

func versionOf(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgserver: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// loadOrCreateSecret reads a random hex secret from path, creating it with
// mode 0600 on first use.
func loadOrCreateSecret(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("pgserver: read %s: %w", path, err)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	secret := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("pgserver: write %s: %w", path, err)
	}
	return secret, nil
}

// RunningURL returns the connection string of the private server
// that a running Studio started in dir, for commands such as login-link that
// talk to a running installation. It fails when no server is running there.
func RunningURL(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(dir, "postgres", "postmaster.pid"))
	if err != nil {
		return "", fmt.Errorf("no Studio is running with data directory %s (start it with 'studio serve', or set DATABASE_URL)", dir)
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 4 {
		return "", fmt.Errorf("pgserver: %s/postgres/postmaster.pid is incomplete; try again in a moment", dir)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(lines[0]))
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil || !isPostgresProcess(pid) {
		return "", fmt.Errorf("no Studio is running with data directory %s (start it with 'studio serve', or set DATABASE_URL)", dir)
	}
	password, err := os.ReadFile(filepath.Join(dir, "postgres.password"))
	if err != nil {
		return "", fmt.Errorf("pgserver: read the private database password: %w", err)
	}
	p := &Server{port: port, password: strings.TrimSpace(string(password))}
	return p.URL(), nil
}

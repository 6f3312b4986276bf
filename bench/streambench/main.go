// Command streambench measures the Studio's run event streams on this
// machine, over loopback only.
//
// It starts a private PostgreSQL and a Studio (this same binary in a child
// process, built like `studio serve`: web.New with the event hub and
// metrics), signs in, opens websocket watchers on a run's event stream,
// appends events and measures, per event and watcher, the time from commit
// to the frame's arrival (p50, p99, max). In the same run it measures the
// floors: a plain NOTIFY→LISTEN round trip and one raw websocket write
// (and, apart from the goal's floor, the same round trip followed by the
// events read the Studio falls back to when a notification does not carry
// its event), the
// Studio's memory per open stream (heap and stacks after a GC in the child,
// from its metrics) and the event-write throughput with and without
// NOTIFY: with no stream open (the Studio does not listen), with a stream
// of another run open, and with every written run watched. For every
// scenario it prints the Studio's CPU time (from /proc, through its
// process metrics) and heap allocations (runtime metrics) per delivered
// frame; -cpuprofile writes its CPU profile of each scenario's events.
//
// The watchers are a websocket client of the bench's own (rawclient.go):
// one epoll loop reads them all, so the bench takes little of the CPU it
// shares with the Studio, and each frame's arrival is the time the
// watcher's kernel received it (SO_TIMESTAMPNS), which does not depend on
// when the bench got to run. The time the bench read it is shown too.
//
//	go run ./streambench -watchers 1,100,1000 -idle 10000
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/pgserver"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "studio-child" {
		if err := runChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "streambench child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "streambench:", err)
		os.Exit(1)
	}
}

type options struct {
	watchers []int
	idle     int
	active   int
	events   int
	interval time.Duration
	durable  bool
	dial     int
	// cpuProfile, when set, is where the Studio's CPU profile of each
	// scenario's events goes (cpuProfile.<idle>+<active>.pprof).
	cpuProfile string
	throughput bool
	// floors: measure the floors (false skips them, and with them the
	// one-watcher goal).
	floors bool
	// rounds is the number of alternating rounds of each throughput
	// comparison.
	rounds int
}

func parseFlags() (*options, error) {
	var o options
	var watchers string
	flag.StringVar(&watchers, "watchers", "1,100,1000", "comma-separated numbers of active watchers, one scenario each")
	flag.IntVar(&o.idle, "idle", 0, "idle watchers (on a run without events) for the idle+active scenario; 0 skips it")
	flag.IntVar(&o.active, "active", 1000, "active watchers in the idle+active scenario")
	flag.IntVar(&o.events, "events", 200, "events appended per scenario")
	flag.DurationVar(&o.interval, "interval", 20*time.Millisecond, "pause between appended events")
	flag.BoolVar(&o.durable, "durable", false, "run PostgreSQL with fsync (default off: the bench measures streaming, not the disk)")
	flag.IntVar(&o.dial, "dial-concurrency", 32, "websocket handshakes in flight at once")
	flag.BoolVar(&o.throughput, "throughput", true, "measure event-write throughput with NOTIFY on and off after the scenarios (false skips it)")
	flag.BoolVar(&o.floors, "floors", true, "measure the floors (false skips them and the one-watcher goal; with -watchers '' the bench measures throughput alone)")
	flag.IntVar(&o.rounds, "rounds", 4, "alternating rounds of 1.5 s each way per throughput comparison")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write the Studio's CPU profile of each scenario's events to `PREFIX`.<idle>+<active>.pprof (go tool pprof reads it with this binary)")
	flag.Parse()
	if o.rounds < 1 || o.rounds > 100 {
		return nil, fmt.Errorf("-rounds: %d is not between 1 and 100", o.rounds)
	}
	for _, f := range strings.Split(watchers, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-watchers: %q is not a positive number", f)
		}
		o.watchers = append(o.watchers, n)
	}
	return &o, nil
}

// raiseFileLimit lifts the soft limit on open files to the hard limit (the
// child inherits it): every watcher is a socket on both sides.
func raiseFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	l.Cur = l.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}

// bench is the running setup: the database, the Studio child and a
// signed-in session.
type bench struct {
	o          *options
	db         *store.DB
	dbURL      string
	studioURL  string
	metricsURL string
	cookie     string
	envID      int64
	project    string
	poller     *poller
	pg         pgProcs
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	ctx := context.Background()
	limit := raiseFileLimit()
	fmt.Printf("streambench: %d CPUs, open files limit %d\n", numCPU(), limit)
	// Each open watcher is a socket in this process and one in the Studio.
	need := slices.Max(append(o.watchers, 1))
	if o.idle > 0 {
		need = max(need, o.idle+o.active)
	}
	if limit > 0 && uint64(need+200) > limit {
		return fmt.Errorf("%d watchers at once need about %d open files per process; the limit here is %d (raise the hard limit, e.g. ulimit -Hn, or ask for fewer)", need, need+200, limit)
	}

	dir, err := os.MkdirTemp("", "streambench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pg, err := pgserver.Start(ctx, pgserver.Options{
		Dir: dir, Ephemeral: !o.durable, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	defer pg.Stop()
	b := &bench{o: o, dbURL: pg.URL(), pg: newPGProcs(filepath.Join(dir, "postgres"))}
	if b.poller, err = newPoller(); err != nil {
		return err
	}
	defer b.poller.close()
	if b.db, err = store.Open(ctx, b.dbURL); err != nil {
		return err
	}
	defer b.db.Close()
	if _, err := b.db.Migrate(ctx); err != nil {
		return err
	}

	child, err := b.startStudio(ctx, dir)
	if err != nil {
		return err
	}
	defer func() {
		_ = child.Process.Signal(os.Interrupt)
		_ = child.Wait()
	}()
	if err := b.setup(ctx); err != nil {
		return err
	}

	var floorP99, floorReadP99 time.Duration
	if o.floors {
		notifyFloor, err := b.notifyFloor(ctx, 300, o.interval)
		if err != nil {
			return err
		}
		wsArrived, wsRead, err := b.websocketFloor(300, o.interval)
		if err != nil {
			return err
		}
		readFloor, err := b.readFloor(ctx, 300, o.interval)
		if err != nil {
			return err
		}
		// The floors are paced like the scenarios' events: how long a round
		// trip takes depends on how long the processes slept before it.
		fmt.Printf("\nfloors (300 samples each, %s apart like the scenarios' events)\n", o.interval)
		fmt.Printf("  NOTIFY→LISTEN round trip               %s\n", notifyFloor)
		fmt.Printf("  raw websocket write→watcher's kernel   %s\n", wsArrived)
		fmt.Printf("  raw websocket write→read by the bench  %s\n", wsRead)
		floorP99, floorReadP99 = notifyFloor.p99+wsArrived.p99, notifyFloor.p99+wsRead.p99
		fmt.Printf("  floor p99 (NOTIFY + write)             %s (to the bench's read: %s)\n", ms(floorP99), ms(floorReadP99))
		fmt.Printf("  and, not part of the goal's floor, the read a notification without its event costs\n")
		fmt.Printf("  COMMIT → notified → the Studio's read   %s\n", readFloor)
		fmt.Printf("  floor p99 with the read (+ write)      %s\n", ms(readFloor.p99+wsArrived.p99))
	}

	if len(o.watchers) > 0 || o.idle > 0 {
		fmt.Printf("\nscenarios: %d events %s apart; latency = COMMIT sent → frame received by the watcher's kernel\n", o.events, o.interval)
		fmt.Printf("(over loopback that is the end of the Studio's write; in parentheses, → frame read by the bench,\n")
		fmt.Printf("whose watchers share the cores with the Studio)\n")
	}
	for _, n := range o.watchers {
		res, err := b.scenario(ctx, 0, n)
		if err != nil {
			return fmt.Errorf("%d watchers: %w", n, err)
		}
		goal := ""
		switch {
		case n == 1 && !o.floors:
			goal = "goal p99 ≤ 2×floor: not judged (-floors=false)"
		case n == 1:
			goal = fmt.Sprintf("goal p99 ≤ 2×floor = %s: %s (read: ≤ %s: %s)", ms(2*floorP99), pass(res.lat.p99 <= 2*floorP99),
				ms(2*floorReadP99), pass(res.read.p99 <= 2*floorReadP99))
		case n >= 1000:
			goal = fmt.Sprintf("goal p99 ≤ 15 ms: %s (read: %s); Studio CPU per delivered frame ≤ 10 µs: %s", pass(res.lat.p99 <= 15*time.Millisecond),
				pass(res.read.p99 <= 15*time.Millisecond), pass(res.frames > 0 && res.cpuPerFrame <= 10*time.Microsecond))
		}
		fmt.Printf("  %5d watchers: %s\n         %s\n", n, res, goal)
	}
	if o.idle > 0 {
		res, err := b.scenario(ctx, o.idle, o.active)
		if err != nil {
			return fmt.Errorf("%d idle + %d active: %w", o.idle, o.active, err)
		}
		fmt.Printf("  %d idle + %d active: %s\n         goal p99 ≤ 120 ms: %s (read: %s); ≤ 6 KiB per idle stream: %s\n",
			o.idle, o.active, res, pass(res.lat.p99 <= 120*time.Millisecond), pass(res.read.p99 <= 120*time.Millisecond), pass(res.idleBytes <= 6*1024))
	}

	if !o.throughput {
		return nil
	}
	// The Studio listens only to the streams it follows: measure with
	// nothing followed, with a stream of another run open, and with every
	// written run followed.
	if err := b.waitStreamsOpen(ctx, func(n int) bool { return n == 0 }, "no"); err != nil {
		return err
	}
	fmt.Printf("\nevent writes (4 writers, %d alternating rounds of 1.5 s each way), NOTIFY on / off:\n", o.rounds)
	fmt.Printf("(below each: PostgreSQL's CPU per event written, all its processes, NOTIFY on / off, and what the\n")
	fmt.Printf("Studio's LISTEN backend spent per event with NOTIFY on: PostgreSQL wakes every backend that LISTENs\n")
	fmt.Printf("in the database on every commit that notified, whatever the channel)\n")
	report := func(what string, r throughputResult, goal bool, why string) {
		g := "(" + why + ")"
		if goal {
			g = fmt.Sprintf("(goal ≥ 0.8: %s)", pass(r.ratio() >= 0.8))
		}
		fmt.Printf("  %-44s %5.0f/s / %5.0f/s, ratio %.2f %s; the Studio heard %.2f notifications per event\n",
			what, r.with, r.without, r.ratio(), g, r.heard)
		if r.pgWith > 0 && r.pgWithout > 0 {
			fmt.Printf("  %-44s PostgreSQL %.0f µs / %.0f µs per event (ratio %.2f); its LISTEN backend %.1f µs and %.2f wake-ups per event\n",
				"", us(r.pgWith), us(r.pgWithout), float64(r.pgWithout)/float64(r.pgWith), us(r.listenerCPU), r.listenerWakeups)
		}
	}
	r, err := b.throughput(ctx, 4, 1500*time.Millisecond, false)
	if err != nil {
		return err
	}
	report("no stream open (the Studio does not listen):", r, true, "")
	// The store's statement builds the event into a notification only for
	// a followed run: what that costs, with the runs marked as followed
	// and nobody streaming them.
	if r, err = b.throughputOf(ctx, 4, 1500*time.Millisecond, false, true); err != nil {
		return err
	}
	report("  written runs marked followed (event carried):", r, false, "what carrying the event costs; nobody streams it")
	otherRun, err := b.newRun(ctx)
	if err != nil {
		return err
	}
	ws, err := b.openWatchers(otherRun, 1, 0)
	if err != nil {
		return err
	}
	if err := b.waitStreams(ctx, 1); err != nil {
		return err
	}
	r, err = b.throughput(ctx, 4, 1500*time.Millisecond, false)
	b.closeWatchers(ws)
	if err != nil {
		return err
	}
	report("a stream of another run open (it listens):", r, true, "")
	if err := b.waitStreamsOpen(ctx, func(n int) bool { return n == 0 }, "no"); err != nil {
		return err
	}
	if r, err = b.throughput(ctx, 4, 1500*time.Millisecond, true); err != nil {
		return err
	}
	report("each written run watched (it streams them):", r, false, "the Studio streams every event: not a NOTIFY-only cost, no goal")
	return nil
}

func numCPU() int {
	n, _ := strconv.Atoi(os.Getenv("GOMAXPROCS"))
	if n > 0 {
		return n
	}
	return runtimeNumCPU()
}

func pass(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// freePort returns a loopback address that was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startStudio runs this binary as the Studio child and waits until it
// answers.
func (b *bench) startStudio(ctx context.Context, dir string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	maddr, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "studio-child", "-addr", addr, "-metrics-addr", maddr, "-data-dir", dir)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+b.dbURL)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b.studioURL = "http://" + addr
	b.metricsURL = "http://" + maddr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(b.studioURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, nil
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("the Studio child did not answer on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setup creates a project and environment and signs in as the local
// administrator.
func (b *bench) setup(ctx context.Context) error {
	b.project = "bench"
	err := b.db.Pool.QueryRow(ctx, `
		WITH p AS (INSERT INTO projects (name) VALUES ($1) RETURNING id)
		INSERT INTO environments (project_id, name) SELECT id, 'production' FROM p RETURNING id`, b.project).Scan(&b.envID)
	if err != nil {
		return fmt.Errorf("create environment: %w", err)
	}
	token, err := b.db.CreateLoginToken(ctx)
	if err != nil {
		return err
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(b.studioURL + "/login/local?token=" + url.QueryEscape(token))
	if err != nil {
		return err
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasSuffix(c.Name, "studio_session") {
			b.cookie = c.Name + "=" + c.Value
		}
	}
	if b.cookie == "" {
		return fmt.Errorf("sign-in gave no session cookie (status %d)", resp.StatusCode)
	}
	return nil
}

// newRun adds a running deploy with a plan of six checkpoints, so each
// event's frame carries what a real one does: the run's heading and summary
// and the changed checkpoint's row.
func (b *bench) newRun(ctx context.Context) (int64, error) {
	var id int64
	err := b.db.Pool.QueryRow(ctx, `
		INSERT INTO runs (environment_id, kind, status, started_at) VALUES ($1, 'deploy', 'running', now())
		RETURNING id`, b.envID).Scan(&id)
	if err != nil {
		return 0, err
	}
	_, err = b.db.Pool.Exec(ctx, `
		INSERT INTO run_checkpoints (run_id, position, kind, name, status, started_at, detail)
		SELECT $1, g, 'issue-tls', 'shop.example.test', 'running', now(),
		       '{"probe": {"domain": "shop.example.test", "addresses": [{"address": "203.0.113.7", "answer": "here"}]}}'
		FROM generate_series(0, 5) g`, id)
	return id, err
}

// appendSQL is the store's one append-and-notify statement, run here in
// an explicit transaction so the bench can note when COMMIT is sent.
var appendSQL = store.AppendRunEventSQL()

// appendNoNotifySQL is the same append without the notification.
const appendNoNotifySQL = `
	WITH s AS (UPDATE runs SET last_seq = last_seq + 1 WHERE id = $1 RETURNING id, last_seq),
	     i AS (INSERT INTO run_events (run_id, seq, checkpoint, payload)
	           SELECT id, last_seq, $2, $3 FROM s RETURNING run_id, seq)
	SELECT i.seq FROM i`

var benchPayload = []byte(`{"run": {"status": "running"}, "checkpoint": {"position": 3, "kind": "issue-tls", "name": "shop.example.test", "status": "running", "warning": ""}}`)

// appendEvent appends one event and returns its seq and when COMMIT was sent.
func (b *bench) appendEvent(ctx context.Context, sql string, runID int64) (int64, time.Time, error) {
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer tx.Rollback(ctx)
	pos := 3
	var seq int64
	if err := tx.QueryRow(ctx, sql, runID, &pos, benchPayload).Scan(&seq); err != nil {
		return 0, time.Time{}, err
	}
	at := time.Now()
	return seq, at, tx.Commit(ctx)
}

// stats summarises latency samples.
type stats struct {
	n             int
	p50, p99, max time.Duration
}

func summarize(samples []time.Duration) stats {
	if len(samples) == 0 {
		return stats{}
	}
	slices.Sort(samples)
	at := func(q float64) time.Duration { return samples[min(len(samples)-1, int(q*float64(len(samples))))] }
	return stats{n: len(samples), p50: at(0.50), p99: at(0.99), max: samples[len(samples)-1]}
}

func (s stats) String() string {
	return fmt.Sprintf("p50 %s  p99 %s  max %s", ms(s.p50), ms(s.p99), ms(s.max))
}

// notifyFloor measures COMMIT of a NOTIFY → its arrival on a LISTEN
// connection.
func (b *bench) notifyFloor(ctx context.Context, n int, interval time.Duration) (stats, error) {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return stats{}, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN bench_floor"); err != nil {
		return stats{}, err
	}
	var samples []time.Duration
	for i := range n {
		tx, err := b.db.Pool.Begin(ctx)
		if err != nil {
			return stats{}, err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_notify('bench_floor', $1)", strconv.Itoa(i)); err != nil {
			return stats{}, err
		}
		at := time.Now()
		if err := tx.Commit(ctx); err != nil {
			return stats{}, err
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return stats{}, err
		}
		samples = append(samples, time.Since(at))
		time.Sleep(interval)
	}
	return summarize(samples), nil
}

// readFloor measures what the Studio must do before it can write a frame:
// COMMIT of an appended event → its notification on a LISTEN connection →
// the events read the hub runs after a notification that does not carry
// its event (store.RunEventsWithState, on a pool connection): the NOTIFY
// floor plus the fallback's read, without the Studio's own work.
func (b *bench) readFloor(ctx context.Context, n int, interval time.Duration) (stats, error) {
	runID, err := b.newRun(ctx)
	if err != nil {
		return stats{}, err
	}
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return stats{}, err
	}
	defer conn.Close(ctx)
	// A run is announced only while followed: follow it as the hub does
	// (its notification then carries the event, which this floor does not
	// use: it reads the event as the fallback does).
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{store.RunEventsChannel(runID)}.Sanitize()+";"+store.FollowRunSQL(runID)); err != nil {
		return stats{}, err
	}
	var samples []time.Duration
	for range n {
		seq, at, err := b.appendEvent(ctx, appendSQL, runID)
		if err != nil {
			return stats{}, err
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return stats{}, err
		}
		evs, _, _, err := b.db.RunEventsWithState(ctx, runID, seq-1, 500)
		if err != nil {
			return stats{}, err
		}
		if len(evs) != 1 || evs[0].Seq != seq {
			return stats{}, fmt.Errorf("read floor: read %d events after %d, want event %d", len(evs), seq-1, seq)
		}
		samples = append(samples, time.Since(at))
		time.Sleep(interval)
	}
	return summarize(samples), nil
}

// websocketFloor measures one websocket write on loopback: the server
// writes the time it sends; the time the watcher's kernel received it is
// the floor (arrived), the time the bench's poller read it is read.
func (b *bench) websocketFloor(n int, interval time.Duration) (arrived, read stats, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return stats{}, stats{}, err
	}
	up := websocket.Upgrader{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		time.Sleep(interval)
		for range n {
			msg := append(strconv.AppendInt(nil, time.Now().UnixNano(), 10), benchPayload...)
			pm, _ := websocket.NewPreparedMessage(websocket.TextMessage, msg)
			if err := c.WritePreparedMessage(pm); err != nil {
				return
			}
			time.Sleep(interval)
		}
	})}
	go srv.Serve(l)
	defer srv.Close()
	fd, leftover, err := rawDial("ws://"+l.Addr().String()+"/", nil, 10*time.Second)
	if err != nil {
		return stats{}, stats{}, err
	}
	var got atomic.Int64
	var arrivedS, readS []time.Duration
	c := &rawConn{fd: fd, onText: func(payload []byte, kernel, readAt int64) {
		end := bytes.IndexByte(payload, '{')
		sent, _ := strconv.ParseInt(string(payload[:max(end, 0)]), 10, 64)
		arrivedS = append(arrivedS, time.Duration(kernel-sent))
		readS = append(readS, time.Duration(readAt-sent))
		got.Add(1)
	}}
	if err := b.poller.add(c, leftover); err != nil {
		syscall.Close(fd)
		return stats{}, stats{}, err
	}
	deadline := time.Now().Add(time.Duration(n)*interval + 30*time.Second)
	for got.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	b.poller.remove(c)
	if len(arrivedS) < n {
		return stats{}, stats{}, fmt.Errorf("websocket floor: %d of %d frames arrived", len(arrivedS), n)
	}
	return summarize(arrivedS), summarize(readS), nil
}

// watcher is one websocket client following a run, read by the bench's
// poller (see rawclient.go).
type watcher struct {
	rc *rawConn
	// read and kernel are, for seq base+i, when the poller read the frame
	// and when the kernel received it (Unix nanoseconds).
	read, kernel []int64
	base         int64
	got          atomic.Int64
	err          error
}

// dial opens a watcher of runID from after and hands it to the poller.
func (b *bench) dial(runID, after int64, events int) (*watcher, error) {
	h := http.Header{"Cookie": {b.cookie}, "Origin": {b.studioURL}}
	u := fmt.Sprintf("ws%s/projects/%s/environments/production/runs/%d/events?after=%d",
		strings.TrimPrefix(b.studioURL, "http"), b.project, runID, after)
	fd, leftover, err := rawDial(u, h, 30*time.Second)
	if err != nil {
		return nil, err
	}
	w := &watcher{rc: &rawConn{fd: fd}, base: after + 1}
	if events > 0 {
		w.read, w.kernel = make([]int64, events), make([]int64, events)
	}
	w.rc.onText = w.frame
	if err := b.poller.add(w.rc, leftover); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return w, nil
}

// frame notes a frame's arrival (called by the poller).
func (w *watcher) frame(payload []byte, kernel, read int64) {
	seq, ok := frameSeq(payload)
	if !ok {
		if w.err == nil {
			w.err = fmt.Errorf("frame without seq: %.100s", payload)
		}
		return
	}
	if i := seq - w.base; i >= 0 && i < int64(len(w.read)) {
		w.read[i], w.kernel[i] = read, kernel
	}
	if seq > w.got.Load() {
		w.got.Store(seq)
	}
}

// openWatchers dials n watchers of runID, dial-concurrency at a time.
func (b *bench) openWatchers(runID int64, n, events int) ([]*watcher, error) {
	ws := make([]*watcher, n)
	var firstErr error
	var mu sync.Mutex
	sem := make(chan struct{}, b.o.dial)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w, err := b.dial(runID, 0, events)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			ws[i] = w
		})
	}
	wg.Wait()
	if firstErr != nil {
		b.closeWatchers(ws)
		return nil, firstErr
	}
	return ws, nil
}

// frameSeq finds the number after "seq": in a frame.
func frameSeq(frame []byte) (int64, bool) {
	i := strings.Index(string(frame), `"seq":`)
	if i < 0 {
		return 0, false
	}
	var seq int64
	digits := 0
	for _, c := range frame[i+len(`"seq":`):] {
		if c == ' ' && digits == 0 {
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		seq = seq*10 + int64(c-'0')
		digits++
	}
	return seq, digits > 0
}

// closeWatchers closes the watchers' connections.
func (b *bench) closeWatchers(ws []*watcher) {
	for _, w := range ws {
		if w != nil {
			b.poller.remove(w.rc)
		}
	}
}

// result is what one scenario measured.
type result struct {
	// lat is COMMIT sent → the frame received by the watcher's kernel;
	// read is COMMIT sent → the frame read by the bench's poller.
	lat, read  stats
	activeByte float64
	idleBytes  float64
	missing    int
	active     int
	// inStudio is the mean time from the hub's notification to the frame
	// written, from the Studio's own histogram; hubRead the mean time of
	// the hub's reads of the table after notifications (part of it).
	inStudio, hubRead time.Duration
	// studioCPU and watchersCPU are the CPU time of the Studio process and
	// of this one (its watchers, mostly) over the scenario, divided by its
	// events (background work included): on one machine they share the
	// cores.
	studioCPU, watchersCPU time.Duration
	// frames is how many frames the Studio wrote over the scenario;
	// cpuPerFrame its CPU time per frame and allocsPerFrame its heap
	// allocations per frame (both counting everything the process did
	// meanwhile).
	frames         float64
	cpuPerFrame    time.Duration
	allocsPerFrame float64
	// shared is how many frames completed in the same read as another
	// (their kernel time is the later one's).
	shared int64
}

func (r result) String() string {
	s := r.lat.String() + fmt.Sprintf("  (read by the watcher: %s; in the Studio, notification→written: mean %s, of which the events read: mean %s)",
		r.read, ms(r.inStudio), ms(r.hubRead))
	if r.activeByte > 0 && r.active >= 100 {
		s += fmt.Sprintf("  memory/active stream %.1f KiB", r.activeByte/1024)
	}
	if r.idleBytes > 0 {
		s += fmt.Sprintf("  memory/idle stream %.1f KiB", r.idleBytes/1024)
	}
	if r.studioCPU > 0 {
		s += fmt.Sprintf("  CPU over the scenario per event: Studio %s, bench %s", ms(r.studioCPU), ms(r.watchersCPU))
	}
	if r.frames > 0 {
		s += fmt.Sprintf("\n         Studio per delivered frame (%.0f frames): CPU %.2f µs, %.1f allocations", r.frames,
			float64(r.cpuPerFrame)/float64(time.Microsecond), r.allocsPerFrame)
	}
	if r.shared > 0 {
		s += fmt.Sprintf("  (%d frames were read together with a later one and carry its kernel time)", r.shared)
	}
	if r.missing > 0 {
		s += fmt.Sprintf("  MISSING %d arrivals", r.missing)
	}
	return s
}

// cpuTime is this process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scenario opens idle watchers on a run without events and active watchers
// on another, then appends events and measures their arrival.
func (b *bench) scenario(ctx context.Context, idle, active int) (result, error) {
	var res result
	idleRun, err := b.newRun(ctx)
	if err != nil {
		return res, err
	}
	runID, err := b.newRun(ctx)
	if err != nil {
		return res, err
	}
	base, err := b.memory()
	if err != nil {
		return res, err
	}
	var idlers []*watcher
	if idle > 0 {
		start := time.Now()
		if idlers, err = b.openWatchers(idleRun, idle, 0); err != nil {
			return res, err
		}
		defer b.closeWatchers(idlers)
		if err := b.waitStreams(ctx, idle); err != nil {
			return res, err
		}
		m, err := b.memory()
		if err != nil {
			return res, err
		}
		res.idleBytes = (m - base) / float64(idle)
		if os.Getenv("STREAMBENCH_HEAP") != "" {
			resp, err := http.Get(b.metricsURL + "/debug/heap")
			if err == nil {
				f, _ := os.Create(os.Getenv("STREAMBENCH_HEAP"))
				io.Copy(f, resp.Body)
				f.Close()
				resp.Body.Close()
			}
			sm, _ := b.scrape(false)
			fmt.Printf("    (stacks %.0f KiB, heap %.0f KiB, goroutines %.0f)\n", sm["go_memstats_stack_inuse_bytes"]/1024, sm["go_memstats_heap_inuse_bytes"]/1024, sm["go_goroutines"])
		}
		base = m
		fmt.Printf("    (opened %d idle streams in %s)\n", idle, time.Since(start).Round(time.Millisecond))
	}
	watchers, err := b.openWatchers(runID, active, b.o.events)
	if err != nil {
		return res, err
	}
	defer b.closeWatchers(watchers)
	if err := b.waitStreams(ctx, idle+active); err != nil {
		return res, err
	}
	m, err := b.memory()
	if err != nil {
		return res, err
	}
	res.activeByte = (m - base) / float64(active)
	res.active = active

	if path := os.Getenv("STREAMBENCH_CPU"); path != "" {
		d := time.Duration(b.o.events) * (b.o.interval + time.Millisecond)
		go func() {
			resp, err := http.Get(fmt.Sprintf("%s/debug/cpu?for=%s", b.metricsURL, d))
			if err == nil {
				f, _ := os.Create(fmt.Sprintf("%s.%d", path, active))
				io.Copy(f, resp.Body)
				f.Close()
				resp.Body.Close()
			}
		}()
	}
	if b.o.cpuProfile != "" {
		to := fmt.Sprintf("%s.%d+%d.pprof", b.o.cpuProfile, idle, active)
		if abs, err := filepath.Abs(to); err == nil {
			to = abs
		}
		resp, err := http.Post(b.metricsURL+"/debug/cpu/start?to="+url.QueryEscape(to), "text/plain", nil)
		if err != nil {
			return res, err
		}
		resp.Body.Close()
		defer func() {
			if resp, err := http.Post(b.metricsURL+"/debug/cpu/stop", "text/plain", nil); err == nil {
				resp.Body.Close()
			}
		}()
	}
	before, err := b.scrape(false)
	if err != nil {
		return res, err
	}
	cpuBefore := cpuTime()
	sharedBefore := b.poller.shared.Load()
	sent := make([]int64, b.o.events)
	for i := range b.o.events {
		seq, at, err := b.appendEvent(ctx, appendSQL, runID)
		if err != nil {
			return res, err
		}
		if seq != int64(i+1) {
			return res, fmt.Errorf("appended seq %d, want %d", seq, i+1)
		}
		sent[i] = at.UnixNano()
		time.Sleep(b.o.interval)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, w := range watchers {
		for w.got.Load() < int64(b.o.events) && time.Now().Before(deadline) {
			if closed, _, _ := b.poller.state(w.rc); closed {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	res.watchersCPU = (cpuTime() - cpuBefore) / time.Duration(b.o.events)
	res.shared = b.poller.shared.Load() - sharedBefore
	if after, err := b.scrape(false); err == nil {
		cpu := after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]
		res.studioCPU = time.Duration(cpu / float64(b.o.events) * float64(time.Second))
		if res.frames = after["studio_events_delivered_total"] - before["studio_events_delivered_total"]; res.frames > 0 {
			res.cpuPerFrame = time.Duration(cpu / res.frames * float64(time.Second))
			res.allocsPerFrame = (after["go_memstats_mallocs_total"] - before["go_memstats_mallocs_total"]) / res.frames
		}
		if n := after["studio_event_delivery_seconds_count"] - before["studio_event_delivery_seconds_count"]; n > 0 {
			res.inStudio = time.Duration((after["studio_event_delivery_seconds_sum"] - before["studio_event_delivery_seconds_sum"]) / n * float64(time.Second))
		}
		if n := after["studio_event_hub_read_seconds_count"] - before["studio_event_hub_read_seconds_count"]; n > 0 {
			res.hubRead = time.Duration((after["studio_event_hub_read_seconds_sum"] - before["studio_event_hub_read_seconds_sum"]) / n * float64(time.Second))
		}
	}
	b.closeWatchers(watchers) // the poller no longer touches them
	read := make([]time.Duration, 0, len(watchers)*b.o.events)
	arrived := make([]time.Duration, 0, len(watchers)*b.o.events)
	for _, w := range watchers {
		if w.err != nil {
			return res, w.err
		}
		if closed, code, err := b.poller.state(w.rc); closed && w.got.Load() < int64(b.o.events) {
			return res, fmt.Errorf("the Studio closed a watcher after seq %d (code %d, %v)", w.got.Load(), code, err)
		}
		for i, a := range w.read {
			if a == 0 {
				res.missing++
				continue
			}
			read = append(read, time.Duration(max(0, a-sent[i])))
			arrived = append(arrived, time.Duration(max(0, w.kernel[i]-sent[i])))
		}
	}
	res.lat, res.read = summarize(arrived), summarize(read)
	return res, nil
}

// waitStreams waits until the Studio reports n open streams.
func (b *bench) waitStreams(ctx context.Context, n int) error {
	return b.waitStreamsOpen(ctx, func(open int) bool { return open >= n }, strconv.Itoa(n))
}

// waitStreamsOpen waits until the number of streams the Studio reports
// open satisfies ok.
func (b *bench) waitStreamsOpen(ctx context.Context, ok func(int) bool, want string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := b.scrape(false)
		if err != nil {
			return err
		}
		if ok(int(m["studio_event_streams_open"])) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Studio reports %v open streams, want %s", m["studio_event_streams_open"], want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// memory returns the Studio's heap in use plus goroutine stacks right after
// a garbage collection.
func (b *bench) memory() (float64, error) {
	m, err := b.scrape(true)
	if err != nil {
		return 0, err
	}
	return m["go_memstats_heap_inuse_bytes"] + m["go_memstats_stack_inuse_bytes"], nil
}

// scrape reads the child's metrics (summing the series of each name),
// after a GC when gc is set.
func (b *bench) scrape(gc bool) (map[string]float64, error) {
	if gc {
		resp, err := http.Post(b.metricsURL+"/gc", "text/plain", nil)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
	}
	resp, err := http.Get(b.metricsURL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil {
			out[name] += v
		}
	}
	return out, nil
}

// throughputResult is what one throughput comparison measured.
type throughputResult struct {
	with, without float64 // events per second, NOTIFY on and off
	// heard is how many notifications the Studio received per event
	// appended with NOTIFY on.
	heard float64
	// pgWith and pgWithout are PostgreSQL's CPU time per event written
	// (all its processes), NOTIFY on and off; listenerCPU and
	// listenerWakeups are the Studio's LISTEN backend's CPU time and
	// wake-ups per event written with NOTIFY on (zero without /proc).
	pgWith, pgWithout, listenerCPU time.Duration
	listenerWakeups                float64
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (r throughputResult) ratio() float64 { return r.with / r.without }

// throughput appends events from writers goroutines (one run each) for d,
// with and without NOTIFY, and returns events per second of each. With
// follow, each written run has a watcher (whose frames are checked to
// reach the last event written with NOTIFY on).
func (b *bench) throughput(ctx context.Context, writers int, d time.Duration, follow bool) (throughputResult, error) {
	return b.throughputOf(ctx, writers, d, follow, false)
}

// throughputOf is throughput; with marked, the bench marks each written
// run as followed (store.FollowRunSQL, from a connection of its own that
// listens to nothing), so that the store's statement builds the event into
// every notification while nobody streams it: what carrying the event costs.
func (b *bench) throughputOf(ctx context.Context, writers int, d time.Duration, follow, marked bool) (throughputResult, error) {
	notifySQL := appendSQL
	var res throughputResult
	measure := func(sql string) (float64, error) {
		var total atomic.Int64
		var firstErr error
		var mu sync.Mutex
		runIDs := make([]int64, writers)
		last := make([]int64, writers)
		var ws []*watcher
		defer func() { b.closeWatchers(ws) }()
		if follow {
			// The previous round's watchers first leave.
			if err := b.waitStreamsOpen(ctx, func(n int) bool { return n == 0 }, "no"); err != nil {
				return 0, err
			}
		}
		var marker *pgx.Conn
		if marked {
			var err error
			if marker, err = pgx.Connect(ctx, b.dbURL); err != nil {
				return 0, err
			}
			defer marker.Close(context.Background())
		}
		for i := range runIDs {
			runID, err := b.newRun(ctx)
			if err != nil {
				return 0, err
			}
			runIDs[i] = runID
			if marker != nil {
				if _, err := marker.Exec(ctx, store.FollowRunSQL(runID)); err != nil {
					return 0, err
				}
			}
			if follow {
				w, err := b.dial(runID, 0, 0)
				if err != nil {
					return 0, err
				}
				ws = append(ws, w)
			}
		}
		if follow {
			if err := b.waitStreamsOpen(ctx, func(n int) bool { return n == writers }, strconv.Itoa(writers)); err != nil {
				return 0, err
			}
		}
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for i, runID := range runIDs {
			wg.Go(func() {
				for time.Now().Before(end) {
					seq, _, err := b.appendEvent(ctx, sql, runID)
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
					last[i] = seq
					total.Add(1)
				}
			})
		}
		wg.Wait()
		if follow && sql == notifySQL {
			deadline := time.Now().Add(30 * time.Second)
			for i, w := range ws {
				for w.got.Load() < last[i] {
					if time.Now().After(deadline) {
						return 0, fmt.Errorf("a watcher of a written run got up to event %d of %d", w.got.Load(), last[i])
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
		return float64(total.Load()) / d.Seconds(), firstErr
	}
	// Alternate in short rounds, so that neither side gets all the warm-up
	// or all of a noisy neighbour.
	rounds := float64(b.o.rounds)
	var events, eventsWithout float64
	var pgWith, pgWithout, listenerCPU time.Duration
	var listenerWakeups int64
	listener := b.listenerPID(ctx)
	before, err := b.scrape(false)
	if err != nil {
		return res, err
	}
	for range b.o.rounds {
		s0 := b.samplePG(listener)
		r, err := measure(appendNoNotifySQL)
		if err != nil {
			return res, err
		}
		s1 := b.samplePG(listener)
		res.without += r / rounds
		eventsWithout += r * d.Seconds()
		if r, err = measure(notifySQL); err != nil {
			return res, err
		}
		s2 := b.samplePG(listener)
		res.with += r / rounds
		events += r * d.Seconds()
		pgWithout += s1.cpu - s0.cpu
		pgWith += s2.cpu - s1.cpu
		listenerCPU += s2.listenerCPU - s1.listenerCPU
		listenerWakeups += s2.listenerWakeups - s1.listenerWakeups
	}
	if events > 0 && eventsWithout > 0 {
		res.pgWith = time.Duration(float64(pgWith) / events)
		res.pgWithout = time.Duration(float64(pgWithout) / eventsWithout)
		res.listenerCPU = time.Duration(float64(listenerCPU) / events)
		res.listenerWakeups = float64(listenerWakeups) / events
	}
	after, err := b.scrape(false)
	if err != nil {
		return res, err
	}
	res.heard = (after["studio_event_notifications_total"] - before["studio_event_notifications_total"]) / events
	return res, nil
}

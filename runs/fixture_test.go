package runs_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise. Go's default is GOMAXPROCS (2 on a
// two-core CI machine), but most of these tests wait: for a River client's
// poll, a lease's renewal, a probe's deadline, a freeze window's end, the
// S3 test server; four at once took the package from about 100 s to about
// 60 s on two cores (see docs/testing.md).
const parallelTests = 4

func TestMain(m *testing.M) {
	storetest.DefaultParallel(parallelTests)
	storetest.Main(m)
}

// clock is a fake clock the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// resolver is a fake DNS: domain → addresses. Every address is loopback.
type resolver struct {
	mu    sync.Mutex
	hosts map[string][]string
}

func (r *resolver) Set(domain string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[domain] = addrs
}

func (r *resolver) LookupIP(ctx context.Context, network, host string) ([]net.IP, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs, ok := r.hosts[host]
	if !ok || len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IP
	for _, a := range addrs {
		out = append(out, net.ParseIP(a))
	}
	return out, nil
}

// Loopback addresses: the Studio's edge, nothing, another installation.
const (
	here      = "127.0.0.1"
	nobody    = "127.0.0.2"
	otherEdge = "127.0.0.3"
)

type fixture struct {
	t     testing.TB
	ctx   context.Context
	db    *store.DB
	vault *store.Vault
	// secretKey is the value-encryption key the vault was opened with.
	secretKey string
	svc       *runs.Service
	local     *local.Platform
	clock     *clock
	resolver  *resolver
	faults    *local.Faults
	env       *store.Environment
	project   *store.Project
}

var start = time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)

// newFixture starts a database, the Studio's edge on 127.0.0.1 and another
// installation's edge on 127.0.0.3 (same port), and an environment named
// production of a project compiled from manifest, with values set.
func newFixture(t testing.TB, manifest string, values map[string]string) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, ctx: ctx, clock: &clock{t: start}, resolver: &resolver{hosts: map[string][]string{}}, faults: &local.Faults{}}
	f.db = storetest.NewDB(t)
	f.db.Now = f.clock.Now
	f.secretKey = store.GenerateKey()
	keys, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: f.secretKey})
	if err != nil {
		t.Fatal(err)
	}
	f.vault = store.NewVault(f.db, keys)

	l, err := net.Listen("tcp", here+":0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	lp, id, err := local.New(ctx, f.db, f.vault, local.Options{Resolver: f.resolver, EdgePort: port, Faults: f.faults, ProbeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.local = lp
	serve(t, l, id.Handler())
	if lo, err := net.Listen("tcp", otherEdge+":"+strconv.Itoa(port)); err == nil {
		serve(t, lo, platform.Identity{Secret: []byte("another installation")}.Handler())
	} else {
		t.Logf("no second edge: %v", err)
	}
	f.svc = runs.NewService(f.db, f.vault, lp, f.clock.Now, nil)

	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		t.Fatalf("manifest: %v", res.Errors())
	}
	p, _, err := f.db.CreateProject(ctx, store.Actor{}, store.NewRevision{Name: res.Definition.Name, Source: manifest,
		Canonical: res.Definition.Canonical(), Hash: res.Hash})
	if err != nil {
		t.Fatal(err)
	}
	f.project = p
	if f.env, err = f.db.CreateEnvironment(ctx, store.Actor{}, p.ID, "production"); err != nil {
		t.Fatal(err)
	}
	for k, v := range values {
		f.setValue(k, v)
	}
	return f
}

func serve(t testing.TB, l net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

func (f *fixture) setValue(name, value string) {
	f.t.Helper()
	if _, err := f.vault.SetValue(f.ctx, store.Actor{}, f.env, name, value); err != nil {
		f.t.Fatalf("set %s: %v", name, err)
	}
}

func (f *fixture) addRevision(manifest string) {
	f.t.Helper()
	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		f.t.Fatalf("manifest: %v", res.Errors())
	}
	if _, _, err := f.db.AddRevision(f.ctx, store.Actor{}, f.project.ID, store.NewRevision{Name: res.Definition.Name, Source: manifest,
		Canonical: res.Definition.Canonical(), Hash: res.Hash}); err != nil {
		f.t.Fatal(err)
	}
}

// reloadEnv reads the environment again (its active revision).
func (f *fixture) reloadEnv() *store.Environment {
	f.t.Helper()
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	f.env = env
	return env
}

func (f *fixture) deploy(req runs.DeployRequest) *store.Run {
	f.t.Helper()
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.reloadEnv(), req)
	if err != nil {
		f.t.Fatalf("start deploy: %v", err)
	}
	return run
}

// execute executes the run once and returns where it was left.
func (f *fixture) execute(id int64) runs.Result {
	f.t.Helper()
	res, err := f.svc.Runner.Execute(f.ctx, id)
	if err != nil {
		f.t.Fatalf("execute run %d: %v", id, err)
	}
	return res
}

func (f *fixture) run(id int64) *store.Run {
	f.t.Helper()
	r, err := f.db.RunByID(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) checkpoints(id int64) []store.Checkpoint {
	f.t.Helper()
	cps, err := f.db.Checkpoints(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return cps
}

// checkpoint returns the run's first checkpoint of kind.
func (f *fixture) checkpoint(id int64, kind string) (store.Checkpoint, runs.CheckpointDetail) {
	f.t.Helper()
	for _, cp := range f.checkpoints(id) {
		if cp.Kind == kind {
			return cp, runs.DecodeCheckpointDetail(cp.Detail)
		}
	}
	f.t.Fatalf("run %d has no %s checkpoint", id, kind)
	return store.Checkpoint{}, runs.CheckpointDetail{}
}

// events returns the run's events, checking that their numbers run 1, 2,
// 3 ... without gaps.
func (f *fixture) events(id int64) []store.RunEvent {
	f.t.Helper()
	evs, err := f.db.RunEventsAfter(f.ctx, id, 0, 10000)
	if err != nil {
		f.t.Fatal(err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			f.t.Fatalf("run %d event %d has seq %d", id, i+1, e.Seq)
		}
	}
	return evs
}

type eventPayload struct {
	Run struct {
		Status, Reason, Summary string
	} `json:"run"`
	Checkpoint *struct {
		Position           int
		Kind, Name, Status string
		Warning            string
	} `json:"checkpoint"`
}

func decodeEvent(t *testing.T, e store.RunEvent) eventPayload {
	var p eventPayload
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) certificate(domain string) *store.Certificate {
	f.t.Helper()
	c, err := f.db.CertificateFor(f.ctx, f.env.ID, domain)
	if err != nil {
		f.t.Fatalf("certificate %s: %v", domain, err)
	}
	return c
}

// wikiManifest is the production-shaped example with a shorter rollout
// timeout placeholder the tests replace.
const wikiManifest = `name: team-wiki
applications:
  web:
    build:
      context: .
    environment:
      SESSION_SECRET: "${SESSION_SECRET}"
      DATABASE_URL: "{{databases.data.url}}"
      S3_BUCKET: "{{buckets.attachments.name}}"
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: "${APP_DOMAIN}"
        port: http
        aliases: ["www.${APP_DOMAIN}"]
    deployment:
      releaseCommand:
        command: ["/app/wiki", "migrate", "up"]
        timeout: 5m
      rollout:
        timeout: ROLLOUT
databases:
  data:
    engine: postgres
    version: 17
buckets:
  attachments:
    quotas:
      storage: 50GB
`

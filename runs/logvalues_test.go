package runs_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/mask"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
)

// midBuildPlatform is the local platform with something done to the
// environment's values while the first build runs (after the deploy fixed
// its release and handed the values over).
type midBuildPlatform struct {
	*local.Platform
	during func(ctx context.Context)
	done   bool
}

func (p *midBuildPlatform) Build(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) (string, error) {
	if !p.done {
		p.done = true
		p.during(ctx)
	}
	return p.Platform.Build(ctx, env, app, a, out)
}

// TestRunLogKeepsNoLinesWhenAVersionOfTheReleaseIsGone deletes the version
// of SESSION_SECRET a running deploy handed its platform: that plaintext
// can no longer be read to mask it, so the release command's lines, which
// print it, are replaced by one line saying they are not kept.
func TestRunLogKeepsNoLinesWhenAVersionOfTheReleaseIsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": logSecret})
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) {
		fs.Output = map[string]map[string][]string{"release": {"web": {"SESSION_SECRET=${SESSION_SECRET}"}}}
	})
	f.svc.Runner.Platform = &midBuildPlatform{Platform: f.local, during: func(ctx context.Context) {
		f.setValue("SESSION_SECRET", "a-rotated-session-secret")
		if _, err := f.db.Pool.Exec(ctx, `DELETE FROM value_versions WHERE environment_id = $1 AND name = 'SESSION_SECRET'`, f.env.ID); err != nil {
			t.Error(err)
		}
	}}
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	lines, err := f.db.RunLog(f.ctx, run.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	notKept := false
	for _, l := range lines {
		if found := leaks([]byte(l.Text), logSecret); len(found) > 0 {
			t.Errorf("stored line %d holds the value (%v)", l.N, found)
		}
		notKept = notKept || strings.HasPrefix(l.Text, "Log lines of this step are not kept")
	}
	if !notKept {
		t.Errorf("no line says that a step's lines are not kept (%d lines)", len(lines))
	}
}

// TestRetentionKeepsTheValueVersionsOfAnUnfinishedRun prunes past the
// retention while a deploy runs with SESSION_SECRET v1, which six newer
// versions have replaced: v1 stays as long as the run is unfinished (its
// platform holds it and its lines are masked with it) and goes after.
func TestRetentionKeepsTheValueVersionsOfAnUnfinishedRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": "secret-1"})
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	pruned := int64(-1)
	f.svc.Runner.Platform = &midBuildPlatform{Platform: f.local, during: func(ctx context.Context) {
		for i := 2; i <= 7; i++ {
			f.setValue("SESSION_SECRET", fmt.Sprintf("secret-%d", i))
		}
		n, err := f.db.PruneValueVersions(ctx, 24*time.Hour, time.Now().Add(48*time.Hour))
		if err != nil {
			t.Error(err)
		}
		pruned = n
	}}
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	if pruned != 0 {
		t.Fatalf("prune during the run deleted %d versions, want 0 (v1 is the run's)", pruned)
	}
	if got := f.run(run.ID).Status; got != store.RunSucceeded {
		t.Fatalf("run %s, want succeeded", got)
	}
	n, err := f.db.PruneValueVersions(f.ctx, 24*time.Hour, time.Now().Add(48*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("prune after the run deleted %d (%v), want 1 (v1)", n, err)
	}
}

// TestRunLogMasksAValueSplitByWhatTheStoreRemoves makes the release
// command print SESSION_SECRET cut in two by a carriage return or a NUL:
// the store removes them, which puts the value back together, so the masker must see the line as it will be stored.
func TestRunLogMasksAValueSplitByWhatTheStoreRemoves(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": logSecret})
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	head, tail := logSecret[:6], logSecret[6:]
	f.faults.Set(func(fs *local.Faults) {
		fs.Output = map[string]map[string][]string{"release": {"web": {
			"carriage return: " + head + "\r" + tail,
			"NUL: " + head + "\x00" + tail,
			"both: " + head + "\r\x00" + tail,
		}}}
	})
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	lines, err := f.db.RunLog(f.ctx, run.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range lines {
		if found := leaks([]byte(l.Text), logSecret); len(found) > 0 {
			t.Errorf("stored line %d holds the value (%v)", l.N, found)
		}
		if strings.Contains(l.Text, ": ") && strings.Contains(l.Text, "••••") {
			seen++
		}
	}
	if seen < 3 {
		t.Errorf("%d of the 3 lines are stored masked", seen)
	}
}

// TestAStepFailureQuotingAValueIsMasked makes the build fail with an error
// that quotes SESSION_SECRET (as a platform's error may): the run's
// reason, its checkpoint and its summary say •••• instead.
func TestAStepFailureQuotingAValueIsMasked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": logSecret})
	f.resolver.Set("wiki.test", here)
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fl *local.Faults) { fl.Build = map[string]string{"web": "login refused for password " + logSecret} })
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	got := f.run(run.ID)
	if got.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", got.Status)
	}
	if found := leaks([]byte(got.Reason), logSecret); len(found) > 0 || !strings.Contains(got.Reason, "••••") {
		t.Errorf("the run's reason is not masked (%v)", found)
	}
	if found := leaks(got.Detail, logSecret); len(found) > 0 {
		t.Errorf("the run's detail holds the value (%v)", found)
	}
	cps, err := f.db.Checkpoints(f.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		if found := leaks(cp.Detail, logSecret); len(found) > 0 {
			t.Errorf("checkpoint %s holds the value (%v)", cp.Name, found)
		}
	}
}

// hostileValues are values holding what a stored line's cleaning or an
// encoder rewrites, by the name a failure gives them (a value cannot hold
// NUL: the vault refuses it; lines with NUL are TestRunLogMasksAValueSplitByWhatTheStoreRemoves).
var hostileValues = map[string]string{
	"carriage return": "cr-s3cr3t\rand-more-text",
	"invalid UTF-8":   "bad-s3cr3t\xff\xfe\xc3and-more",
	"quotes":          `quo"te's3cr3t\back-slash`,
	"<>&":             "<s3cr3t>&amp;more-text",
	"non-ASCII":       "ünïcødé-s3cr3t-€-𝄞",
	"everything":      "a\r\xff\"<&>é𝄞\x1b[31m-s3cr3t",
}

// TestRunLogMasksHostileValuesInEveryEncoding makes the release command
// print SESSION_SECRET, for each hostile value, as it is and in each
// encoding the local platform knows: in every stored line the text where
// it was printed is exactly ••••, and no line holds the value, raw or
// cleaned as the store cleans a line.
func TestRunLogMasksHostileValuesInEveryEncoding(t *testing.T) {
	t.Parallel()
	encodings := []string{"", "|base64", "|url", "|json", "|jsonascii", "|quoted"}
	for vname, v := range hostileValues {
		t.Run(vname, func(t *testing.T) {
			t.Parallel() // each value has a fixture of its own
			f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": v})
			f.resolver.Set("wiki.test", here)
			f.resolver.Set("www.wiki.test", here)
			var script []string
			for _, enc := range encodings {
				script = append(script, "encoding "+enc+" [${SESSION_SECRET"+enc+"}] end")
			}
			f.faults.Set(func(fs *local.Faults) {
				fs.Output = map[string]map[string][]string{"release": {"web": script}}
			})
			run := f.deploy(runs.DeployRequest{})
			f.execute(run.ID)
			lines, err := f.db.RunLog(f.ctx, run.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, l := range lines {
				for _, form := range []string{v, mask.Clean(v)} {
					if strings.Contains(l.Text, form) {
						t.Errorf("stored line %d holds the value", l.N)
					}
				}
				enc, rest, ok := strings.Cut(strings.TrimPrefix(l.Text, "encoding "), " [")
				if !ok || !strings.HasPrefix(l.Text, "encoding ") {
					continue
				}
				seen[enc] = true
				if printed, ok := strings.CutSuffix(rest, "] end"); !ok || printed != mask.Mask {
					t.Errorf("stored line %d (encoding %q): %d bytes where the value was printed, want %q alone", l.N, enc, len(printed), mask.Mask)
				}
			}
			for _, enc := range encodings {
				if !seen[enc] {
					t.Errorf("no stored line of encoding %q", enc)
				}
			}
		})
	}
}

// TestHostnameLinesPrintTheHostnameTheValueStaysMasked deploys a route
// whose domain is APP_DOMAIN while nothing resolves it: the certificate
// step's lines name the hostname as its title does ("DNS wiki.test: no A
// or AAAA records"), since hostnames are public, while the release
// command printing the same value, as a setting or in a URL, stays masked.
func TestHostnameLinesPrintTheHostnameTheValueStaysMasked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, wiki("10m"), map[string]string{"APP_DOMAIN": "wiki.test", "SESSION_SECRET": logSecret})
	f.resolver.Set("www.wiki.test", here)
	f.faults.Set(func(fs *local.Faults) {
		fs.Output = map[string]map[string][]string{"release": {"web": {"APP_DOMAIN=${APP_DOMAIN}", "origin https://${APP_DOMAIN}/login"}}}
	})
	run := f.deploy(runs.DeployRequest{})
	f.execute(run.ID)
	lines, err := f.db.RunLog(f.ctx, run.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[int]string{}
	for _, cp := range f.checkpoints(run.ID) {
		kinds[cp.Position] = cp.Kind + " " + cp.Name
	}
	var tls, release []string
	for _, l := range lines {
		if found := leaks([]byte(l.Text), logSecret); len(found) > 0 {
			t.Errorf("stored line %d holds SESSION_SECRET (%v)", l.N, found)
		}
		switch k := kinds[l.Position]; {
		case strings.HasPrefix(k, runs.KindIssueTLS+" ") && strings.HasSuffix(k, "web / public"):
			tls = append(tls, l.Text)
		case strings.HasPrefix(k, runs.KindRelease+" "):
			release = append(release, l.Text)
		}
	}
	if !slices.Contains(tls, "DNS wiki.test: no A or AAAA records") {
		t.Errorf("the certificate step of web / public does not name its hostname; its lines:\n%s", strings.Join(tls, "\n"))
	}
	for _, want := range []string{"APP_DOMAIN=••••", "origin https://••••/login"} {
		if !slices.Contains(release, want) {
			t.Errorf("the release command's lines lack %q (the value outside a hostname step stays masked):\n%s", want, strings.Join(release, "\n"))
		}
	}
}

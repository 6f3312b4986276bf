package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/archive"
)

// Backups on Kubernetes (platform.BackupPlatform, platform.ScratchRestorer).
//
// A database is snapshotted by its own PostgreSQL: pg_dump runs in the
// primary pod of its CloudNativePG Cluster (the major version the data
// was written with, whatever the Studio's machine has), through the API
// server's exec, and its output streams through the Studio to the
// backup target (an S3 prefix): nothing in the cluster needs the target's
// credentials or any network, and no Job, image or volume is added. A
// restore streams the file back into psql in that pod, in one transaction
// committed only once the whole file was read and matched its recorded
// SHA-256: a file that differs, or a statement that fails, changes
// nothing. A drill restores it the same way into a scratch database of
// that Cluster, which it drops afterwards, and counts each table's rows.
//
// CloudNativePG's own backups were not chosen: they need barman-cloud (a
// Python tool) in the operand image and the target's credentials in the
// environment's namespace, and a restore makes a new Cluster.

const (
	// pgContainer is the container of a CloudNativePG instance pod.
	pgContainer = "postgres"
	// pgSocket is where its PostgreSQL listens for local connections;
	// the container's user is its superuser through them.
	pgSocket = "/controller/run"
	// pgDatabase is the database CloudNativePG makes for the app user,
	// the one {{databases.NAME.url}} names.
	pgDatabase = "app"
	// annotationStopped is on a Deployment a restore scaled to zero: the
	// replicas to start it again with.
	annotationStopped = "skali.dev/stopped-for-restore"
	// startTimeout bounds the wait for an environment's pods to be Ready
	// again after a restore.
	startTimeout = 10 * time.Minute
)

// CannotSnapshot implements platform.SnapshotLimiter: volumes and buckets
// are snapshotted only with the helper image (the Studio's own).
func (p *Platform) CannotSnapshot(svc platform.SnapshotService) string {
	switch svc.Kind {
	case "database":
		return ""
	case "volume":
		if p.Opts.HelperImage == "" {
			return "the Kubernetes platform snapshots volumes only when the Studio is told its own image (--helper-image)"
		}
		return ""
	case "bucket":
		if p.Opts.HelperImage == "" {
			return "the Kubernetes platform snapshots buckets only when the Studio is told its own image (--helper-image)"
		}
		return ""
	}
	return "the Kubernetes platform does not snapshot a " + svc.Kind
}

// backupNames finds the environment's namespace without creating it: a
// backup acts only where a deploy already made it, and only in the
// environment's own.
func (p *Platform) backupNames(ctx context.Context, env platform.Env) (envNames, error) {
	n := envNames{project: env.Project, env: env.Name, id: env.ID, namespace: NamespaceName(env.Project, env.Name)}
	ns, err := p.Client.Get(ctx, KindNamespace, "", n.namespace)
	if IsNotFound(err) {
		return n, fmt.Errorf("%s was never deployed on this cluster (its namespace %s is missing)", env.Name, n.namespace)
	}
	if err != nil {
		return n, p.apiError("reading namespace "+n.namespace, err)
	}
	return n, checkOwner(ns, n)
}

// primary is the pod of database name's Cluster that takes writes.
func (p *Platform) primary(ctx context.Context, n envNames, name string) (string, error) {
	c, err := p.Client.Get(ctx, KindPGCluster, n.namespace, dnsName(name))
	if IsNotFound(err) {
		return "", fmt.Errorf("database %s is not on the cluster (its Cluster %s is missing)", name, dnsName(name))
	}
	if err != nil {
		return "", p.apiError("reading the Cluster of database "+name, err)
	}
	pod := str(c, "status", "currentPrimary")
	if pod == "" || num(at(c, "status", "readyInstances")) < 1 {
		return "", fmt.Errorf("database %s has no instance running (%s)", name, orText(str(c, "status", "phase"), "no phase yet"))
	}
	return pod, nil
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// snapshotFileName is a service's file in a snapshot.
func snapshotFileName(svc platform.SnapshotService) string {
	if svc.Kind == "database" {
		return "database-" + dnsName(svc.Name) + ".sql"
	}
	return svc.Kind + "-" + dnsName(strings.ReplaceAll(svc.Name, "/", "-")) + ".tar"
}

// stderrTail keeps the end of a command's standard error, for its error.
type stderrTail struct{ b []byte }

func (t *stderrTail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

// said is the command's error: its last line of standard error.
func (t *stderrTail) said(err error) error {
	// The error line itself, rather than a CONTEXT or DETAIL line after
	// it (which quotes the row being read).
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.Contains(l, "ERROR:") || strings.Contains(l, "error:") {
			last = l
			break
		}
	}
	var ee *ExecError
	if errors.As(err, &ee) && last != "" {
		return fmt.Errorf("%s (exit code %d)", last, ee.ExitCode)
	}
	return err
}

// The application names of the Studio's sessions: a restore ends those
// of snapshots and restores a killed Studio left (their psql or pg_dump
// waits in the pod for input that never comes, holding its locks).
const (
	appSnapshot = "skali-snapshot"
	appRestore  = "skali-restore"
	appAdmin    = "skali-admin"
)

// conninfo is the connection string of the Studio's sessions on db.
func conninfo(db, app string) string {
	return "dbname=" + db + " application_name=" + app
}

// psql runs psql as the superuser on database db with script as its
// input, stopping at the first error; it returns its output. Its
// session is named app.
func (p *Platform) psql(ctx context.Context, ns, pod, db, app string, script io.Reader, args ...string) ([]byte, error) {
	var out strings.Builder
	if err := p.psqlTo(ctx, ns, pod, db, app, script, &out, append([]string{"-q"}, args...)...); err != nil {
		return nil, err
	}
	return []byte(out.String()), nil
}

// psqlTo is psql writing its output to out, with args after the
// connection's (no -q of its own).
func (p *Platform) psqlTo(ctx context.Context, ns, pod, db, app string, script io.Reader, out io.Writer, args ...string) error {
	var errs stderrTail
	cmd := append([]string{"psql", "-X", "-v", "ON_ERROR_STOP=1", "-h", pgSocket, "-U", "postgres", "-d", conninfo(db, app)}, args...)
	if err := p.Client.Exec(ctx, ns, pod, pgContainer, cmd, script, out, &errs); err != nil {
		return errs.said(err)
	}
	return nil
}

// replay runs a snapshot's script (verifiedScript) in database db,
// reading psql's command tags as it goes.
func (p *Platform) replay(ctx context.Context, ns, pod, db string, script io.Reader) (*commandTags, error) {
	var tags commandTags
	return &tags, p.psqlTo(ctx, ns, pod, db, appRestore, script, &tags)
}

// holds says whether database db holds want's rows after a replay: by the
// command tags psql printed (each COPY's rows as the server took them,
// then the COMMIT) or, when those did not all arrive (an exec stream can
// lose the end of an output as of an input), by counting each table's
// rows. psql ends with success when its input ends before the COMMIT
// (the transaction rolled back), so its success alone proves nothing.
func (p *Platform) holds(ctx context.Context, ns, pod, db string, tags *commandTags, want dumpCounts) error {
	if tags.hold(want) {
		return nil
	}
	return p.checkCounts(ctx, ns, pod, db, want)
}

// Snapshot implements platform.BackupPlatform: a database's dump, taken
// by pg_dump in its primary pod, streamed to the target with the row
// counts of its tables last.
func (p *Platform) Snapshot(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation) (platform.SnapshotFile, error) {
	if why := p.CannotSnapshot(svc); why != "" {
		return platform.SnapshotFile{}, errors.New(why)
	}
	n, err := p.backupNames(ctx, env)
	if err != nil {
		return platform.SnapshotFile{}, err
	}
	if svc.Kind != "database" {
		return p.archiveWhole(ctx, n, svc, loc, func(w io.Writer) error { return p.snapshotArchive(ctx, n, svc, w) })
	}
	pod, err := p.primary(ctx, n, svc.Name)
	if err != nil {
		return platform.SnapshotFile{}, err
	}
	return p.dumpWhole(ctx, n, pod, svc, loc)
}

// archiveWhole writes the archive stream writes (a volume's files, a
// bucket's objects) to a new file of loc, again when it was cut short.
func (p *Platform) archiveWhole(ctx context.Context, n envNames, svc platform.SnapshotService, loc platform.SnapshotLocation, stream func(io.Writer) error) (platform.SnapshotFile, error) {
	return p.takeWhole(ctx, n, svc, func() (platform.SnapshotFile, error) { return archiveChecked(ctx, svc, loc, stream) })
}

// dumpWhole dumps the database in pod to a new file of loc, again when
// its output was cut short.
func (p *Platform) dumpWhole(ctx context.Context, n envNames, pod string, svc platform.SnapshotService, loc platform.SnapshotLocation) (platform.SnapshotFile, error) {
	return p.takeWhole(ctx, n, svc, func() (platform.SnapshotFile, error) { return p.dump(ctx, n, pod, svc, loc) })
}

// takeWhole takes a snapshot's file with take, again when take says its
// output was cut short (a cutShort error), at most dumpAttempts times.
func (p *Platform) takeWhole(ctx context.Context, n envNames, svc platform.SnapshotService, take func() (platform.SnapshotFile, error)) (platform.SnapshotFile, error) {
	for attempt := 1; ; attempt++ {
		file, err := take()
		var cut cutShort
		if !errors.As(err, &cut) || attempt == dumpAttempts || ctx.Err() != nil {
			return file, err
		}
		p.Opts.Logger.Warn("a snapshot's output ended early although its command succeeded; taking it again",
			"namespace", n.namespace, "service", svc.String(), "attempt", attempt, "problem", err.Error())
	}
}

// cutShort is the error of a file whose output ended early although its
// command reported success: taking it again may succeed.
type cutShort interface{ cutShort() }

func (*cutArchiveError) cutShort() {}
func (*cutDumpError) cutShort()    {}

// cutArchiveError is a volume's or bucket's archive whose stream ended
// before its manifest although the agent reported success.
type cutArchiveError struct {
	svc platform.SnapshotService
	err error
}

func (e *cutArchiveError) Error() string {
	return fmt.Sprintf("the archive of %s was cut short: %v", e.svc, e.err)
}

// archiveChecked writes what stream writes, the archive of a volume's
// files or a bucket's objects, to a new file of loc, reading it as it
// goes (archive.Read): the file is kept only when the stream held every
// entry and its manifest, and each file matched its recorded size and
// SHA-256.
func archiveChecked(ctx context.Context, svc platform.SnapshotService, loc platform.SnapshotLocation, stream func(io.Writer) error) (platform.SnapshotFile, error) {
	w, err := loc.Target.Create(ctx, loc.Installation, loc.Dir, snapshotFileName(svc))
	if err != nil {
		return platform.SnapshotFile{}, err
	}
	defer w.Abort()
	pr, pw := io.Pipe()
	checked := make(chan error, 1)
	go func() {
		_, err := archive.Read(pr, func(archive.Entry) error { return nil })
		io.Copy(io.Discard, pr) // the tar stream's end, after the manifest
		checked <- err
	}()
	err = stream(io.MultiWriter(w, pw))
	pw.Close()
	readErr := <-checked
	switch {
	case err != nil:
		return platform.SnapshotFile{}, err
	case errors.Is(readErr, archive.ErrNoManifest) || errors.Is(readErr, io.ErrUnexpectedEOF):
		return platform.SnapshotFile{}, &cutArchiveError{svc: svc, err: readErr}
	case readErr != nil:
		return platform.SnapshotFile{}, fmt.Errorf("the archive of %s does not check: %w", svc, readErr)
	}
	return w.Commit()
}

// dumpAttempts is how many times a dump or an archive whose output was
// cut short is taken: the API server's exec stream can lose the end of a
// command's output and still report its success
// (kubernetes/kubernetes#124571, seen on the test cluster under load), and
// either is safe to take again.
const dumpAttempts = 3

// cutDumpError is a dump whose output ended before pg_dump's own end
// although pg_dump reported success.
type cutDumpError struct {
	pod, table string // table: the one whose data it ended in, if any
}

func (e *cutDumpError) Error() string {
	if e.table != "" {
		return fmt.Sprintf("pg_dump in pod %s ended inside the data of table %s", e.pod, e.table)
	}
	return fmt.Sprintf("pg_dump in pod %s succeeded but its output ended before the dump's end", e.pod)
}

// dump takes one dump of the database in pod to a new file of loc.
func (p *Platform) dump(ctx context.Context, n envNames, pod string, svc platform.SnapshotService, loc platform.SnapshotLocation) (platform.SnapshotFile, error) {
	w, err := loc.Target.Create(ctx, loc.Installation, loc.Dir, snapshotFileName(svc))
	if err != nil {
		return platform.SnapshotFile{}, err
	}
	defer w.Abort()
	var scan dumpScanner
	var errs stderrTail
	cmd := []string{"pg_dump", "--clean", "--if-exists", "--no-password", "-h", pgSocket, "-U", "postgres", "-d", conninfo(pgDatabase, appSnapshot)}
	if err := p.Client.Exec(ctx, n.namespace, pod, pgContainer, cmd, nil, io.MultiWriter(w, &scan), &errs); err != nil {
		if ctx.Err() != nil {
			return platform.SnapshotFile{}, ctx.Err()
		}
		return platform.SnapshotFile{}, fmt.Errorf("pg_dump in pod %s failed: %w", pod, errs.said(err))
	}
	if scan.inCopy {
		return platform.SnapshotFile{}, &cutDumpError{pod: pod, table: scan.table}
	}
	if !scan.complete {
		return platform.SnapshotFile{}, &cutDumpError{pod: pod}
	}
	if _, err := w.Write(scan.counted.trailer()); err != nil {
		return platform.SnapshotFile{}, err
	}
	return w.Commit()
}

// verifiedScript is the input psql replays file with: the file in one
// transaction, committed only after the whole file was read and matched
// its recorded size and SHA-256; a mismatch ends the input with the
// error instead (psql then ends without a commit, and PostgreSQL rolls
// back). scan, when not nil, reads the file as it goes.
// The caller closes it once psql ended, which ends the copy.
func verifiedScript(ctx context.Context, loc platform.SnapshotLocation, file platform.SnapshotFile, scan io.Writer) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		if _, err := io.WriteString(pw, "BEGIN;\n"); err != nil {
			return
		}
		var dst io.Writer = pw
		if scan != nil {
			dst = io.MultiWriter(pw, scan)
		}
		if err := platform.CopyVerified(ctx, loc, file, dst); err != nil {
			pw.CloseWithError(err)
			return
		}
		io.WriteString(pw, "\nCOMMIT;\n")
		pw.Close()
	}()
	return pr
}

// Restore implements platform.BackupPlatform: the database's dump is
// replayed into it in one transaction (its tables dropped and made again
// with the snapshot's rows).
func (p *Platform) Restore(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation, file platform.SnapshotFile) error {
	if why := p.CannotSnapshot(svc); why != "" {
		return errors.New(why)
	}
	n, err := p.backupNames(ctx, env)
	if err != nil {
		return err
	}
	if svc.Kind != "database" {
		return p.restoreArchive(ctx, n, svc, loc, file)
	}
	pod, err := p.primary(ctx, n, svc.Name)
	if err != nil {
		return err
	}
	// Sessions a killed Studio left on the database would hold the locks
	// this restore takes.
	ended := fmt.Sprintf("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '%s' AND application_name IN ('%s', '%s') AND pid <> pg_backend_pid();\n", pgDatabase, appSnapshot, appRestore)
	if out, err := p.psql(ctx, n.namespace, pod, "postgres", appAdmin, strings.NewReader(ended), "-A", "-t"); err != nil {
		return fmt.Errorf("ending earlier sessions of the Studio's on database %s failed: %w", svc.Name, err)
	} else if k := strings.TrimSpace(string(out)); k != "0" {
		p.Opts.Logger.Info("ended sessions a stopped Studio left on a database before restoring it", "namespace", n.namespace, "database", svc.Name, "sessions", k)
	}
	var scan dumpScanner
	script := verifiedScript(ctx, loc, file, &scan)
	defer script.Close() // ends the reading of the file when psql stops first
	tags, err := p.replay(ctx, n.namespace, pod, pgDatabase, script)
	if err != nil {
		return fileError(err, "replaying it into database "+svc.Name+" failed")
	}
	if scan.trailer != nil {
		if err := p.holds(ctx, n.namespace, pod, pgDatabase, tags, *scan.trailer); err != nil {
			return fmt.Errorf("database %s does not hold the snapshot after its replay: %w", svc.Name, err)
		}
	}
	return nil
}

// fileError keeps a snapshot file's own error (missing, changed) as it
// is, and words any other.
func fileError(err error, what string) error {
	var fe *platform.SnapshotFileError
	var te *platform.TargetError
	if errors.As(err, &fe) || errors.As(err, &te) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// scratchName is the form of a drill's scratch database's name.
var scratchName = regexp.MustCompile(`^skali_drill_[0-9a-f]{16}$`)

// scratchDatabase is the drill's scratch database for scratch (the
// runner's scratch place of one checkpoint): of the drill alone.
func scratchDatabase(scratch string) string {
	sum := sha256.Sum256([]byte(scratch))
	return "skali_drill_" + hex.EncodeToString(sum[:])[:16]
}

// RestoreScratch implements platform.ScratchRestorer: a database's dump
// is restored into a scratch database of its Cluster, made for the drill
// and dropped after it, and each table's rows are counted there against
// the counts the snapshot recorded.
func (p *Platform) RestoreScratch(ctx context.Context, env platform.Env, svc platform.SnapshotService, loc platform.SnapshotLocation, file platform.SnapshotFile, scratch string) (platform.ScratchCheck, error) {
	var none platform.ScratchCheck
	if why := p.CannotSnapshot(svc); why != "" {
		return none, errors.New(why)
	}
	if svc.Kind != "database" {
		// Files and objects are checked on the Studio's side, in the
		// drill's scratch directory: nothing of the cluster is used.
		return scratchArchive(ctx, loc, file, scratch)
	}
	n, err := p.backupNames(ctx, env)
	if err != nil {
		return none, err
	}
	pod, err := p.primary(ctx, n, svc.Name)
	if err != nil {
		return none, err
	}
	db := scratchDatabase(scratch)
	drop := func(ctx context.Context) error {
		_, err := p.psql(ctx, n.namespace, pod, "postgres", appAdmin, strings.NewReader(`DROP DATABASE IF EXISTS "`+db+`" WITH (FORCE);`+"\n"))
		return err
	}
	// A drill done again after a restart starts from a clean place, and
	// the scratch databases of drills that never finished (their Studio
	// killed, then the run cancelled) go: one drill of an environment
	// runs at a time, and a Cluster is one environment's.
	left, err := p.psql(ctx, n.namespace, pod, "postgres", appAdmin, strings.NewReader(`SELECT datname FROM pg_database WHERE datname LIKE 'skali\_drill\_%';`+"\n"), "-A", "-t")
	if err != nil {
		return none, fmt.Errorf("the scratch databases could not be listed: %w", err)
	}
	for _, name := range strings.Fields(string(left)) {
		if !scratchName.MatchString(name) {
			continue // not one of the Studio's
		}
		if _, err := p.psql(ctx, n.namespace, pod, "postgres", appAdmin, strings.NewReader(`DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE);`+"\n")); err != nil {
			return none, fmt.Errorf("an earlier drill's scratch database could not be dropped: %w", err)
		}
	}
	if _, err := p.psql(ctx, n.namespace, pod, "postgres", appAdmin, strings.NewReader(`CREATE DATABASE "`+db+`" OWNER `+pgDatabase+";\n")); err != nil {
		return none, fmt.Errorf("the scratch database could not be made: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := drop(dctx); err != nil {
			p.Opts.Logger.Warn("a drill's scratch database could not be dropped", "namespace", n.namespace, "database", db, "err", err)
		}
	}()
	var scan dumpScanner
	script := verifiedScript(ctx, loc, file, &scan)
	defer script.Close()
	tags, err := p.replay(ctx, n.namespace, pod, db, script)
	if err != nil {
		return none, fileError(err, "the dump did not restore")
	}
	if scan.bad != nil {
		return none, &platform.SnapshotFileError{File: file.File, Problem: scan.bad.Error()}
	}
	if scan.trailer == nil {
		return none, &platform.SnapshotFileError{File: file.File, Problem: "has no row counts: it is not a whole snapshot of the Studio's"}
	}
	want := *scan.trailer
	if err := p.holds(ctx, n.namespace, pod, db, tags, want); err != nil {
		return none, err
	}
	return platform.ScratchCheck{Objects: 1, Bytes: file.Size, Counted: true, Tables: len(want.Tables), Rows: want.rows()}, nil
}

// checkCounts counts the rows of each table of want in database db and
// compares them with the snapshot's.
func (p *Platform) checkCounts(ctx context.Context, ns, pod, db string, want dumpCounts) error {
	if len(want.Tables) == 0 {
		return nil
	}
	var q strings.Builder
	for _, t := range want.Tables {
		fmt.Fprintf(&q, "SELECT count(*) FROM %s;\n", t.Table)
	}
	out, err := p.psql(ctx, ns, pod, db, appAdmin, strings.NewReader(q.String()), "-A", "-t")
	if err != nil {
		return fmt.Errorf("the restored tables could not be counted: %w", err)
	}
	got := strings.Fields(string(out))
	if len(got) != len(want.Tables) {
		return fmt.Errorf("the restored tables could not be counted: %d answers for %d tables", len(got), len(want.Tables))
	}
	for i, t := range want.Tables {
		rows, err := strconv.ParseInt(got[i], 10, 64)
		if err != nil || rows != t.Rows {
			return fmt.Errorf("table %s has %s rows restored, %d when the snapshot was taken", t.Table, got[i], t.Rows)
		}
	}
	return nil
}

// envDeployments finds the environment's namespace and lists its
// Deployments.
func (p *Platform) envDeployments(ctx context.Context, env platform.Env) (envNames, []Object, error) {
	n, err := p.backupNames(ctx, env)
	if err != nil {
		return n, nil, err
	}
	deps, err := p.Client.List(ctx, KindDeployment, n.namespace, LabelManagedBy+"="+managedBy)
	if err != nil {
		return n, nil, p.apiError("listing the Deployments of "+n.namespace, err)
	}
	return n, deps, nil
}

// StopEnvironment implements platform.BackupPlatform: every application's
// Deployment is scaled to zero (its count kept in an annotation for
// StartEnvironment; an autoscaler leaves a Deployment at zero alone) and
// the wait ends when its pods are gone.
func (p *Platform) StopEnvironment(ctx context.Context, env platform.Env) error {
	n, deps, err := p.envDeployments(ctx, env)
	if err != nil {
		return err
	}
	for _, d := range deps {
		name := str(d, "metadata", "name")
		replicas := num(at(d, "spec", "replicas"))
		if _, stopped := annotations(d)[annotationStopped]; stopped || replicas == 0 {
			continue // stopped already (a step done again), or an idle slot
		}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}},"spec":{"replicas":0}}`, annotationStopped, replicas)
		if _, err := p.Client.MergePatch(ctx, KindDeployment, n.namespace, name, "-restore", patch); err != nil {
			return p.apiError("scaling Deployment "+name+" to zero", err)
		}
	}
	return waitUntil(ctx, "the environment did not stop", func(ctx context.Context) (bool, string, error) {
		pods, err := p.Client.List(ctx, KindPod, n.namespace, LabelComponent+"=application")
		if err != nil || len(pods) == 0 {
			return err == nil, "", p.apiError("listing the pods of "+n.namespace, err)
		}
		return false, fmt.Sprintf("%d application pods still running (%s first)", len(pods), str(pods[0], "metadata", "name")), nil
	})
}

// StartEnvironment implements platform.BackupPlatform: the Deployments a
// restore stopped get their replicas back, and the wait ends when each
// has them Ready.
func (p *Platform) StartEnvironment(ctx context.Context, env platform.Env) error {
	n, deps, err := p.envDeployments(ctx, env)
	if err != nil {
		return err
	}
	want := map[string]int{}
	for _, d := range deps {
		name := str(d, "metadata", "name")
		v, stopped := annotations(d)[annotationStopped]
		if !stopped {
			continue
		}
		replicas, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil || replicas < 1 {
			replicas = 1
		}
		want[name] = replicas
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}},"spec":{"replicas":%d}}`, annotationStopped, replicas)
		if _, err := p.Client.MergePatch(ctx, KindDeployment, n.namespace, name, "-restore", patch); err != nil {
			return p.apiError("starting Deployment "+name+" again", err)
		}
	}
	return waitUntil(ctx, "the environment did not start again", func(ctx context.Context) (bool, string, error) {
		_, deps, err := p.envDeployments(ctx, env)
		if err != nil {
			return false, "", err
		}
		for _, d := range deps {
			name := str(d, "metadata", "name")
			r, ok := want[name]
			if !ok {
				continue
			}
			ready := num(at(d, "status", "readyReplicas"))
			if ready < r || num(at(d, "status", "observedGeneration")) < num(at(d, "metadata", "generation")) {
				return false, fmt.Sprintf("Deployment %s has %d of %d pods Ready", name, ready, r), nil
			}
		}
		return true, "", nil
	})
}

// waitUntil asks done every half second until it says so, for at most
// startTimeout; when that runs out the error is what, with done's last
// words on what it waits for.
func waitUntil(ctx context.Context, what string, done func(context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		ok, waiting, err := done(ctx)
		if ok || err != nil {
			return err
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%s within %s: %s", what, startTimeout, waiting)
			}
			return err
		}
	}
}

// sleepCtx sleeps d, or less when ctx ends (its error then).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// annotations are an object's annotations.
func annotations(o Object) Object {
	a, _ := at(o, "metadata", "annotations").(Object)
	return a
}

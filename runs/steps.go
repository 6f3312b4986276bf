package runs

import (
	"context"
	"slices"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
)

// stepKind is what the runner knows of one kind of checkpoint: a row of
// the table steps, which the runner reads instead of switching on kinds.
type stepKind struct {
	// work does the step. It returns the step's outcome, or an error when
	// it could not be done now (the step resumes in a later execution).
	work func(r *Runner, ctx context.Context, rc *runContext, st *stepCall) (stepResult, error)
	// phase groups the kinds whose steps of different services may run
	// at the same time ("" : alone): none waits for another of its phase,
	// and none of them waits (a wait ends the execution).
	phase string
	// waits: the step only waits for others (the cluster, cert-manager, a
	// rollout, DNS) rather than does work in flight. On a shutdown it stops
	// waiting at once and its run is given back (a wait in the database,
	// not a goroutine's); a step that does not wait (a release command, a
	// build, the steps of a backup or restore) finishes, or reaches its
	// timeout, first.
	waits bool
	// resume, when set, decides a step found running when an execution
	// starts (the process that ran it stopped): what it came to (res), or
	// again when it never started and running it now is safe. A step
	// without resume is simply done again: its work is idempotent.
	resume func(r *Runner, ctx context.Context, rc *runContext, cp store.Checkpoint) (res stepResult, again bool, err error)
}

// steps is every checkpoint kind's row. The kinds' files: values
// (steps_values.go, release.go), services and applications
// (steps_apps.go), hostnames (tls.go, probe.go), activation
// (steps_activate.go, prune.go), approvals (protection.go), backups and
// restores (backup_steps.go), deleting an environment (delete.go).
var steps map[string]stepKind

func init() {
	backup := stepKind{work: func(r *Runner, ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
		return r.backupStep(ctx, rc, st.cp, st.d, st.fail)
	}}
	steps = map[string]stepKind{
		KindApproval: {work: func(r *Runner, ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
			return r.stepApproval(ctx, rc, st.cp, st.d)
		}},
		KindCheckValues:       {work: (*Runner).stepCheckValues, waits: true},
		KindProvisionDatabase: {work: (*Runner).stepProvisionDatabase, phase: "provision", waits: true},
		KindProvisionBucket:   {work: (*Runner).stepProvisionBucket, phase: "provision", waits: true},
		KindBuild:             {work: (*Runner).stepBuild, phase: "build"},
		KindImport:            {work: (*Runner).stepBuild, phase: "build"},
		KindRelease:           {work: (*Runner).stepRelease, phase: "release", resume: (*Runner).releaseOutcome},
		KindIssueTLS: {work: func(r *Runner, ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
			return r.issueTLS(ctx, rc, st.cp, st.d)
		}, waits: true},
		KindRollout:  {work: (*Runner).stepRollout, phase: "rollout", waits: true},
		KindActivate: {work: (*Runner).stepActivate},
		KindProbe: {work: func(r *Runner, ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
			return st.ok(), nil // the hostname steps probed already
		}, waits: true},
		KindSnapshot:     backup,
		KindRetention:    backup,
		KindVerify:       backup,
		KindStop:         backup,
		KindRestore:      backup,
		KindStart:        backup,
		KindDrillRestore: {work: (*Runner).stepDrillRestore},
		KindDrillCleanup: {work: (*Runner).stepDrillCleanup},
		KindDeletePlatform: {work: func(r *Runner, ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
			return r.deletePlatform(ctx, rc, st.ok, st.fail)
		}, waits: true},
	}
}

// yielding reports whether a step of kind only waits (stepKind.waits).
func yielding(kind string) bool { return steps[kind].waits }

// stepCall is one checkpoint's step as its work sees it.
type stepCall struct {
	cp store.Checkpoint
	// d is the checkpoint's detail, which the outcome carries (the work
	// may add to it: the image built, the values checked).
	d CheckpointDetail
	// def is the run's definition (empty, never nil, for runs without one).
	def *compiler.Definition
}

// ok is the step's success, with its detail.
func (st *stepCall) ok() stepResult {
	return stepResult{status: store.CheckpointSucceeded, detail: st.d}
}

// fail is the step's failure, which fails the run with reason.
func (st *stepCall) fail(reason string) stepResult {
	st.d.Error = reason
	return stepResult{status: store.CheckpointFailed, detail: st.d, reason: reason}
}

// step does one checkpoint's work, by its kind's row in steps.
func (r *Runner) step(ctx context.Context, rc *runContext, cp store.Checkpoint) (stepResult, error) {
	st := &stepCall{cp: cp, d: DecodeCheckpointDetail(cp.Detail), def: rc.def}
	if st.def == nil {
		st.def = &compiler.Definition{}
	}
	k, known := steps[cp.Kind]
	if !known {
		return st.fail("unknown checkpoint kind " + cp.Kind), nil
	}
	return k.work(r, ctx, rc, st)
}

// platformFailure turns a platform error into a failed step, unless the
// run's own context ended (a shutdown): then the step is left to resume.
func (r *Runner) platformFailure(ctx context.Context, err error, fail func(string) stepResult) (stepResult, error) {
	if ctx.Err() != nil {
		return stepResult{}, ctx.Err()
	}
	res := fail(err.Error())
	res.platformError = true
	return res, nil
}

// quotingPlatform is fail for a step whose reasons quote what the
// platform said (a backup's pg_dump or psql, a helper pod): the reason is
// masked like the step's output before it is recorded.
func quotingPlatform(fail func(string) stepResult) func(string) stepResult {
	return func(reason string) stepResult {
		res := fail(reason)
		res.platformError = true
		return res
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

package runs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// applyRelease fixes the deploy's release (the current version of each
// value the revision uses, unless the run is a rollback, whose release was
// fixed when it was created), checks that every version of it is still
// kept and opens, and hands the values to the platform.
func (r *Runner) applyRelease(ctx context.Context, rc *runContext, contract compiler.ValueContract,
	ok func() stepResult, fail func(string) stepResult) (stepResult, error) {
	names := append(append([]string(nil), contract.Required...), sortedKeys(contract.Optional)...)
	release, err := r.DB.PinDeployValues(ctx, rc.run.ID, rc.env.ID, names)
	if err != nil {
		return stepResult{}, err
	}
	if rc.run.ReleaseOf != nil {
		var missing []string
		for _, n := range contract.Required {
			found := false
			for _, nv := range release {
				found = found || nv.Name == n
			}
			if !found {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fail(fmt.Sprintf("The release of run %d has no value for %s.", *rc.run.ReleaseOf, strings.Join(missing, ", "))), nil
		}
	}
	if r.Vault == nil {
		return ok(), nil
	}
	values, err := r.Vault.ResolveReleaseValues(ctx, rc.env.ID, rc.run.ID)
	switch {
	case errors.Is(err, store.ErrValueVersionGone):
		return fail("A value version of this release is no longer kept (past the installation's retention): " + versionOf(err) + "."), nil
	case errors.Is(err, store.ErrValueDoesNotDecrypt):
		return fail("A value version of this release does not decrypt with the configured keys."), nil
	case err != nil:
		return stepResult{}, err
	}
	// Before any step acts for a hostname: the environment holds every
	// hostname these values make.
	if why, err := r.claimReleaseHostnames(ctx, rc); err != nil || why != "" {
		clear(values)
		if err != nil {
			return stepResult{}, err
		}
		return fail(why), nil
	}
	if ep, is := platform.As[platform.EnvironmentPreparer](r.Platform); is && rc.def != nil {
		var active *compiler.Definition
		if rc.env.ActiveRevisionID != nil {
			rev, err := r.DB.RevisionByID(ctx, *rc.env.ActiveRevisionID)
			if err != nil {
				clear(values)
				return stepResult{}, err
			}
			active = rev.Definition
		}
		if err := ep.PrepareEnvironment(ctx, platformEnv(rc.env), rc.def, active); err != nil {
			clear(values)
			return r.platformFailure(ctx, err, func(s string) stepResult { return fail("Preparing the environment on the platform failed: " + s) })
		}
	}
	if vr, is := platform.As[platform.ValueReceiver](r.Platform); is {
		if err := vr.SetValues(ctx, platformEnv(rc.env), values); err != nil {
			clear(values)
			return r.platformFailure(ctx, err, func(s string) stepResult { return fail("Handing the values to the platform failed: " + s) })
		}
	}
	clear(values)
	return ok(), nil
}

// versionOf is the "NAME vN" an ErrValueVersionGone names (names and
// versions only: never a value).
func versionOf(err error) string {
	s := strings.TrimPrefix(err.Error(), "store: ")
	if i := strings.Index(s, ": "); i > 0 {
		return s[:i]
	}
	return "a value"
}

// RollbackPlan is what a rollback to an earlier deploy brings back.
type RollbackPlan struct {
	// RunID is the earlier deploy; Revision its revision number.
	RunID    int64
	Revision int
	// Recorded is false for a deploy from before releases were recorded:
	// its value versions are unknown, so the rollback uses the current ones.
	Recorded bool
	// Values are the release's values next to what runs now, by name.
	Values []ReleaseValue
	// Gone are versions of the release no longer kept: the rollback is refused.
	Gone []store.NameVersion
	// ComeBackEmpty are the databases and buckets of the release that the
	// active revision no longer has: they are created again, empty.
	ComeBackEmpty []string
	// ReleaseCommandsSince are the release commands deploys ran since the
	// release ("web in revision 3"): their effects stay.
	ReleaseCommandsSince []string
	values               []store.NameVersion
}

// ReleaseValue is one value of a rollback, by name and version only.
type ReleaseValue struct {
	Name string
	// Now is the version that runs now (0: none); Then the release's (0:
	// the release had none, so the value is not handed over).
	Now, Then int
	Kept      bool
}

// runningValues is the version of each value the active deploy runs with:
// its release when recorded, else the current versions.
func (s *Service) runningValues(ctx context.Context, env *store.Environment) (map[string]int, bool, error) {
	out := map[string]int{}
	active, err := s.DB.ActiveRelease(ctx, env.ID)
	if err != nil {
		return nil, false, err
	}
	if active == nil {
		return out, false, nil
	}
	if active.Recorded {
		for _, nv := range active.Values {
			out[nv.Name] = nv.Version
		}
		return out, true, nil
	}
	stored, err := s.DB.StoredValues(ctx, env.ID)
	if err != nil {
		return nil, false, err
	}
	for _, v := range stored {
		out[v.Name] = v.Version
	}
	return out, false, nil
}

// valueChangesSinceActive lists the values the deploy of dp would change
// compared with the active deploy's release (names the two revisions use).
func (s *Service) valueChangesSinceActive(ctx context.Context, env *store.Environment, dp *DeployPlan) ([]store.ValueChange, error) {
	active, err := s.DB.ActiveRelease(ctx, env.ID)
	if err != nil || active == nil || !active.Recorded {
		return nil, err
	}
	contracts := []compiler.ValueContract{dp.To.Definition.ValueContract()}
	if dp.From != nil {
		contracts = append(contracts, dp.From.Definition.ValueContract())
	}
	used := store.UnionContract(contracts...)
	return s.DB.ValueChangesSince(ctx, env.ID, active.Values, store.ContractNames(used))
}

// ValueChangesSinceActive lists the values set, changed or deleted since
// the environment's active deploy, among the names its active revision or
// the project's latest revision use (nil when nothing is recorded).
func (s *Service) ValueChangesSinceActive(ctx context.Context, env *store.Environment) ([]store.ValueChange, error) {
	latest, err := s.DB.LatestRevision(ctx, env.ProjectID)
	if err != nil {
		return nil, err
	}
	dp := &DeployPlan{To: latest}
	if env.ActiveRevisionID != nil {
		if dp.From, err = s.DB.RevisionByID(ctx, *env.ActiveRevisionID); err != nil {
			return nil, err
		}
	}
	return s.valueChangesSinceActive(ctx, env, dp)
}

// PlanRollback plans a deploy of the release of run runID, an earlier
// successful deploy of env: its revision and, when recorded, its value
// versions. A version no longer kept refuses the rollback (a deploy of
// that revision with the current values remains possible).
func (s *Service) PlanRollback(ctx context.Context, env *store.Environment, runID int64) (*DeployPlan, error) {
	rel, err := s.DB.ReleaseOf(ctx, env.ID, runID)
	if err != nil {
		return nil, err
	}
	dp, err := s.PlanDeploy(ctx, env, rel.Revision)
	if err != nil {
		return nil, err
	}
	dp.Rollback, dp.Redeploy, dp.ValueChanges = true, false, nil
	rp := &RollbackPlan{RunID: rel.RunID, Revision: rel.Revision, Recorded: rel.Recorded, values: rel.Values}
	dp.Release = rp
	running, _, err := s.runningValues(ctx, env)
	if err != nil {
		return nil, err
	}
	if rel.Recorded {
		kept, err := s.DB.KeptVersions(ctx, env.ID, rel.Values)
		if err != nil {
			return nil, err
		}
		then := map[string]int{}
		for _, nv := range rel.Values {
			then[nv.Name] = nv.Version
			rp.Values = append(rp.Values, ReleaseValue{Name: nv.Name, Now: running[nv.Name], Then: nv.Version, Kept: kept[nv]})
			if !kept[nv] {
				rp.Gone = append(rp.Gone, nv)
			}
		}
		contract := dp.To.Definition.ValueContract()
		for n, v := range running {
			if _, ok := then[n]; !ok && store.References(contract, n) {
				rp.Values = append(rp.Values, ReleaseValue{Name: n, Now: v})
			}
		}
		slices.SortFunc(rp.Values, func(a, b ReleaseValue) int { return strings.Compare(a.Name, b.Name) })
		// What is missing is judged against the release, not the current values.
		dp.MissingValues = nil
		for _, n := range contract.Required {
			if _, ok := then[n]; !ok {
				dp.MissingValues = append(dp.MissingValues, n)
			}
		}
		// A rollback publishes the release's versions: published once,
		// they are not asked again.
		if _, err := s.applyPublications(ctx, env, dp, then); err != nil {
			return nil, err
		}
		if len(rp.Gone) > 0 {
			var gone []string
			for _, nv := range rp.Gone {
				gone = append(gone, fmt.Sprintf("%s v%d", nv.Name, nv.Version))
			}
			dp.Refused = append(dp.Refused, fmt.Sprintf(
				"The release's %s %s no longer kept (earlier versions are kept for the installation's retention). Plan a deploy of revision %d with the current values instead.",
				strings.Join(gone, ", "), map[bool]string{true: "is", false: "are"}[len(gone) == 1], rel.Revision))
		}
	}
	if dp.From != nil {
		for _, name := range slices.Sorted(maps.Keys(dp.To.Definition.Databases)) {
			if dp.From.Definition.Databases[name] == nil {
				rp.ComeBackEmpty = append(rp.ComeBackEmpty, "database "+name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(dp.To.Definition.Buckets)) {
			if dp.From.Definition.Buckets[name] == nil {
				rp.ComeBackEmpty = append(rp.ComeBackEmpty, "bucket "+name)
			}
		}
	}
	if rp.ReleaseCommandsSince, err = s.releaseCommandsSince(ctx, env, rel.RunID); err != nil {
		return nil, err
	}
	if err := s.planRollouts(ctx, env, dp); err != nil {
		return nil, err
	}
	return dp, nil
}

// releaseCommandsSince names the release commands that successful deploys
// after run runID ran, as "app in revision N".
func (s *Service) releaseCommandsSince(ctx context.Context, env *store.Environment, runID int64) ([]string, error) {
	recent, err := s.DB.Runs(ctx, env.ID, 200)
	if err != nil {
		return nil, err
	}
	revisions, err := s.DB.Revisions(ctx, env.ProjectID)
	if err != nil {
		return nil, err
	}
	defs := map[int]*compiler.Definition{}
	for _, r := range revisions {
		defs[r.Number] = r.Definition
	}
	var out []string
	for i := len(recent) - 1; i >= 0; i-- {
		r := recent[i]
		if r.ID <= runID || r.Kind != store.RunDeploy || (r.Status != store.RunSucceeded && r.Status != store.RunSucceededWithWarnings) {
			continue
		}
		def := defs[r.Revision]
		if def == nil {
			continue
		}
		for _, app := range slices.Sorted(maps.Keys(def.Applications)) {
			if def.Applications[app].Deployment.ReleaseCommand != nil {
				if s := fmt.Sprintf("%s in revision %d", app, r.Revision); !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	return out, nil
}

// ValueRetentionArgs is the periodic River job that prunes the earlier
// value versions past the installation's retention.
type ValueRetentionArgs struct{}

// Kind implements river.JobArgs.
func (ValueRetentionArgs) Kind() string { return "studio_value_retention" }

type valueRetentionWorker struct {
	river.WorkerDefaults[ValueRetentionArgs]
	service   *Service
	retention time.Duration
}

func (w *valueRetentionWorker) Work(ctx context.Context, job *river.Job[ValueRetentionArgs]) error {
	n, err := w.service.DB.PruneValueVersions(ctx, w.retention, w.service.Now())
	if err == nil && n > 0 {
		w.service.Logger.Info("pruned earlier value versions past the retention", "count", n)
	}
	return err
}

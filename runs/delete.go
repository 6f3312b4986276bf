package runs

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// KindDeletePlatform is the one step of a delete run: the platform deletes
// what the environment runs (on Kubernetes its namespace) and waits until
// it is gone.
const KindDeletePlatform = "delete-platform"

// DefaultDeleteTimeout bounds the wait for the platform to delete what an
// environment runs (Runner.DeleteTimeout when set); a delete run that
// outlasts it fails, and deleting again retries.
const DefaultDeleteTimeout = 10 * time.Minute

// DeletesAsRun reports whether deleting an environment is a run: the
// platform holds what environments run apart from the Studio's database
// (Kubernetes). On the local platform the delete is immediate.
func (s *Service) DeletesAsRun() bool {
	_, ok := platform.As[platform.EnvironmentDeleter](s.Platform)
	return ok
}

// StartDelete marks the environment deleting and creates its delete run:
// the platform deletes what it runs, and the environment's rows (values,
// members, runs, claims) go only once that is done. Refused while another
// run of it is unfinished; after a failed delete run it retries.
func (s *Service) StartDelete(ctx context.Context, a store.Actor, env *store.Environment) (*store.Run, error) {
	return s.DB.StartEnvironmentDeletion(ctx, a, env, store.NewRun{
		EnvironmentID: env.ID,
		Checkpoints:   []store.NewCheckpoint{{Kind: KindDeletePlatform, Name: "Delete what " + env.Name + " runs on the platform"}},
		AuditDetail:   map[string]any{"confirmation": true},
		Enqueue:       s.enqueue(),
	})
}

// deletePlatform is the delete run's step.
func (r *Runner) deletePlatform(ctx context.Context, rc *runContext, ok func() stepResult, fail func(string) stepResult) (stepResult, error) {
	ed, is := platform.As[platform.EnvironmentDeleter](r.Platform)
	if !is {
		return ok(), nil
	}
	timeout := cmp.Or(r.DeleteTimeout, DefaultDeleteTimeout)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := ed.DeleteEnvironment(dctx, platformEnv(rc.env), rc.output())
	if err != nil && dctx.Err() != nil && ctx.Err() == nil {
		return fail(fmt.Sprintf("What %s runs on the platform was not gone within %s; the environment stays, marked deleting. Delete it again to retry.", rc.env.Name, humanize.ManifestDuration(timeout))), nil
	}
	if err != nil {
		return r.platformFailure(ctx, err, func(s string) stepResult {
			return fail("Deleting what " + rc.env.Name + " runs on the platform failed: " + s + ". The environment stays, marked deleting; delete it again to retry.")
		})
	}
	return ok(), nil
}

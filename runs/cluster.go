package runs

import (
	"context"
	"fmt"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// clusterWait bounds reading the cluster's identity for a plan or a page:
// a cluster that does not answer counts as the same one.
const clusterWait = 5 * time.Second

// OtherCluster says, in one sentence, that the environment's active
// revision runs on another cluster (or platform) than the one this Studio
// deploys to, as recorded when its deploy activated; "" when it is the
// same one, or when that is not known (nothing recorded, the cluster not
// answering). The plan then deploys everything (PlanDeploy).
func (s *Service) OtherCluster(ctx context.Context, env *store.Environment) (string, error) {
	if env.ActiveRevisionID == nil {
		return "", nil
	}
	recorded, err := s.DB.EnvironmentPlatform(ctx, env.ID)
	if err != nil || recorded == "" {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	now, err := platform.ClusterOf(cctx, s.Platform)
	if err != nil || now == recorded {
		return "", nil
	}
	return fmt.Sprintf("The active revision of %s runs on %s, not on %s, where this Studio deploys: nothing of it runs here, so the next deploy deploys everything.",
		env.Name, platform.IdentityWords(recorded), platform.IdentityWords(now)), nil
}

// recordCluster records the cluster a deploy activated the environment's
// revision on; a cluster that does not say who it is keeps the record as
// it was (logged).
func (r *Runner) recordCluster(ctx context.Context, envID int64) {
	id, err := platform.ClusterOf(ctx, r.Platform)
	if err == nil {
		err = r.DB.SetEnvironmentPlatform(ctx, envID, id)
	}
	if err != nil {
		r.Logger.Warn("recording the cluster of an environment", "environment", envID, "err", err)
	}
}

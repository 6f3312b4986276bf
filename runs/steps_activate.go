package runs

import "context"

// stepActivate makes the run's revision the active one: what removed services left is pruned, the hostnames and domains it serves recorded.
func (r *Runner) stepActivate(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	if err := r.prune(ctx, rc); err != nil {
		return r.platformFailure(ctx, err, func(s string) stepResult {
			return st.fail("Deleting what the removed services left failed: " + s)
		})
	}
	names, why, err := r.releaseHostnames(ctx, rc, nil)
	if err != nil {
		return stepResult{}, err
	}
	if why != "" {
		return st.fail(why), nil
	}
	r.recordCluster(ctx, rc.env.ID)
	res := st.ok()
	res.activate = rc.run.RevisionID
	res.activeDomains = []string{}
	res.activeHostnames = names
	cps, err := r.DB.Checkpoints(ctx, rc.run.ID)
	if err != nil {
		return stepResult{}, err
	}
	for _, c := range cps {
		if t := DecodeCheckpointDetail(c.Detail).TLS; t != nil && t.Domain != "" {
			res.activeDomains = append(res.activeDomains, t.Domain)
		}
	}
	res.detail.Revision = rc.run.Revision
	return res, nil
}

package runs

import (
	"context"
	"sync"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/mask"
	"github.com/skali-dev/studio/runs/platform"
)

// healthCoalesce is how long the health monitor gathers a platform's
// reports of one environment before reading its health: a rollout's burst
// of pod changes costs one read and one write.
const healthCoalesce = 50 * time.Millisecond

// WatchHealth keeps every deployed environment's stored health in step
// with what its platform reports (store.SyncHealth), until ctx ends: at
// start for each, then whenever the platform says an environment's health
// may have changed, and when a run of this process activates a revision
// (what is compared changed: a rollout's last report may come before it). Every process runs it; the store makes several
// processes announce one change once. A platform without the capability
// (platform.HealthReader) reports nothing, and nothing is stored.
func (s *Service) WatchHealth(ctx context.Context) error {
	hr, ok := platform.As[platform.HealthReader](s.Platform)
	if !ok {
		return nil
	}
	var mu sync.Mutex
	pending := map[platform.Env]bool{}
	wake := make(chan struct{}, 1)
	changed := func(e platform.Env) {
		mu.Lock()
		pending[platform.Env{Project: e.Project, Name: e.Name}] = true
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	envs, err := s.DB.DeployedEnvironments(ctx)
	if err != nil {
		return err
	}
	for _, e := range envs {
		changed(platform.Env{Project: e.Project, Name: e.Name})
	}
	watchErr := make(chan error, 1)
	go func() { watchErr <- hr.WatchHealth(ctx, changed) }()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-s.activated:
				changed(e)
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-watchErr:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-wake:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(healthCoalesce):
		}
		mu.Lock()
		batch := pending
		pending = map[platform.Env]bool{}
		mu.Unlock()
		for e := range batch {
			if err := s.SyncHealth(ctx, hr, e.Project, e.Name); err != nil && ctx.Err() == nil {
				s.Logger.Warn("health: not synced", "project", e.Project, "environment", e.Name, "err", err)
			}
		}
	}
}

// SyncHealth reads the environment's health from its platform and stores
// it (masked: a reason may quote an application's output), and with it,
// when the platform can tell (platform.DriftReader), what differs from
// what the Studio applied (store.SyncDrift). Drift is only stored and
// shown: nothing here or in the reconciler applies anything back.
func (s *Service) SyncHealth(ctx context.Context, hr platform.HealthReader, project, name string) error {
	env, err := s.DB.EnvironmentByName(ctx, project, name)
	if err != nil {
		return err
	}
	var def *compiler.Definition
	if env.ActiveRevisionID != nil {
		rev, err := s.DB.RevisionByID(ctx, *env.ActiveRevisionID)
		if err != nil {
			return err
		}
		def = rev.Definition
	}
	h, err := hr.Health(ctx, platform.Env{ID: env.ID, Project: env.Project, Name: env.Name}, def)
	if err != nil {
		return err
	}
	m, err := s.valueMasker(ctx, env.ID)
	if err != nil {
		return err
	}
	for i := range h.Apps {
		h.Apps[i].Reason = m.Mask(mask.Clean(h.Apps[i].Reason))
		h.Apps[i].Problem = nil
	}
	if _, err = s.DB.SyncHealth(ctx, env.ID, h); err != nil {
		return err
	}
	dr, ok := platform.As[platform.DriftReader](s.Platform)
	if !ok {
		return nil
	}
	drift, err := dr.Drift(ctx, platform.Env{ID: env.ID, Project: env.Project, Name: env.Name}, def)
	if err != nil {
		return err
	}
	for i := range drift {
		drift[i].Now = m.Mask(mask.Clean(drift[i].Now))
		drift[i].Applied = m.Mask(mask.Clean(drift[i].Applied))
	}
	_, err = s.DB.SyncDrift(ctx, env.ID, drift)
	return err
}

// valueMasker hides the environment's current values.
func (s *Service) valueMasker(ctx context.Context, envID int64) (*mask.Masker, error) {
	if s.Vault == nil {
		return mask.New(nil), nil
	}
	current, err := s.Vault.ResolveValuesForDeploy(ctx, envID)
	if err != nil {
		return nil, err
	}
	values := make([]string, 0, len(current))
	for _, v := range current {
		values = append(values, v)
	}
	clear(current)
	m := mask.New(values)
	clear(values)
	return m, nil
}

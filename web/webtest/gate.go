package webtest

import (
	"context"
	"sync"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/local"
)

// Gate holds a kind of step (Deploys.HoldRelease, HoldRollout, HoldStop)
// before the platform starts it, until the test opens it: a test sees the
// run page before the step runs without racing a delay. Once open, it
// holds nothing.
type Gate struct {
	once sync.Once
	open chan struct{}
}

// NewGate returns a closed gate.
func NewGate() *Gate { return &Gate{open: make(chan struct{})} }

// Open lets the held step (and every later one) go.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

func (g *Gate) wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// heldPlatform is the local platform whose release commands, rollouts
// and environment stops wait for their gates.
type heldPlatform struct {
	*local.Platform
	d *Deploys
}

func (h heldPlatform) Release(ctx context.Context, env platform.Env, app string, a *compiler.Application, cmd *compiler.ReleaseCommand, key platform.ReleaseKey, out platform.Output) error {
	if err := h.d.HoldRelease.wait(ctx); err != nil {
		return err
	}
	return h.Platform.Release(ctx, env, app, a, cmd, key, out)
}

func (h heldPlatform) Rollout(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) error {
	if err := h.d.HoldRollout.wait(ctx); err != nil {
		return err
	}
	return h.Platform.Rollout(ctx, env, app, a, out)
}

func (h heldPlatform) StopEnvironment(ctx context.Context, env platform.Env) error {
	if err := h.d.HoldStop.wait(ctx); err != nil {
		return err
	}
	return h.Platform.StopEnvironment(ctx, env)
}

// deletingPlatform is a platform that holds what environments run
// (Deploys.DeleteEnvironment).
type deletingPlatform struct {
	platform.Platform
	platform.ValueReceiver
	delete func(env platform.Env) error
}

// Unwrap implements platform.Wrapper: the wrapped platform's other
// capabilities (backups) stay.
func (d deletingPlatform) Unwrap() platform.Platform { return d.Platform }

func (d deletingPlatform) DeleteEnvironment(ctx context.Context, env platform.Env, out platform.Output) error {
	out.Line("deleting what " + env.Name + " runs")
	return d.delete(env)
}

package kubernetes

// Rollouts: a Deployment applied and followed by a watch until its
// status says the new version is available, and what its status means.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// Rollout implements platform.Platform: the Service, the Deployment (and
// its HorizontalPodAutoscaler and volume claims), then a watch of the
// Deployment until it is available or its progress deadline is exceeded.
// The values Secret is the one the run's check-values step wrote
// (SetValues): Rollout reads it back for its version (the pods restart
// when it changed) and the values domains name.
func (p *Platform) Rollout(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) error {
	n, err := p.names(ctx, env)
	if err != nil {
		return err
	}
	valuesVersion, values, err := p.readValues(ctx, n, 0, a)
	if err != nil {
		return err
	}
	defer clear(values)
	for vol, v := range a.Volumes {
		if _, err := p.apply(ctx, KindPVC, volumeClaim(n, app, vol, v, p), out); err != nil {
			return p.apiError("applying volume "+vol+" of "+app, err)
		}
	}
	if svc := service(n, app, a, p); svc != nil && !blueGreen(a) {
		if _, err := p.apply(ctx, KindService, svc, out); err != nil {
			return p.apiError("applying the Service of "+app, err)
		}
	}
	if p.Opts.Gateway != "" {
		for _, rn := range sortedRoutes(a) {
			for _, o := range httpRoutes(n, app, rn, a, values, p) {
				if _, err := p.apply(ctx, KindHTTPRoute, o, out); err != nil {
					return p.apiError("applying route "+rn+" of "+app, err)
				}
			}
		}
	}
	if blueGreen(a) {
		return p.rolloutBlueGreen(ctx, n, app, a, valuesVersion, out)
	}
	dep, err := p.apply(ctx, KindDeployment, withValuesVersion(deployment(n, app, a, p), valuesVersion), out)
	if err != nil {
		return p.apiError("applying the Deployment of "+app, err)
	}
	if dep, err = p.dropAddedEnv(ctx, app, dep, out); err != nil {
		return p.apiError("removing what was added to the Deployment of "+app+" outside the Studio", err)
	}
	if dep, err = p.scaleIntoRange(ctx, app, a, dep, out); err != nil {
		return p.apiError("scaling "+app+" back into its range", err)
	}
	if a.Scaling.TargetCPUUtilization > 0 {
		if _, err := p.apply(ctx, KindHPA, autoscaler(n, app, a, p), out); err != nil {
			return p.apiError("applying the autoscaler of "+app, err)
		}
	}
	if err := p.waitRollout(ctx, n, app, dep, 0, out); err != nil {
		return err
	}
	// The slots of an earlier blue-green rollout go once this one serves.
	return p.dropDeployments(ctx, n, app, dnsName(app), out)
}

// waitRollout follows a Deployment until its new revision is available
// with at least minReady replicas, and its pods meanwhile (podWatch): one
// of the new revision that Kubernetes reports failing ends the wait at
// once with what it said.
func (p *Platform) waitRollout(ctx context.Context, n envNames, app string, dep Object, minReady int, out platform.Output) error {
	name := str(dep, "metadata", "name")
	pw := newPodWatch(p, n.namespace, app, dep)
	last := ""
	check := func(o Object) (bool, error) {
		pw.observed(o)
		s := rolloutState(o)
		if st, _ := o["status"].(Object); s.done && num(st["availableReplicas"]) < minReady {
			s.done = false
		}
		if s.text != last {
			last = s.text
			p.Opts.Logger.Info("rollout", "namespace", n.namespace, "application", app, "progress", s.text)
			out.Line(s.text)
		}
		if s.failed != "" {
			if why := pw.atDeadline(ctx); why != "" {
				return true, fmt.Errorf("%s; %s", s.failed, why)
			}
			return true, errors.New(s.failed)
		}
		return s.done, nil
	}
	if done, err := check(dep); done {
		return err
	}
	// The pods are subscribed to first, then listed (podWatch.run): none
	// between the two is missed.
	pods, unsubscribe := p.watches.subscribeBuffered(KindPod, n.namespace, "", 64)
	defer unsubscribe()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan platform.PodProblem, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if prob, ok := pw.run(wctx, pods); ok {
			failed <- prob
			cancel()
		}
	}()
	err := p.watches.follow(wctx, KindDeployment, n.namespace, name, check)
	if err == nil && !probed(dep) {
		// Without a readiness probe a container counts as ready once it
		// started: one that crashes at once would pass. The pods are
		// watched until each new container has run for rolloutSettle.
		err = pw.settle(wctx)
	}
	cancel()
	wg.Wait()
	if err == nil {
		return nil // available: a pod that failed meanwhile was replaced
	}
	select {
	case prob := <-failed:
		if ctx.Err() == nil {
			return pw.report(ctx, prob, out)
		}
	default:
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The step's rollout timeout came before the cluster's own
		// verdict (its progress deadline is a few seconds shorter, but a
		// busy controller may be later): what the pods show says why all
		// the same.
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer acancel()
		if why := pw.atDeadline(actx); why != "" {
			out.Line(why)
			return &platform.StalledError{Why: why, Err: err}
		}
	}
	return err
}

type rollout struct {
	done   bool
	failed string
	text   string
}

// rolloutState reads a Deployment as `kubectl rollout status` does.
func rolloutState(o Object) rollout {
	md, _ := o["metadata"].(Object)
	spec, _ := o["spec"].(Object)
	st, _ := o["status"].(Object)
	gen := num(md["generation"])
	want := 1
	if r, ok := spec["replicas"]; ok {
		want = num(r)
	}
	updated, replicas, available, ready := num(st["updatedReplicas"]), num(st["replicas"]), num(st["availableReplicas"]), num(st["readyReplicas"])
	// Ready replicas of the new revision: while old ones remain (they
	// were ready, or they would be gone), they are counted out.
	readyNew := ready
	if replicas > updated {
		readyNew = max(ready-(replicas-updated), 0)
	}
	text := fmt.Sprintf("%d of %d replicas ready", min(readyNew, want), want)
	if num(st["observedGeneration"]) < gen {
		return rollout{text: "waiting for the cluster to see the new revision"}
	}
	for _, c := range conditions(o) {
		if c.typ == "Progressing" && c.reason == "ProgressDeadlineExceeded" {
			return rollout{failed: fmt.Sprintf("%s (%s)", strings.TrimSuffix(c.message, "."), text), text: text}
		}
	}
	done := updated >= want && replicas <= updated && available >= updated
	return rollout{done: done, text: text}
}

package kubernetes

// Release commands: a Job per run checkpoint, followed by a watch, and what
// its status and pod say when it fails.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// releaseJobName is the Job of one run's release checkpoint: a resumed run
// finds it by this name instead of starting it again.
func releaseJobName(app string, key platform.ReleaseKey) string {
	return dnsName(app, "release", fmt.Sprint(key.RunID), fmt.Sprint(key.Position))
}

// Release implements platform.Platform: a Job (backoffLimit 0,
// activeDeadlineSeconds from the timeout), followed by a watch until it
// completes or fails.
func (p *Platform) Release(ctx context.Context, env platform.Env, app string, a *compiler.Application, cmd *compiler.ReleaseCommand, key platform.ReleaseKey, out platform.Output) error {
	n, err := p.names(ctx, env)
	if err != nil {
		return err
	}
	if a == nil {
		return fmt.Errorf("the application %s is not in the revision this run deploys", app)
	}
	// The Job's pod reads the values Secret: one lost since the deploy
	// wrote it is written again first.
	if _, err := p.Client.Get(ctx, KindSecret, n.namespace, ValuesSecret); IsNotFound(err) {
		if err := p.restoreValues(ctx, n, key.RunID); err != nil {
			return err
		}
	} else if err != nil {
		return p.apiError("reading the Secret "+n.namespace+"/"+ValuesSecret, err)
	}
	name := releaseJobName(app, key)
	job, err := p.Client.Apply(ctx, KindJob, releaseJob(n, app, name, a, cmd, p, key.RunID, key.Position))
	if err != nil {
		return p.apiError("starting the release Job "+name, err)
	}
	out.Line(fmt.Sprintf("Job %s/%s started", n.namespace, name))
	_, err = p.waitJob(ctx, n.namespace, name, job)
	if ctx.Err() == nil {
		p.jobOutput(ctx, n.namespace, name, out)
	}
	return err
}

// waitJob follows a Job until it completes (nil) or fails (its reason).
func (p *Platform) waitJob(ctx context.Context, namespace, name string, job Object) (platform.ReleaseOutcome, error) {
	var out platform.ReleaseOutcome
	check := func(o Object) (bool, error) {
		for _, c := range conditions(o) {
			if c.status != "True" {
				continue
			}
			switch c.typ {
			case "Complete":
				out = platform.ReleaseOutcome{State: platform.ReleaseSucceeded}
				return true, nil
			case "Failed":
				msg := p.jobFailure(ctx, namespace, name, c)
				out = platform.ReleaseOutcome{State: platform.ReleaseFailed, Error: msg}
				return true, errors.New(msg)
			}
		}
		return false, nil
	}
	if done, err := check(job); done {
		return out, err
	}
	err := p.watches.follow(ctx, KindJob, namespace, name, check)
	return out, err
}

// jobFailure says why a release Job failed: its pod's exit when known,
// then the Job's condition.
func (p *Platform) jobFailure(ctx context.Context, namespace, name string, c condition) string {
	msg := strings.TrimSuffix(c.message, ".")
	if msg == "" {
		msg = c.reason
	}
	pods, err := p.Client.List(ctx, KindPod, namespace, "job-name="+name)
	if err == nil {
		for _, pod := range pods {
			st, _ := pod["status"].(Object)
			cs, _ := st["containerStatuses"].([]any)
			for _, c := range cs {
				cm, _ := c.(Object)
				state, _ := cm["state"].(Object)
				if t, ok := state["terminated"].(Object); ok {
					code, _ := t["exitCode"].(float64)
					return fmt.Sprintf("the command exited with code %d (Job %s/%s: %s)", int(code), namespace, name, msg)
				}
			}
		}
	}
	return fmt.Sprintf("Job %s/%s failed: %s", namespace, name, msg)
}

// ReleaseOutcome implements platform.Platform: the run's Job, found by name, is
// followed to its end; none means it never started.
func (p *Platform) ReleaseOutcome(ctx context.Context, env platform.Env, key platform.ReleaseKey) (platform.ReleaseOutcome, error) {
	n, err := p.names(ctx, env)
	if err != nil {
		return platform.ReleaseOutcome{}, err
	}
	sel := fmt.Sprintf("%s=%s,skali.dev/run=%d,skali.dev/position=%d", LabelManagedBy, managedBy, key.RunID, key.Position)
	items, err := p.Client.List(ctx, KindJob, n.namespace, sel)
	if err != nil {
		return platform.ReleaseOutcome{}, err
	}
	if len(items) == 0 {
		return platform.ReleaseOutcome{State: platform.ReleaseNotStarted}, nil
	}
	job := items[0]
	md, _ := job["metadata"].(Object)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	out, err := p.waitJob(ctx, ns, name, job)
	if out.State == platform.ReleaseFailed {
		return out, nil
	}
	if err != nil {
		return platform.ReleaseOutcome{}, err
	}
	return out, nil
}

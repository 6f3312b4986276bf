package kubernetes

import (
	"context"
	"fmt"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// DeleteEnvironment implements platform.EnvironmentDeleter: the
// environment's namespace (its values Secret, pods, Services, routes,
// certificates and volume claims with it) is deleted, by uid so that only
// the namespace found is, and followed until the API server no longer has
// it. A namespace that is not the environment's is not touched: there is
// nothing of it to delete.
func (p *Platform) DeleteEnvironment(ctx context.Context, env platform.Env, out platform.Output) error {
	n := envNames{project: env.Project, env: env.Name, id: env.ID, namespace: NamespaceName(env.Project, env.Name)}
	ns, err := p.Client.Get(ctx, KindNamespace, "", n.namespace)
	switch {
	case IsNotFound(err):
		out.Line(fmt.Sprintf("namespace %s: none (nothing to delete on the cluster)", n.namespace))
		return nil
	case err != nil:
		return p.apiError("reading namespace "+n.namespace, err)
	}
	if err := checkOwner(ns, n); err != nil {
		out.Line(fmt.Sprintf("namespace %s is not this environment's: left as it is", n.namespace))
		return nil
	}
	uid := str(ns, "metadata", "uid")
	if str(ns, "metadata", "deletionTimestamp") == "" {
		if err := p.Client.DeleteUID(ctx, KindNamespace, "", n.namespace, uid); err != nil && !IsNotFound(err) {
			return p.apiError("deleting namespace "+n.namespace, err)
		}
		out.Line(fmt.Sprintf("deleting namespace %s", n.namespace))
	} else {
		out.Line(fmt.Sprintf("namespace %s is being deleted", n.namespace))
	}
	for wait := 100 * time.Millisecond; ; wait = min(wait*2, 2*time.Second) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		ns, err := p.Client.Get(ctx, KindNamespace, "", n.namespace)
		switch {
		case IsNotFound(err):
			out.Line(fmt.Sprintf("namespace %s is gone", n.namespace))
			return nil
		case err != nil:
			return p.apiError("reading namespace "+n.namespace, err)
		case str(ns, "metadata", "uid") != uid:
			// Made again since (by a deploy of another Studio process):
			// the environment's rows go, and that namespace is refused as
			// an earlier environment's by any later one of the name.
			out.Line(fmt.Sprintf("namespace %s is gone (another of the name exists now)", n.namespace))
			return nil
		}
	}
}

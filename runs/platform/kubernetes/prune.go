package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/skali-dev/studio/runs/platform"
)

// pruned are the kinds each kind of service leaves, deleted when it is
// removed. A removed application's volume claims are kept: the plan does
// not ask for a typed confirmation before removing an application, and
// their data goes only with one.
var pruned = map[string][]Kind{
	"application": {KindHTTPRoute, KindHPA, KindDeployment, KindService, KindJob},
	"database":    {KindPGCluster},
	"bucket":      {KindBucketClaim},
}

// Prune implements platform.Platform: the objects of each removed service,
// found by their labels, are deleted by label, kind by kind.
func (p *Platform) Prune(ctx context.Context, env platform.Env, removed []platform.RemovedService, out platform.Output) error {
	n, err := p.names(ctx, env)
	if err != nil {
		return err
	}
	byKind := map[string][]string{}
	for _, r := range removed {
		if _, ok := pruned[r.Kind]; ok {
			byKind[r.Kind] = append(byKind[r.Kind], labelValue(r.Name))
		}
	}
	for _, svcKind := range []string{"application", "database", "bucket"} {
		names := byKind[svcKind]
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		sel := fmt.Sprintf("%s=%s,%s=%s,%s in (%s)", LabelManagedBy, managedBy, LabelEnvironment, labelValue(n.env),
			LabelService, strings.Join(names, ","))
		for _, k := range pruned[svcKind] {
			items, err := p.Client.List(ctx, k, n.namespace, sel)
			if err != nil {
				return p.apiError("listing the "+k.Kind+"s of removed services", err)
			}
			if len(items) == 0 {
				continue
			}
			if err := p.Client.DeleteCollection(ctx, k, n.namespace, sel); err != nil {
				return p.apiError("deleting the "+k.Kind+"s of removed services", err)
			}
			for _, it := range items {
				md, _ := it["metadata"].(Object)
				l := labelsOf(it)
				out.Line(fmt.Sprintf("Deleted %s %s/%s of removed %s %s", k.Kind, n.namespace, md["name"], svcKind, l[LabelService]))
			}
		}
	}
	return nil
}

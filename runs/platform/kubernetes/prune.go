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
// found by their labels, are deleted by label, kind by kind; a removed
// route's HTTPRoutes by name; the cert-manager Certificate of a domain no
// route serves any more by its label (its TLS Secret, which cert-manager
// made and the Studio never reads, stays to cert-manager's own cleanup).
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
	if err := p.pruneRoutes(ctx, n, removed, out); err != nil {
		return err
	}
	if err := p.pruneCertificates(ctx, n, removed, out); err != nil {
		return err
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

// pruneRoutes deletes the HTTPRoutes (the domain's and its aliases') of
// routes an application no longer declares.
func (p *Platform) pruneRoutes(ctx context.Context, n envNames, removed []platform.RemovedService, out platform.Output) error {
	for _, r := range removed {
		app, rn, ok := strings.Cut(r.Name, "/")
		if r.Kind != "route" || !ok {
			continue
		}
		for _, name := range []string{dnsName(app, rn), dnsName(app, rn, "aliases")} {
			err := p.Client.Delete(ctx, KindHTTPRoute, n.namespace, name)
			switch {
			case IsNotFound(err):
			case err != nil:
				return p.apiError("deleting the HTTPRoute "+name+" of removed route "+r.Name, err)
			default:
				out.Line(fmt.Sprintf("Deleted HTTPRoute %s/%s of removed route %s", n.namespace, name, r.Name))
			}
		}
	}
	return nil
}

// pruneCertificates deletes the Certificates of domains no route serves
// any more. Without a cluster issuer the driver made none.
func (p *Platform) pruneCertificates(ctx context.Context, n envNames, removed []platform.RemovedService, out platform.Output) error {
	if p.Opts.ClusterIssuer == "" {
		return nil
	}
	var names []string
	for _, r := range removed {
		if r.Kind == "domain" {
			names = append(names, CertificateName(r.Name))
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	sel := fmt.Sprintf("%s=%s,%s=%s,%s in (%s)", LabelManagedBy, managedBy, LabelEnvironment, labelValue(n.env),
		LabelCertificate, strings.Join(slices.Compact(names), ","))
	items, err := p.Client.List(ctx, KindCertificate, n.namespace, sel)
	if err != nil {
		return p.apiError("listing the Certificates of removed domains", err)
	}
	if len(items) == 0 {
		return nil
	}
	if err := p.Client.DeleteCollection(ctx, KindCertificate, n.namespace, sel); err != nil {
		return p.apiError("deleting the Certificates of removed domains", err)
	}
	for _, it := range items {
		domains := fmt.Sprint(list(it, "spec", "dnsNames")...)
		out.Line(fmt.Sprintf("Deleted Certificate %s/%s of %s, which no route serves any more", n.namespace, str(it, "metadata", "name"), domains))
	}
	return nil
}

package kubernetes

import (
	"context"
	"errors"
	"sync"

	"github.com/skali-dev/studio/runs/platform"
)

var _ platform.ClusterIdentifier = (*Platform)(nil)

// clusterID caches the cluster's identity: it does not change while the
// Studio runs against one API server.
type clusterID struct {
	mu sync.Mutex
	id string
}

// ClusterIdentity implements platform.ClusterIdentifier: the uid of the
// cluster's kube-system namespace, which every cluster has and no other
// cluster shares (read once).
func (p *Platform) ClusterIdentity(ctx context.Context) (string, error) {
	p.identity.mu.Lock()
	defer p.identity.mu.Unlock()
	if p.identity.id != "" {
		return p.identity.id, nil
	}
	ns, err := p.Client.Get(ctx, KindNamespace, "", "kube-system")
	if err != nil {
		return "", p.apiError("reading the kube-system namespace (the cluster's identity)", err)
	}
	uid := str(ns, "metadata", "uid")
	if uid == "" {
		return "", errors.New("the kube-system namespace has no uid")
	}
	p.identity.id = uid
	return uid, nil
}

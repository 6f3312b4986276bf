package platform

import (
	"context"
	"strings"
)

// ClusterIdentifier is a platform that can tell the cluster it drives
// from another of its kind (on Kubernetes, the kube-system namespace's
// uid).
type ClusterIdentifier interface {
	ClusterIdentity(ctx context.Context) (string, error)
}

// ClusterOf is what an environment records of the cluster its active
// revision runs on: the platform's kind, and the cluster's identity when
// the platform has one ("kubernetes/8d1c…", "local").
func ClusterOf(ctx context.Context, p Platform) (string, error) {
	if ci, ok := As[ClusterIdentifier](p); ok {
		id, err := ci.ClusterIdentity(ctx)
		if err != nil {
			return "", err
		}
		return p.Kind() + "/" + id, nil
	}
	return p.Kind(), nil
}

// IdentityWords says a ClusterOf identity in a few words: "the kubernetes cluster
// 8d1c2a3b", "the local platform".
func IdentityWords(identity string) string {
	kind, id, ok := strings.Cut(identity, "/")
	if !ok {
		return "the " + kind + " platform"
	}
	if len(id) > 8 {
		id = id[:8]
	}
	return "the " + kind + " cluster " + id
}

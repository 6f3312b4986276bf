// Package platforms chooses the platform a Studio's runs work on, by the
// name --platform gives: a new platform is a package beside local and
// kubernetes under runs/platform, and one case in Open.
package platforms

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/local"
	"github.com/skali-dev/studio/store"
)

// Names are the platforms Open knows, in the order the help lists them.
var Names = []string{"local", "kubernetes"}

// Config is what a platform may take. Local is always opened: its edge
// identity answers the Studio's probes and its development CA issues
// certificates where no other issuer is set, whatever runs the work.
type Config struct {
	Name   string // "local" when empty
	DB     *store.DB
	Vault  *store.Vault
	Logger *slog.Logger
	Local  local.Options
	// Kubeconfig is the cluster's (in-cluster credentials when empty).
	Kubeconfig string
	// Kubernetes configures the Kubernetes platform; Open sets its
	// Prober, DevIssuer, ReleaseValues and Logger.
	Kubernetes kubernetes.Options
}

// Opened is a chosen platform with what the rest of the Studio uses of it.
type Opened struct {
	Platform platform.Platform
	// Identity is the installation's edge identity (the probe's secret).
	Identity platform.Identity
	// Local is the local platform (the edge and the development CA).
	Local *local.Platform
	// Close ends what the platform runs in the background (watches).
	Close func()
}

// Open returns the platform c names.
func Open(ctx context.Context, c Config) (Opened, error) {
	lp, id, err := local.New(ctx, c.DB, c.Vault, c.Local)
	if err != nil {
		return Opened{}, err
	}
	o := Opened{Platform: lp, Identity: id, Local: lp, Close: func() {}}
	switch c.Name {
	case "", "local":
	case "kubernetes":
		client, err := kubernetes.LoadClient(c.Kubeconfig)
		if err != nil {
			return Opened{}, fmt.Errorf("--platform kubernetes: %w", err)
		}
		ko := c.Kubernetes
		ko.Prober, ko.DevIssuer, ko.Logger = lp.Prober, lp.DevIssuer(), c.Logger
		ko.ReleaseValues = ReleaseValues(c.DB, c.Vault)
		kp := kubernetes.New(client, ko)
		o.Platform, o.Close = kp, kp.Close
	default:
		return Opened{}, fmt.Errorf("--platform %q: the platforms are %v", c.Name, Names)
	}
	return o, nil
}

// ReleaseValues reads the values of a run's release from the store: what
// a platform that keeps the values itself (a cluster's Secret) writes
// again when it finds them lost. runID 0 is the environment's unfinished
// deploy; fromRun is the run read (0 when there is none).
func ReleaseValues(db *store.DB, vault *store.Vault) func(ctx context.Context, envID, runID int64) (map[string]string, int64, error) {
	return func(ctx context.Context, envID, runID int64) (map[string]string, int64, error) {
		if runID == 0 {
			id, err := db.UnfinishedDeploy(ctx, envID)
			if err != nil || id == 0 {
				return nil, 0, err
			}
			runID = id
		}
		values, err := vault.ResolveReleaseValues(ctx, envID, runID)
		return values, runID, err
	}
}

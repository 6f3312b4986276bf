package runs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
)

// AppRollout is what a deploy does with one application of the revision
// it deploys: whether it is built or imported and rolled out, and why, the
// image it runs and the release command that runs first.
type AppRollout struct {
	App string
	// Rolls says the deploy builds or imports the application, runs its
	// release command and rolls it out; an application that does not roll
	// keeps running as it is. Reason says why, in a few words.
	Rolls  bool
	Reason string
	// Image is the image reference, or for a build its context (Build).
	Image string
	Build bool
	// ReleaseCommand runs before the rollout when the application rolls.
	ReleaseCommand []string
	Strategy       string
	// Scaling and Resources are the changed replicas and resources fields,
	// "scaling.replicas.min: 2 → 3", empty when unchanged.
	Scaling, Resources []string
}

// Rolling names the applications the deploy rolls out; nil means every one.
func (dp *DeployPlan) Rolling() map[string]bool {
	if dp.Rollouts == nil {
		return nil
	}
	out := map[string]bool{}
	for _, r := range dp.Rollouts {
		if r.Rolls {
			out[r.App] = true
		}
	}
	return out
}

// planRollouts decides which applications the deploy rolls out: all of them
// on a first deploy, on a redeploy that changes no value, and when the
// values the environment runs with are not known (no release recorded);
// otherwise those whose settings changed or that use a value that changed
// (for a rollback: whose version differs from the one running), and those
// changed outside the Studio (dp.Drift), whose drift the deploy undoes.
func (s *Service) planRollouts(ctx context.Context, env *store.Environment, dp *DeployPlan) error {
	def := dp.To.Definition
	changed := map[string][]FieldChange{}
	for _, c := range dp.Changes {
		if c.Kind == "application" {
			changed[c.Name] = c.Fields
		}
	}
	var changedValues []string
	valuesKnown := true
	switch {
	case dp.Release != nil:
		valuesKnown = dp.Release.Recorded
		for _, v := range dp.Release.Values {
			if v.Now != v.Then {
				changedValues = append(changedValues, v.Name)
			}
		}
	case dp.From != nil:
		active, err := s.DB.ActiveRelease(ctx, env.ID)
		if err != nil {
			return err
		}
		valuesKnown = active != nil && active.Recorded
		for _, v := range dp.ValueChanges {
			changedValues = append(changedValues, v.Name)
		}
	}
	uses := map[string][]string{} // application → values it uses
	for name, fields := range compiler.ValueUses(def) {
		for _, f := range fields {
			app, _, _ := strings.Cut(f, ".")
			if !slices.Contains(uses[app], name) {
				uses[app] = append(uses[app], name)
			}
		}
	}
	drifted := map[string]bool{}
	for _, d := range dp.Drift {
		drifted[d.App] = true
	}
	dp.Rollouts = nil
	for _, n := range slices.Sorted(maps.Keys(def.Applications)) {
		a := def.Applications[n]
		r := AppRollout{App: n, Image: a.Image, Strategy: a.Deployment.Rollout.Strategy}
		if a.Image == "" {
			r.Image, r.Build = a.Build.Context, true
		}
		var touched []string
		for _, v := range changedValues {
			if slices.Contains(uses[n], v) {
				touched = append(touched, v)
			}
		}
		slices.Sort(touched)
		fields, isChanged := changed[n]
		for _, f := range fields {
			line := fmt.Sprintf("%s: %s → %s", f.Field, f.Old, f.New)
			switch {
			case strings.HasPrefix(f.Field, "scaling."):
				r.Scaling = append(r.Scaling, line)
			case strings.HasPrefix(f.Field, "resources."):
				r.Resources = append(r.Resources, line)
			}
		}
		_, existed := revisionApps(dp.From)[n]
		switch {
		case dp.FirstDeploy:
			r.Rolls, r.Reason = true, "first deploy"
		case !existed:
			r.Rolls, r.Reason = true, "new in revision "+fmt.Sprint(dp.To.Number)
		case isChanged:
			r.Rolls, r.Reason = true, "its settings change: "+fieldSummary(fields)
		case len(touched) > 0:
			r.Rolls, r.Reason = true, "it uses "+strings.Join(touched, ", ")+", which "+map[bool]string{true: "changes", false: "change"}[len(touched) == 1]
		case !valuesKnown:
			r.Rolls, r.Reason = true, "the values it ran with were not recorded"
		case drifted[n]:
			r.Rolls, r.Reason = true, "it was changed outside the Studio: the deploy applies what the Studio deploys again"
		case dp.Redeploy && len(dp.ValueChanges) == 0 && dp.Release == nil:
			r.Rolls, r.Reason = true, "redeploy: every application rolls again"
		default:
			r.Reason = "keeps running as it is: neither its settings nor its values change"
		}
		if r.Rolls && a.Deployment.ReleaseCommand != nil {
			r.ReleaseCommand = a.Deployment.ReleaseCommand.Command
		}
		dp.Rollouts = append(dp.Rollouts, r)
	}
	return nil
}

// revisionApps is the applications of revision r (none for nil).
func revisionApps(r *store.Revision) map[string]*compiler.Application {
	if r == nil || r.Definition == nil {
		return nil
	}
	return r.Definition.Applications
}

// fieldSummary names up to three changed fields, and how many more.
func fieldSummary(fields []FieldChange) string {
	var names []string
	for i, f := range fields {
		if i == 3 {
			names = append(names, fmt.Sprintf("%d more", len(fields)-3))
			break
		}
		names = append(names, f.Field)
	}
	return strings.Join(names, ", ")
}

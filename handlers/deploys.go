package handlers

import (
	"errors"
	"github.com/skali-dev/studio/humanize"
	"net/http"
	"strconv"
	"strings"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Deploys shows deploy plans and starts deploys.
type Deploys struct {
	*Base
	Runs *runs.Service
}

// NewDeploys returns the deploy handlers; svc nil means deploys are off.
func NewDeploys(b *Base, svc *runs.Service) *Deploys { return &Deploys{Base: b, Runs: svc} }

func (h *Deploys) service() (*runs.Service, error) {
	if h.Runs == nil {
		return nil, apperr.Errorf(apperr.Conflict, "Deploys are not available: this Studio has no value-encryption key configured.")
	}
	return h.Runs, nil
}

// parseRevision reads the optional revision number (0: latest), within
// the range of the column that stores it (integer), so that no number
// reaches a query it cannot be compared in.
func parseRevision(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 {
		return 0, apperr.Errorf(apperr.Invalid, "revision must be a revision number from 1 to 2147483647, such as 3.")
	}
	return int(n), nil
}

// parseRelease reads the optional release (the run id of an earlier
// successful deploy to roll back to; 0: none).
func parseRelease(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, apperr.Errorf(apperr.Invalid, "release must be the run number of an earlier successful deploy, such as 12.")
	}
	return n, nil
}

// ShowDeployPlanPage renders the plan of deploying ?revision=N (default
// latest) against the environment's active revision. Any role may read it;
// resolved hostnames are shown to deployers and admins only.
func (h *Deploys) ShowDeployPlanPage(w http.ResponseWriter, r *http.Request) error {
	rev, err := parseRevision(r.URL.Query().Get("revision"))
	if err != nil {
		return err
	}
	release, err := parseRelease(r.URL.Query().Get("release"))
	if err != nil {
		return err
	}
	env, role, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	m, err := h.planPage(r, svc, env, role, rev, release)
	if err != nil {
		return err
	}
	// "Restore what the Studio deployed" on the environment page asks
	// for the redeploy ticked; the deploy is still the deployer's to start.
	m.RedeployChecked = r.URL.Query().Get("redeploy") == "1"
	return Render(w, r, http.StatusOK, views.DeployPlan(m))
}

func (h *Deploys) planPage(r *http.Request, svc *runs.Service, env *store.Environment, role store.Role, rev int, release int64) (views.DeployPlanPage, error) {
	ctx := r.Context()
	var dp *runs.DeployPlan
	var err error
	if release != 0 {
		dp, err = svc.PlanRollback(ctx, env, release)
	} else {
		dp, err = svc.PlanDeploy(ctx, env, rev)
	}
	if err != nil {
		return views.DeployPlanPage{}, err
	}
	// A hostname held elsewhere: resolved for those who may see resolved
	// hostnames, its holder named to installation admins only.
	u := CurrentUser(ctx)
	dp.ForReader(role.Includes(store.RoleDeployer), u != nil && u.IsAdmin)
	m := views.DeployPlanPage{
		Chrome:  h.Chrome(r, "Deploy · "+env.Project+" / "+env.Name, "projects"),
		Project: env.Project, Env: env.Name,
		Revision: dp.To.Number, RevisionHash: dp.To.Hash, Latest: dp.Latest,
		FirstDeploy: dp.FirstDeploy, Rollback: dp.Rollback, Redeploy: dp.Redeploy,
		Missing: dp.MissingValues, Orphaned: dp.OrphanedValues, OrphanedCount: dp.OrphanedCount, Destructive: dp.Destructive, Refused: dp.Refused, OtherCluster: dp.OtherCluster,
		ShowHostnames: role.Includes(store.RoleDeployer),
		CanDeploy:     role.Includes(store.RoleDeployer),
		CanStart:      dp.CanStart(),
	}
	if dp.From != nil {
		m.FromRevision = dp.From.Number
	}
	m.ValueChanges = views.NewValueChangeViews(dp.ValueChanges)
	m.HandEditsError = dp.HandEditsError
	for _, h := range dp.HandEdits {
		v := views.HandEditView{Object: h.Kind + " " + h.Name, Manager: h.Manager, Via: h.Subresource, Fields: h.Fields, Removed: h.Removed}
		if !h.Since.IsZero() {
			v.Since = humanize.Time(h.Since)
		}
		m.HandEdits = append(m.HandEdits, v)
	}
	m.Drift = views.NewDriftItemViews(dp.Drift)
	for i := range m.Drift {
		_, kept := dp.To.Definition.Applications[m.Drift[i].App]
		m.Drift[i].Removed = !kept
	}
	if rp := dp.Release; rp != nil {
		rv := &views.RollbackView{RunID: rp.RunID, Revision: rp.Revision, Recorded: rp.Recorded,
			ComeBackEmpty: rp.ComeBackEmpty, ReleaseCommandsSince: rp.ReleaseCommandsSince}
		for _, v := range rp.Values {
			rv.Values = append(rv.Values, views.ReleaseValueView{Name: v.Name, Now: v.Now, Then: v.Then, Kept: v.Kept})
		}
		m.Release = rv
	}
	for n := dp.Latest; n >= 1; n-- {
		m.Revisions = append(m.Revisions, n)
	}
	for _, c := range dp.Changes {
		cv := views.PlanChangeView{Kind: c.Kind, Name: c.Name, Action: c.Action}
		for _, f := range c.Fields {
			cv.Fields = append(cv.Fields, views.PlanFieldView{Field: f.Field, Old: f.Old, New: f.New})
		}
		m.Changes = append(m.Changes, cv)
	}
	// A hostname built from a value the project also uses outside
	// hostnames is never resolved here (runs.DeployPlan.Resolved withholds
	// it): only an admin may publish it, by typing the environment's name.
	flagged := map[string]string{}
	for _, pv := range dp.PublicValues {
		v := views.PublicValueView{Name: pv.Name}
		for _, hx := range pv.Hostnames {
			v.Hostnames = append(v.Hostnames, hx.Expression)
			if flagged[hx.Expression] == "" {
				flagged[hx.Expression] = "not shown · uses " + pv.Name
			}
		}
		for _, u := range pv.Elsewhere {
			v.Elsewhere = append(v.Elsewhere, views.ValueUseView{Field: u.Field, Revision: u.Revision})
		}
		m.PublicValues = append(m.PublicValues, v)
	}
	for _, ro := range dp.Rollouts {
		m.Rollouts = append(m.Rollouts, views.RolloutView{App: ro.App, Reason: ro.Reason, Image: ro.Image, Strategy: ro.Strategy,
			Rolls: ro.Rolls, Build: ro.Build, ReleaseCommand: strings.Join(ro.ReleaseCommand, " "), Scaling: ro.Scaling, Resources: ro.Resources})
	}
	for _, pv := range dp.Published {
		m.Published = append(m.Published, views.PublishedValueView{Name: pv.Name, Version: pv.Version, Since: pv.Since, By: pv.By})
	}
	m.CanPublish = role.Includes(store.RoleAdmin)
	if dp.PublishesValues() && !m.CanPublish {
		m.CanStart = false
	}
	for _, hx := range dp.Hostnames {
		hv := views.PlanHostView{Route: hx.Route, Expression: hx.Expression, TLS: hx.TLS, Note: flagged[hx.Expression]}
		if hx.Alias {
			// The hostname column shows the alias; the route says whose it is.
			hv.Route = strings.TrimSuffix(hx.Route, " "+hx.Expression)
		}
		// Viewers never get resolved hostnames into their page's model: the
		// plan's revision is not active here (store.Vault.ResolvePlannedHostnames).
		if rh, ok := dp.Resolved[hx.Expression]; ok && m.ShowHostnames {
			hv.Resolved = rh.Name
			if len(rh.Missing) > 0 && hv.Note == "" {
				hv.Note = "needs " + strings.Join(rh.Missing, ", ")
			}
		}
		m.Hostnames = append(m.Hostnames, hv)
	}
	return m, nil
}

// StartDeploy starts a deploy (deployers and admins): fields revision,
// release (a rollback to that earlier deploy's revision and value
// versions), confirm, redeploy, and confirm_public_value (the environment's name typed
// by an admin to publish a value in a hostname). A refused deploy
// re-renders the plan with the reason next to the field it concerns.
func (h *Deploys) StartDeploy(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	rev, err := parseRevision(r.PostForm.Get("revision"))
	if err != nil {
		return err
	}
	release, err := parseRelease(r.PostForm.Get("release"))
	if err != nil {
		return err
	}
	env, role, err := h.Environment(r, store.RoleDeployer)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	req := runs.DeployRequest{Revision: rev, Confirm: strings.TrimSpace(r.PostForm.Get("confirm")), Redeploy: r.PostForm.Get("redeploy") == "1",
		ConfirmPublicValue: strings.TrimSpace(r.PostForm.Get("confirm_public_value")), Release: release, Role: role,
		FreezeOverride: strings.TrimSpace(r.PostForm.Get("freeze_override"))}
	run, err := svc.StartDeploy(r.Context(), ActorOf(r), env, req)
	var refusal *runs.DeployRefusal
	if errors.As(err, &refusal) {
		m, perr := h.planPage(r, svc, env, role, rev, release)
		if perr != nil {
			return perr
		}
		m.Error, m.ErrorField, m.Confirm, m.RedeployChecked = refusal.Message, refusal.Field, req.Confirm, req.Redeploy
		m.ConfirmPublicValue = req.ConfirmPublicValue
		return Render(w, r, http.StatusUnprocessableEntity, views.DeployPlan(m))
	}
	if err != nil {
		return err
	}
	return SeeOther(w, r, paths.Run(env.Project, env.Name, run.ID))
}

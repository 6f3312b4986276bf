package handlers

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Environments creates environments (installation admins) and shows an
// environment's overview (any role on it).
type Environments struct {
	*Base
	// Vault resolves route hostnames from the environment's values.
	Vault *store.Vault
	// Runs, when set, knows the installation's public addresses and the
	// reconcile interval (what a DNS-pending domain's owner is told).
	Runs *runs.Service
}

// NewEnvironments returns the environment handlers.
func NewEnvironments(b *Base, v *store.Vault) *Environments { return &Environments{Base: b, Vault: v} }

// CreateEnvironment adds the environment named by the form field name.
func (h *Environments) CreateEnvironment(w http.ResponseWriter, r *http.Request) error {
	p, role, err := h.project(r)
	if err != nil {
		return err
	}
	if err := RequireAdmin(r); err != nil {
		return err
	}
	name := strings.TrimSpace(r.FormValue("name"))
	env, err := h.DB.CreateEnvironment(r.Context(), ActorOf(r), p.ID, name)
	if code := apperr.CodeOf(err); code == apperr.Invalid || code == apperr.Conflict {
		m, perr := NewProjects(h.Base).projectPage(r, p, role)
		if perr != nil {
			return perr
		}
		m.NewEnvironmentName, m.NewEnvironmentError = name, apperr.Message(err)
		status := http.StatusUnprocessableEntity
		if code == apperr.Conflict {
			status = http.StatusConflict
		}
		return Render(w, r, status, views.Project(m))
	}
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", fmt.Sprintf("Created environment %s. Set its values next.", env.Name))
	return SeeOther(w, r, paths.Environment(p.Name, env.Name))
}

// shownRevision is the revision an environment's pages describe: the one
// it runs, or the latest before its first deploy; and the value contract
// its values are judged by: the union of that revision's and the latest's,
// so a value either needs is never called orphaned.
type shownRevision struct {
	Revision *store.Revision
	Deployed bool
	Def      *compiler.Definition
	Contract compiler.ValueContract
}

func (b *Base) shownRevision(ctx context.Context, env *store.Environment) (shownRevision, error) {
	latest, err := b.DB.LatestRevision(ctx, env.ProjectID)
	if err != nil {
		return shownRevision{}, err
	}
	s := shownRevision{Revision: latest, Def: latest.Definition}
	contracts := []compiler.ValueContract{latest.Definition.ValueContract()}
	if env.ActiveRevisionID != nil {
		// Most often the active revision is the latest: read (and
		// decode) it once.
		active := latest
		if *env.ActiveRevisionID != latest.ID {
			if active, err = b.DB.RevisionByID(ctx, *env.ActiveRevisionID); err != nil {
				return shownRevision{}, err
			}
		}
		s.Revision, s.Deployed, s.Def = active, true, active.Definition
		contracts = append(contracts, active.Definition.ValueContract())
	}
	s.Contract = store.UnionContract(contracts...)
	return s, nil
}

// ShowEnvironmentPage renders the environment's overview: what the revision
// it runs (or the latest) deploys, with hostnames resolved from its values,
// the values summary, runs and backups.
func (h *Environments) ShowEnvironmentPage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, role, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	// The manifest's names with what is stored for them, and a count of
	// the others: the page does not read every stored value.
	referenced := store.ContractNames(shown.Contract)
	stored, err := h.DB.StoredValuesNamed(ctx, env.ID, referenced)
	if err != nil {
		return err
	}
	_, orphaned, err := h.DB.OrphanedValues(ctx, env.ID, referenced, "", 0, 0)
	if err != nil {
		return err
	}
	hosts := map[string]store.ResolvedHost{}
	if h.Vault != nil && shown.Deployed {
		if hosts, err = h.Vault.ResolveActiveHostnames(ctx, env.ID); err != nil {
			// The page still helps without resolved hostnames.
			h.Logger.Error("resolve hostnames", "request_id", RequestID(ctx), "environment", env.ID, "err", err)
			hosts = map[string]store.ResolvedHost{}
		}
	}
	// Before the first deploy succeeds, deployers and admins see the
	// hostnames as the next deploy will serve them (the plan's, which
	// withholds one built from a value awaiting publication); viewers see
	// them once deployed.
	planned := false
	if h.Runs != nil && !shown.Deployed && role.Includes(store.RoleDeployer) {
		if dp, err := h.Runs.PlanDeploy(ctx, env, shown.Revision.Number); err == nil {
			hosts, planned = dp.Resolved, true
		} else {
			h.Logger.Error("plan hostnames", "request_id", RequestID(ctx), "environment", env.ID, "err", err)
		}
	}
	m := views.EnvironmentPage{
		Chrome:          h.Chrome(r, env.Project+" / "+env.Name, "projects"),
		Project:         env.Project,
		Name:            env.Name,
		LastEventSeq:    env.LastEventSeq,
		State:           env.State,
		Role:            string(role),
		Revision:        shown.Revision.Number,
		RevisionHash:    shown.Revision.Hash,
		Deployed:        shown.Deployed,
		CanManageValues: role.Includes(store.RoleAdmin),
		Values:          valuesSummary(store.ValueStates(shown.Contract, stored)),
	}
	m.Values.Orphaned = orphaned
	m.CanDeploy = role.Includes(store.RoleDeployer)
	if env.State == store.EnvironmentDeleting {
		// The danger zone lives on the Settings page; the overview says
		// what became of the deletion, and admins get the way to retry.
		m.Deleting = env.Name + " is being deleted: what it runs on the platform goes first, then its values, members and run history."
		if z, err := h.EnvironmentDangerZone(ctx, env, store.RoleAdmin); err != nil {
			return err
		} else if z != nil {
			m.Deleting = z.Explain
		}
	}
	if windows, err := h.DB.FreezeWindows(ctx, env.ID); err != nil {
		return err
	} else if fz, ok := runs.FrozenAt(windows, h.DB.Now()); ok {
		now := h.DB.Now()
		m.Freeze = views.FreezeForm{Frozen: true, Refuse: fz.Refuse, UntilAt: fz.Until, UntilLabel: runs.FreezeClock(fz.Until, now), Now: now}
	}
	if env.ActiveRevisionID != nil {
		m.ActiveRevisionID = *env.ActiveRevisionID
		if h.Runs != nil {
			if m.OtherCluster, err = h.Runs.OtherCluster(ctx, env); err != nil {
				return err
			}
		}
	}
	if m.Backups, err = BackupStatus(r, h.DB, nil, env); err != nil {
		return err
	}
	certs, err := h.DB.Certificates(ctx, env.ID)
	if err != nil {
		return err
	}
	byDomain := map[string]store.Certificate{}
	for _, c := range certs {
		byDomain[c.Domain] = c
	}
	latestRuns, err := h.DB.Runs(ctx, env.ID, views.LatestRunsShown)
	if err != nil {
		return err
	}
	now := h.DB.Now()
	for i := range latestRuns {
		m.LatestRuns = append(m.LatestRuns, views.NewRunView(env, &latestRuns[i], now, false))
	}
	if conv, err := h.DB.ConvergingRevision(ctx, env.ID); err != nil {
		return err
	} else if conv != nil {
		if rev, err := h.DB.RevisionByID(ctx, *conv); err == nil {
			m.Converging = rev.Number
		}
	}
	if def := shown.Def; def != nil {
		// Names only: the expansion of a revision that is not active here
		// is never computed (see store.Vault.ResolveActiveHostnames).
		set := make(map[string]string, len(stored))
		for _, s := range stored {
			set[s.Name] = ""
		}
		host := func(expr string) views.HostView {
			hv := views.HostView{Expression: expr, Resolved: expr}
			if strings.Contains(expr, "${") {
				rh, ok := hosts[expr]
				if !ok {
					hv.Resolved = ""
					_, hv.Missing = compiler.ExpandValues(expr, set)
					hv.NotDeployed = len(hv.Missing) == 0
					return hv
				}
				hv.Resolved, hv.Missing, hv.NotAHostname = rh.Name, rh.Missing, rh.NotAHostname
			}
			hv.Planned = planned
			if c, ok := byDomain[hv.Resolved]; ok && hv.Resolved != "" {
				hv.State, hv.Cert = views.ServiceStateText(c), c.State
			}
			return hv
		}
		for _, hx := range runs.HostnameExpressions(def) {
			if hx.TLS == "disabled" {
				continue
			}
			hv := host(hx.Expression)
			if hv.State == "" {
				continue
			}
			sv := views.ServiceStateView{Domain: hv.Resolved, Route: hx.Route, State: hv.State, Cert: hv.Cert,
				Pending: hv.State != "issued", Now: now}
			if c, ok := byDomain[hv.Resolved]; ok {
				if dnsPending(c) {
					if sv.DNS, err = dnsPendingView(ctx, h.DB, h.Runs, env, c, now, m.CanDeploy, 0); err != nil {
						return err
					}
				} else if c.State == store.CertFailed && c.NextRetryAt != nil && c.NextRetryAt.After(now) {
					sv.RetryAt = *c.NextRetryAt
				}
			}
			m.Services = append(m.Services, sv)
		}
		// The applications people reach first: those with routes, then the
		// rest, each by name.
		apps := slices.Sorted(maps.Keys(def.Applications))
		slices.SortStableFunc(apps, func(a, b string) int {
			return boolRank(len(def.Applications[a].Routes) == 0) - boolRank(len(def.Applications[b].Routes) == 0)
		})
		for _, name := range apps {
			m.Applications = append(m.Applications, views.NewApplicationView(name, def.Applications[name], host))
		}
		for _, name := range slices.Sorted(maps.Keys(def.Databases)) {
			m.Databases = append(m.Databases, views.NewDatabaseView(name, def.Databases[name]))
		}
		for _, name := range slices.Sorted(maps.Keys(def.Buckets)) {
			m.Buckets = append(m.Buckets, views.NewBucketView(name, def.Buckets[name], host))
		}
	}
	if m.Live, err = h.environmentLive(ctx, env, role, shown); err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.Environment(m))
}

func valuesSummary(states []store.ValueState) views.ValuesSummary {
	var s views.ValuesSummary
	for _, v := range states {
		switch v.State {
		case store.RequiredSet:
			s.Required++
			s.RequiredSet++
		case store.RequiredMissing:
			s.Required++
			s.Missing = append(s.Missing, v.Name)
		case store.OptionalSet:
			s.Optional++
			s.OptionalSet++
		case store.OptionalDefault:
			s.Optional++
		case store.Orphaned:
			s.Orphaned++
		}
	}
	return s
}

// boolRank orders false before true.
func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

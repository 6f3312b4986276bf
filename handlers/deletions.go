package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Deletions deletes environments (their admins and installation admins) and
// projects without environments (installation admins), each after the
// name is typed. A failed confirmation re-renders the form at its own URL,
// which also answers GET, so reloading the page never meets a 405.
type Deletions struct {
	*Base
	// Runs, when its platform holds what environments run (Kubernetes),
	// makes an environment's delete a run; nil deletes at once.
	Runs *runs.Service
}

// NewDeletions returns the deletion handlers.
func NewDeletions(b *Base, svc *runs.Service) *Deletions { return &Deletions{Base: b, Runs: svc} }

// EnvironmentDangerZone is the delete-this-environment card of the
// environment's settings page: nil unless role may delete it; blocked with a sentence
// while a run is in progress.
func (b *Base) EnvironmentDangerZone(ctx context.Context, env *store.Environment, role store.Role) (*views.DangerZone, error) {
	if !role.Includes(store.RoleAdmin) {
		return nil, nil
	}
	busy, err := b.DB.RunInProgress(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	z := environmentZone(env)
	if env.State == store.EnvironmentDeleting {
		// A delete run in progress, or one that failed: deleting again
		// retries it.
		last, err := b.DB.RunsWhere(ctx, env.ID, store.RunFilter{Kind: store.RunDelete}, 1)
		if err != nil {
			return nil, err
		}
		z.Heading = "Deleting " + env.Name
		z.Button = "Delete " + env.Name + " again"
		z.Explain = env.Name + " is being deleted: what it runs on the platform goes first, then its values, members and run history."
		if len(last) > 0 && (last[0].Status == store.RunFailed || last[0].Status == store.RunCancelled) {
			z.Explain = fmt.Sprintf("Deleting %s did not finish (run #%d %s: %s). Nothing more of it was deleted; it stays marked deleting, and no deploy starts. Delete it again to retry.",
				env.Name, last[0].Number, last[0].Status, strings.TrimSuffix(last[0].Reason, "."))
		}
	}
	if busy {
		z.Blocked = "A run of " + env.Name + " is in progress. The environment can be deleted once it has finished."
		if env.State == store.EnvironmentDeleting {
			z.Blocked = env.Name + " is being deleted: its delete run is in progress (see its runs)."
		}
	}
	return &z, nil
}

func environmentZone(env *store.Environment) views.DangerZone {
	return views.DangerZone{
		Heading: "Delete this environment",
		Explain: "Deleting " + env.Name + " destroys its values, members and run history. Its audit records stay. The project and its revisions stay.",
		Action:  paths.EnvironmentDelete(env.Project, env.Name),
		Confirm: env.Name,
		Button:  "Delete " + env.Name,
	}
}

func (h *Deletions) renderEnvironment(w http.ResponseWriter, r *http.Request, status int, env *store.Environment, z views.DangerZone) error {
	return Render(w, r, status, views.Delete(views.DeletePage{
		Chrome: h.Chrome(r, "Delete "+env.Project+" / "+env.Name, "projects"),
		Crumbs: append(views.EnvironmentTrail(env.Project, env.Name),
			views.Crumb{Label: "Settings", Href: paths.EnvironmentSettings(env.Project, env.Name)}).Then("Delete"),
		Zone: z,
		Back: paths.EnvironmentSettings(env.Project, env.Name),
	}))
}

// ShowEnvironmentSettingsPage renders the environment's settings page
// (its admins): links to its members, webhooks and protection, and its
// danger zone.
func (h *Deletions) ShowEnvironmentSettingsPage(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	z, err := h.EnvironmentDangerZone(r.Context(), env, role)
	if err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.Settings(views.SettingsPage{
		Chrome: h.Chrome(r, "Settings of "+env.Project+" / "+env.Name, "projects"),
		Crumbs: views.EnvironmentTrail(env.Project, env.Name).Then("Settings"),
		Title:  env.Name,
		Intro:  "Who may use " + env.Name + ", who hears of its runs, what a deploy waits for, and deleting it.",
		Links: []views.SettingsLink{
			{Label: "Members", Href: paths.Members(env.Project, env.Name), Explain: "Who may view, deploy to and administer " + env.Name + "."},
			{Label: "Webhooks", Href: paths.Webhooks(env.Project, env.Name), Explain: "Endpoints told of its deploys, certificates and backups."},
			{Label: "Protection", Href: paths.Protection(env.Project, env.Name), Explain: "The approvals a deploy of " + env.Name + " waits for."},
		},
		Zone: *z,
	}))
}

// ShowDeleteEnvironmentPage renders the environment's danger zone on its own.
func (h *Deletions) ShowDeleteEnvironmentPage(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	z, err := h.EnvironmentDangerZone(r.Context(), env, role)
	if err != nil {
		return err
	}
	return h.renderEnvironment(w, r, http.StatusOK, env, *z)
}

// DeleteEnvironment deletes the environment when the field confirm holds
// its name, then answers 303 to the project.
func (h *Deletions) DeleteEnvironment(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	if err := ParseForm(r); err != nil {
		return err
	}
	z := environmentZone(env)
	z.Typed = r.PostForm.Get("confirm")
	if strings.TrimSpace(z.Typed) != env.Name {
		z.Error = fmt.Sprintf("Type the environment's name, %s, exactly. Nothing was deleted.", env.Name)
		return h.renderEnvironment(w, r, http.StatusUnprocessableEntity, env, z)
	}
	if h.Runs != nil && h.Runs.DeletesAsRun() {
		// What the environment runs on the platform goes first, in a run;
		// its rows only once that is gone.
		run, err := h.Runs.StartDelete(r.Context(), ActorOf(r), env)
		if apperr.CodeOf(err) == apperr.Conflict {
			z.Blocked = apperr.Message(err)
			return h.renderEnvironment(w, r, http.StatusConflict, env, z)
		}
		if err != nil {
			return err
		}
		h.Flash(r.Context(), "success", fmt.Sprintf("Deleting environment %s of %s (run #%d): what it runs on the platform goes first, then its values, members and run history.", env.Name, env.Project, run.Number))
		return SeeOther(w, r, paths.Project(env.Project))
	}
	err = h.DB.DeleteEnvironment(r.Context(), ActorOf(r), env)
	if apperr.CodeOf(err) == apperr.Conflict {
		z.Blocked = apperr.Message(err)
		return h.renderEnvironment(w, r, http.StatusConflict, env, z)
	}
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", fmt.Sprintf("Deleted environment %s of %s, with its values.", env.Name, env.Project))
	return SeeOther(w, r, paths.Project(env.Project))
}

// ProjectDangerZone is the delete-this-project card: nil unless the user
// is an installation admin; blocked while environments remain.
func ProjectDangerZone(r *http.Request, p *store.Project, environments []string) *views.DangerZone {
	if u := CurrentUser(r.Context()); u == nil || !u.IsAdmin {
		return nil
	}
	z := projectZone(p)
	if n := len(environments); n > 0 {
		z.Blocked = fmt.Sprintf("%s has %d %s (%s). %s; then the project can be deleted.", p.Name, n,
			countWord(n, "environment", "environments"), strings.Join(environments, ", "),
			countWord(n, "Delete it first, from its Settings page", "Delete them first, each from its Settings page"))
	}
	return &z
}

func countWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func projectZone(p *store.Project) views.DangerZone {
	return views.DangerZone{
		Heading: "Delete this project",
		Explain: "Deleting " + p.Name + " removes its revisions. Its audit records stay. A project can be deleted once it has no environments.",
		Action:  paths.ProjectDelete(p.Name),
		Confirm: p.Name,
		Button:  "Delete " + p.Name,
	}
}

func (h *Deletions) renderProject(w http.ResponseWriter, r *http.Request, status int, p *store.Project, z views.DangerZone) error {
	return Render(w, r, status, views.Delete(views.DeletePage{
		Chrome: h.Chrome(r, "Delete "+p.Name, "projects"),
		Crumbs: append(views.ProjectTrail(p.Name),
			views.Crumb{Label: "Settings", Href: paths.ProjectSettings(p.Name)}).Then("Delete"),
		Zone: z,
		Back: paths.ProjectSettings(p.Name),
	}))
}

// projectForDeletion loads the project for an installation admin and the
// names of its environments.
func (h *Deletions) projectForDeletion(r *http.Request) (*store.Project, []string, error) {
	p, _, err := h.project(r)
	if err != nil {
		return nil, nil, err
	}
	if err := RequireAdmin(r); err != nil {
		return nil, nil, err
	}
	envs, err := h.DB.VisibleEnvironments(r.Context(), CurrentUser(r.Context()), p.ID)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(envs))
	for i, e := range envs {
		names[i] = e.Name
	}
	return p, names, nil
}

// ShowProjectSettingsPage renders the project's settings page
// (installation admins): its danger zone.
func (h *Deletions) ShowProjectSettingsPage(w http.ResponseWriter, r *http.Request) error {
	p, envs, err := h.projectForDeletion(r)
	if err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.Settings(views.SettingsPage{
		Chrome: h.Chrome(r, "Settings of "+p.Name, "projects"),
		Crumbs: views.ProjectTrail(p.Name).Then("Settings"),
		Title:  p.Name,
		Intro:  p.Name + " takes its name and what it declares from its manifest; each environment has settings of its own.",
		Zone:   *ProjectDangerZone(r, p, envs),
	}))
}

// ShowDeleteProjectPage renders the project's danger zone on its own.
func (h *Deletions) ShowDeleteProjectPage(w http.ResponseWriter, r *http.Request) error {
	p, envs, err := h.projectForDeletion(r)
	if err != nil {
		return err
	}
	return h.renderProject(w, r, http.StatusOK, p, *ProjectDangerZone(r, p, envs))
}

// DeleteProject deletes a project without environments when the field
// confirm holds its name, then answers 303 to the project list.
func (h *Deletions) DeleteProject(w http.ResponseWriter, r *http.Request) error {
	p, _, err := h.projectForDeletion(r)
	if err != nil {
		return err
	}
	if err := ParseForm(r); err != nil {
		return err
	}
	z := projectZone(p)
	z.Typed = r.PostForm.Get("confirm")
	if strings.TrimSpace(z.Typed) != p.Name {
		z.Error = fmt.Sprintf("Type the project's name, %s, exactly. Nothing was deleted.", p.Name)
		return h.renderProject(w, r, http.StatusUnprocessableEntity, p, z)
	}
	err = h.DB.DeleteProject(r.Context(), ActorOf(r), p)
	if apperr.CodeOf(err) == apperr.Conflict {
		z.Blocked = apperr.Message(err)
		return h.renderProject(w, r, http.StatusConflict, p, z)
	}
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", fmt.Sprintf("Deleted project %s and its revisions.", p.Name))
	return SeeOther(w, r, paths.Home)
}

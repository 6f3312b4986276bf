package handlers

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// MaxManifestBytes caps a pasted or uploaded skali.yaml.
const MaxManifestBytes = 1 << 20

// Projects creates projects from their manifests, shows a project's page and
// adds manifest revisions.
//
// Who may do what: every user with a role on at least one environment of a
// project sees the project page; installation admins create projects and
// environments; installation admins and admins of any environment of the
// project add revisions (a revision changes what every environment of the
// project may deploy next, and an environment admin is trusted with deploys).
type Projects struct {
	*Base
}

// NewProjects returns the project handlers.
func NewProjects(b *Base) *Projects { return &Projects{Base: b} }

// ShowNewProjectPage renders the paste-or-upload form for a new project.
func (h *Projects) ShowNewProjectPage(w http.ResponseWriter, r *http.Request) error {
	if err := RequireAdmin(r); err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.NewProject(views.NewProjectPage{
		Chrome: h.Chrome(r, "New project", "projects"),
		Form:   views.ManifestForm{Action: paths.Projects, Submit: "Create project"},
	}))
}

// CreateProject compiles the posted manifest and stores it as revision 1 of
// a new project named by the manifest.
func (h *Projects) CreateProject(w http.ResponseWriter, r *http.Request) error {
	if err := RequireAdmin(r); err != nil {
		return err
	}
	form := views.ManifestForm{Action: paths.Projects, Submit: "Create project"}
	rerender := func(status int, f views.ManifestForm) error {
		return Render(w, r, status, views.NewProject(views.NewProjectPage{Chrome: h.Chrome(r, "New project", "projects"), Form: f}))
	}
	res, status := compilePostedManifest(r, &form)
	if res == nil {
		return rerender(status, form)
	}
	def := res.Definition
	p, _, err := h.DB.CreateProject(r.Context(), ActorOf(r), store.NewRevision{
		Name: def.Name, Description: def.Description, Source: form.Source,
		Canonical: def.Canonical(), Hash: res.Hash, Summary: compiler.Summarize(nil, def),
	})
	if apperr.CodeOf(err) == apperr.Conflict {
		form.Error = apperr.Message(err)
		return rerender(http.StatusConflict, form)
	}
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", fmt.Sprintf("Created project %s from revision 1%s. Next, create an environment.", p.Name, warningNote(res)))
	return SeeOther(w, r, paths.Project(p.Name))
}

// ShowProjectPage renders a project's environments and revisions.
func (h *Projects) ShowProjectPage(w http.ResponseWriter, r *http.Request) error {
	p, role, err := h.project(r)
	if err != nil {
		return err
	}
	m, err := h.projectPage(r, p, role)
	if err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.Project(m))
}

// ProjectEnvironmentsShown is how many environments a page of a project's
// page lists.
const ProjectEnvironmentsShown = 50

func (h *Projects) projectPage(r *http.Request, p *store.Project, role store.Role) (views.ProjectPage, error) {
	ctx := r.Context()
	u := CurrentUser(ctx)
	// A page of environments: a project may have hundreds.
	page := 1
	if n, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && n > 1 && n < 100_000 {
		page = n
	}
	envs, more, err := h.DB.VisibleEnvironmentsPage(ctx, u, p.ID, (page-1)*ProjectEnvironmentsShown, ProjectEnvironmentsShown)
	if err != nil {
		return views.ProjectPage{}, err
	}
	if page > 1 && len(envs) == 0 {
		return views.ProjectPage{}, apperr.Errorf(apperr.NotFound, "Project %s has fewer environments than page %d would list: its environments start on the first page.", p.Name, page)
	}
	revs, err := h.DB.Revisions(ctx, p.ID)
	if err != nil {
		return views.ProjectPage{}, err
	}
	numbers := map[int64]int{}
	for _, rev := range revs {
		numbers[rev.ID] = rev.Number
	}
	m := views.ProjectPage{
		Chrome:               h.Chrome(r, p.Name, "projects"),
		Name:                 p.Name,
		Description:          p.Description,
		CanAddRevision:       role.Includes(store.RoleDeployer),
		CanCreateEnvironment: u != nil && u.IsAdmin,
	}
	m.EnvPage, m.EnvMore, m.EnvFrom = page, more, (page-1)*ProjectEnvironmentsShown+1
	ids := make([]int64, len(envs))
	for i, e := range envs {
		ids[i] = e.ID
	}
	statuses, err := environmentStatusesOf(ctx, h.Base, ids)
	if err != nil {
		return views.ProjectPage{}, err
	}
	statusOf := map[string]views.EnvironmentStatusView{}
	for _, st := range statuses[p.Name] {
		statusOf[st.Env] = st
	}
	for _, e := range envs {
		row := views.EnvironmentRow{Name: e.Name, State: e.State, CreatedAt: e.CreatedAt, Status: statusOf[e.Name]}
		if e.ActiveRevisionID != nil {
			row.Revision = numbers[*e.ActiveRevisionID]
		}
		m.Environments = append(m.Environments, row)
	}
	m.CanSettings = u != nil && u.IsAdmin
	revIDs := make([]int64, len(revs))
	for i, rev := range revs {
		revIDs[i] = rev.ID
	}
	defs, err := h.DB.RevisionDefinitions(ctx, revIDs)
	if err != nil {
		return views.ProjectPage{}, err
	}
	const shownChanges = 3
	for i, rev := range revs {
		row := views.RevisionRow{
			Number: rev.Number, Hash: rev.Hash, CreatedBy: rev.CreatedBy, CreatedAt: rev.CreatedAt,
			Summary: rev.Summary, Latest: i == 0, First: i == len(revs)-1,
		}
		if !row.First {
			for j, c := range compiler.Compare(defs[revs[i+1].ID], defs[rev.ID]) {
				if j < shownChanges {
					row.Changes = append(row.Changes, c.String())
				} else {
					row.More++
				}
			}
		}
		m.Revisions = append(m.Revisions, row)
	}
	return m, nil
}

// ShowNewRevisionPage renders the form that adds a manifest revision.
func (h *Projects) ShowNewRevisionPage(w http.ResponseWriter, r *http.Request) error {
	p, role, err := h.project(r)
	if err != nil {
		return err
	}
	if err := requireRevisionRole(role); err != nil {
		return err
	}
	latest, err := h.DB.LatestRevision(r.Context(), p.ID)
	if err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.NewRevision(views.NewRevisionPage{
		Chrome:  h.Chrome(r, "New revision of "+p.Name, "projects"),
		Project: p.Name,
		Form:    views.ManifestForm{Action: paths.Revisions(p.Name), Submit: "Add revision", Source: latest.Source},
	}))
}

// AddRevision compiles the posted manifest and stores it as the project's
// next revision, or says it is unchanged when its hash equals the latest.
func (h *Projects) AddRevision(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p, role, err := h.project(r)
	if err != nil {
		return err
	}
	if err := requireRevisionRole(role); err != nil {
		return err
	}
	form := views.ManifestForm{Action: paths.Revisions(p.Name), Submit: "Add revision"}
	rerender := func(status int, f views.ManifestForm) error {
		return Render(w, r, status, views.NewRevision(views.NewRevisionPage{
			Chrome: h.Chrome(r, "New revision of "+p.Name, "projects"), Project: p.Name, Form: f,
		}))
	}
	res, status := compilePostedManifest(r, &form)
	if res == nil {
		return rerender(status, form)
	}
	latest, err := h.DB.LatestRevision(ctx, p.ID)
	if err != nil {
		return err
	}
	def := res.Definition
	rev, unchanged, err := h.DB.AddRevision(ctx, ActorOf(r), p.ID, store.NewRevision{
		Name: def.Name, Description: def.Description, Source: form.Source,
		Canonical: def.Canonical(), Hash: res.Hash, Summary: compiler.Summarize(DefinitionOf(latest), def),
	})
	if apperr.CodeOf(err) == apperr.Invalid {
		form.Error = apperr.Message(err)
		return rerender(http.StatusUnprocessableEntity, form)
	}
	if err != nil {
		return err
	}
	if unchanged {
		h.Flash(ctx, "info", fmt.Sprintf("Unchanged: this manifest compiles to the same definition as revision %d, so nothing was stored.", rev.Number))
	} else {
		h.Flash(ctx, "success", fmt.Sprintf("Added revision %d: %s.%s", rev.Number, rev.Summary, warningNote(res)))
	}
	return SeeOther(w, r, paths.Project(p.Name))
}

// requireRevisionRole lets deployers and admins of an environment of the
// project add a revision (from CI: studio deploy --manifest). A revision
// changes nothing by itself; deploying it is the environment's plan, with
// its own checks (typed confirmation of a destructive change, an admin's
// publication of a value in a hostname).
func requireRevisionRole(role store.Role) error {
	if !role.Includes(store.RoleDeployer) {
		return apperr.Errorf(apperr.Forbidden, "Adding a revision needs the deployer or admin role on an environment of this project; you are a %s.", role)
	}
	return nil
}

// compilePostedManifest reads and compiles the manifest of a form post into
// form. When it cannot be stored, form carries the error or the compiler's
// report, res is nil and status is the one to re-render the form with.
func compilePostedManifest(r *http.Request, form *views.ManifestForm) (res *compiler.Result, status int) {
	src, err := manifestFromRequest(r)
	form.Source = src
	if err != nil {
		form.Error = apperr.Message(err)
		return nil, http.StatusBadRequest
	}
	res = compiler.Compile([]byte(src))
	if !res.Valid() {
		report := views.NewManifestReport([]byte(src), res)
		// Each error once: counted in the verdict, listed under it with a
		// link to its line, which the source below marks.
		report.HeadlineOnly, report.Source.MarksOnly = true, true
		form.Report = &report
		return nil, http.StatusUnprocessableEntity
	}
	return res, http.StatusOK
}

// manifestFromRequest returns the manifest of a form post: an uploaded file
// (field manifest_file) when one was chosen, the pasted text (field
// manifest) otherwise.
func manifestFromRequest(r *http.Request) (string, error) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if err := r.ParseMultipartForm(MaxManifestBytes); err != nil {
			return "", err
		}
		if f, fh, err := r.FormFile("manifest_file"); err == nil {
			defer f.Close()
			if fh.Size > 0 {
				data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
				if err != nil {
					return "", err
				}
				if len(data) > MaxManifestBytes {
					return "", apperr.Errorf(apperr.Invalid, "The file is larger than 1 MiB; a manifest may be at most 1 MiB.")
				}
				return string(data), nil
			}
		} else if !errors.Is(err, http.ErrMissingFile) {
			return "", err
		}
	}
	src := r.FormValue("manifest")
	if strings.TrimSpace(src) == "" {
		return "", apperr.Errorf(apperr.Invalid, "Paste a skali.yaml or choose the file.")
	}
	if len(src) > MaxManifestBytes {
		return "", apperr.Errorf(apperr.Invalid, "A manifest may be at most 1 MiB.")
	}
	return src, nil
}

// DefinitionOf returns the compiled definition stored with a revision; nil
// when rev is nil. It never recompiles the source: what a revision deploys
// was fixed when it was added.
func DefinitionOf(rev *store.Revision) *compiler.Definition {
	if rev == nil {
		return nil
	}
	return rev.Definition
}

func warningNote(res *compiler.Result) string {
	if n := len(res.Warnings()); n > 0 {
		return fmt.Sprintf(" The manifest has %d %s; validate it to see where.", n, humanize.Plural(n, "warning", "warnings"))
	}
	return ""
}

// ShowRevisionPage renders one revision (any role on the project): who
// added it and when, its hash and source, and what changed against the
// previous revision and against the revision each environment runs, both
// in the compiled definition (from the stored definitions, never compiled
// again) and line by line in the source.
func (h *Projects) ShowRevisionPage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	// Revision numbers are integers in the database: a larger number
	// names no revision.
	n64, err := strconv.ParseInt(chi.URLParam(r, "n"), 10, 32)
	if err != nil || n64 < 1 {
		return apperr.Errorf(apperr.NotFound, "There is no revision %q.", chi.URLParam(r, "n"))
	}
	n := int(n64)
	p, _, err := h.project(r)
	if err != nil {
		return err
	}
	revs, err := h.DB.Revisions(ctx, p.ID)
	if err != nil {
		return err
	}
	byNumber := make(map[int]*store.Revision, len(revs))
	byID := make(map[int64]*store.Revision, len(revs))
	ids := make([]int64, len(revs))
	for i := range revs {
		byNumber[revs[i].Number], byID[revs[i].ID], ids[i] = &revs[i], &revs[i], revs[i].ID
	}
	rev := byNumber[n]
	if rev == nil {
		return apperr.Errorf(apperr.NotFound, "%s has no revision %d.", p.Name, n)
	}
	envs, err := h.DB.VisibleEnvironments(ctx, CurrentUser(ctx), p.ID)
	if err != nil {
		return err
	}
	defs, err := h.DB.RevisionDefinitions(ctx, ids)
	if err != nil {
		return err
	}
	m := views.RevisionPage{
		Chrome:  h.Chrome(r, fmt.Sprintf("%s revision %d", p.Name, n), "projects"),
		Project: p.Name, Number: n, Hash: rev.Hash, CreatedBy: rev.CreatedBy, CreatedAt: rev.CreatedAt,
		Latest: revs[0].Number == n,
		Source: views.NewManifestSource([]byte(rev.Source), nil),
	}
	if byNumber[n-1] != nil {
		m.Previous = n - 1
	}
	if byNumber[n+1] != nil {
		m.Next = n + 1
	}
	// Which environments run which other revision, in name order.
	runners := map[int][]string{}
	for _, e := range envs {
		if e.ActiveRevisionID == nil || byID[*e.ActiveRevisionID] == nil {
			continue
		}
		if other := byID[*e.ActiveRevisionID].Number; other == n {
			m.RunBy = append(m.RunBy, e.Name)
		} else {
			runners[other] = append(runners[other], e.Name)
		}
	}
	compare := func(other *store.Revision, title, note string) views.RevisionComparison {
		c := views.RevisionComparison{ID: fmt.Sprintf("against-%d", other.Number), Title: title, Note: note, Against: other.Number,
			Diff: views.NewLineDiff(other.Source, rev.Source)}
		for _, ch := range compiler.Compare(defs[other.ID], defs[rev.ID]) {
			c.Changes = append(c.Changes, views.ChangeView{Text: ch.String(), Destructive: ch.Destructive})
		}
		return c
	}
	if prev := byNumber[n-1]; prev != nil {
		note := fmt.Sprintf("What revision %d changed.", n)
		if names := runners[n-1]; len(names) > 0 {
			note += fmt.Sprintf(" %s %s revision %d, so this is also what deploying revision %d there would change.",
				strings.Join(names, ", "), countWord(len(names), "runs", "run"), n-1, n)
			delete(runners, n-1)
		}
		m.Comparisons = append(m.Comparisons, compare(prev, fmt.Sprintf("Against revision %d, the previous one", n-1), note))
	}
	for _, other := range slices.Sorted(maps.Keys(runners)) {
		names := runners[other]
		m.Comparisons = append(m.Comparisons, compare(byNumber[other],
			fmt.Sprintf("Against revision %d, which %s %s", other, strings.Join(names, ", "), countWord(len(names), "runs", "run")),
			fmt.Sprintf("What deploying revision %d to %s would change.", n, strings.Join(names, ", "))))
	}
	return Render(w, r, http.StatusOK, views.Revision(m))
}

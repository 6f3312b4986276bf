package handlers

import (
	"net/http"

	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
)

// FormAddresses answers GET on the addresses that only take posts. A failed
// post renders its form with the errors at the address it was sent to; a
// person who opens that address again (reload from the address bar, a new
// tab, a bookmark) lands on the form's page instead of a 405.
type FormAddresses struct {
	*Base
}

// NewFormAddresses returns the handlers.
func NewFormAddresses(b *Base) *FormAddresses { return &FormAddresses{Base: b} }

// Projects sends GET /projects to the new-project form (installation
// admins) or the project list.
func (h *FormAddresses) Projects(w http.ResponseWriter, r *http.Request) error {
	if RequireAdmin(r) == nil {
		return SeeOther(w, r, paths.NewProject)
	}
	return SeeOther(w, r, paths.Home)
}

// Revisions sends GET /projects/{project}/revisions to the project's revisions.
func (h *FormAddresses) Revisions(w http.ResponseWriter, r *http.Request) error {
	p, _, err := h.project(r)
	if err != nil {
		return err
	}
	return SeeOther(w, r, paths.Project(p.Name)+"#revisions")
}

// Environments sends GET /projects/{project}/environments to the project's environments.
func (h *FormAddresses) Environments(w http.ResponseWriter, r *http.Request) error {
	p, _, err := h.project(r)
	if err != nil {
		return err
	}
	return SeeOther(w, r, paths.Project(p.Name)+"#environments")
}

// ValuesImport sends GET .../values/import to the import form.
func (h *FormAddresses) ValuesImport(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	return SeeOther(w, r, paths.Values(env.Project, env.Name)+"#import")
}

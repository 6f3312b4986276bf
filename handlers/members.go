package handlers

import (
	"github.com/skali-dev/studio/humanize"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Members lets an environment's admins (and installation admins) add people
// by email with a role, change their role and remove them. Every action,
// including the page itself, needs the admin role on the environment.
type Members struct {
	*Base
}

// NewMembers returns the members handlers.
func NewMembers(b *Base) *Members { return &Members{Base: b} }

// ShowMembersPage renders the members of the environment and the add form.
func (h *Members) ShowMembersPage(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	return h.render(w, r, http.StatusOK, env, views.MemberForm{Role: string(store.RoleViewer)})
}

func (h *Members) render(w http.ResponseWriter, r *http.Request, status int, env *store.Environment, form views.MemberForm) error {
	members, err := h.DB.Members(r.Context(), env.ID)
	if err != nil {
		return err
	}
	me := CurrentUser(r.Context())
	m := views.MembersPage{
		Chrome:      h.Chrome(r, "Members · "+env.Project+"/"+env.Name, "projects"),
		Project:     env.Project,
		Environment: env.Name,
		Form:        form,
		NoOIDC:      !h.OIDC,
	}
	for _, mb := range members {
		row := views.MemberRow{UserID: mb.UserID, Name: mb.Name, Email: mb.Email, Role: string(mb.Role), Pending: mb.Pending,
			You: me != nil && me.ID == mb.UserID}
		if mb.LastSignIn != nil {
			row.LastSignIn = humanize.Time(*mb.LastSignIn)
		}
		m.Members = append(m.Members, row)
	}
	return Render(w, r, status, views.Members(m))
}

// AddMember adds a person by email with a role; bad input re-renders the
// form with the error next to its field.
func (h *Members) AddMember(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	if err := ParseForm(r); err != nil {
		return err
	}
	form := views.MemberForm{Email: strings.TrimSpace(r.PostForm.Get("email")), Role: r.PostForm.Get("role")}
	if !store.ValidEmail(form.Email) {
		form.EmailError = "Enter an email address, like ada@example.com."
	}
	role, err := store.ParseRole(form.Role)
	if err != nil {
		form.RoleError = apperr.Message(err)
	}
	if form.EmailError != "" || form.RoleError != "" {
		return h.render(w, r, http.StatusUnprocessableEntity, env, form)
	}
	m, err := h.DB.AddMember(r.Context(), ActorOf(r), env, form.Email, role)
	if err != nil {
		if c := apperr.CodeOf(err); c == apperr.Conflict || c == apperr.Invalid {
			form.EmailError = apperr.Message(err)
			return h.render(w, r, http.StatusUnprocessableEntity, env, form)
		}
		return err
	}
	msg := m.Email + " is now " + article(string(role)) + " of " + env.Project + "/" + env.Name + "."
	if m.Pending {
		msg += " They have not signed in yet; their first sign-in with this email links them."
	}
	h.Flash(r.Context(), "success", msg)
	return SeeOther(w, r, paths.Members(env.Project, env.Name))
}

// ChangeMemberRole sets a member's role.
func (h *Members) ChangeMemberRole(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	userID, err := memberParam(r)
	if err != nil {
		return err
	}
	if err := ParseForm(r); err != nil {
		return err
	}
	role, err := store.ParseRole(r.PostForm.Get("role"))
	if err != nil {
		return err
	}
	m, err := h.DB.ChangeMemberRole(r.Context(), ActorOf(r), env, userID, role)
	if err != nil {
		return h.refused(w, r, env, err)
	}
	h.Flash(r.Context(), "success", m.DisplayName()+" is now "+article(string(role))+" of "+env.Project+"/"+env.Name+".")
	return SeeOther(w, r, paths.Members(env.Project, env.Name))
}

// ShowRemoveMemberPage asks for confirmation before removing a member.
func (h *Members) ShowRemoveMemberPage(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	userID, err := memberParam(r)
	if err != nil {
		return err
	}
	members, err := h.DB.Members(r.Context(), env.ID)
	if err != nil {
		return err
	}
	me := CurrentUser(r.Context())
	for _, mb := range members {
		if mb.UserID == userID {
			return Render(w, r, http.StatusOK, views.MemberRemove(views.MemberRemovePage{
				Chrome: h.Chrome(r, "Remove "+mb.DisplayName(), "projects"), Project: env.Project, Environment: env.Name,
				UserID: userID, Who: mb.DisplayName(), Role: article(string(mb.Role)), You: me != nil && me.ID == userID,
			}))
		}
	}
	return apperr.Errorf(apperr.NotFound, "That person is not a member of this environment.")
}

// RemoveMember takes a member's role away.
func (h *Members) RemoveMember(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	userID, err := memberParam(r)
	if err != nil {
		return err
	}
	m, err := h.DB.RemoveMember(r.Context(), ActorOf(r), env, userID)
	if err != nil {
		return h.refused(w, r, env, err)
	}
	h.Flash(r.Context(), "success", m.DisplayName()+" is no longer a member of "+env.Project+"/"+env.Name+".")
	return SeeOther(w, r, paths.Members(env.Project, env.Name))
}

// refused answers a change the store refused as a conflict (the last admin)
// with the members page, unchanged, and the reason at its top (409); other
// errors pass through.
func (h *Members) refused(w http.ResponseWriter, r *http.Request, env *store.Environment, err error) error {
	if apperr.CodeOf(err) != apperr.Conflict {
		return err
	}
	h.Flash(r.Context(), "error", apperr.Message(err))
	return h.render(w, r, http.StatusConflict, env, views.MemberForm{})
}

func memberParam(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "user"), 10, 64)
	if err != nil || id <= 0 {
		return 0, apperr.Errorf(apperr.NotFound, "That person is not a member of this environment.")
	}
	return id, nil
}

func article(role string) string {
	if role == string(store.RoleAdmin) {
		return "an admin"
	}
	return "a " + role
}

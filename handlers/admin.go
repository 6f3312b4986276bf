package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/views"
)

// Admin is the installation admin page: the backup target.
type Admin struct {
	*Base
	Runs *runs.Service
}

// NewAdmin returns the admin handlers.
func NewAdmin(b *Base, svc *runs.Service) *Admin { return &Admin{Base: b, Runs: svc} }

// ShowAdminPage renders the admin page (installation admins).
func (h *Admin) ShowAdminPage(w http.ResponseWriter, r *http.Request) error {
	if err := RequireAdmin(r); err != nil {
		return err
	}
	return h.render(w, r, http.StatusOK, nil, "", "")
}

func (h *Admin) render(w http.ResponseWriter, r *http.Request, status int, posted *runs.BackupTargetForm, field, problem string) error {
	return h.renderPage(w, r, status, func(m *views.AdminPage) {
		m.TargetError, m.TargetField = problem, field
		if posted != nil {
			m.Target = posted.Target
			m.S3.Endpoint, m.S3.Region, m.S3.PathStyle = posted.Endpoint, posted.Region, posted.PathStyle
		}
	})
}

// renderPage renders the admin page as stored, with what edit changes
// (a form as posted and its error).
func (h *Admin) renderPage(w http.ResponseWriter, r *http.Request, status int, edit func(*views.AdminPage)) error {
	current, err := h.DB.BackupTarget(r.Context())
	if err != nil {
		return err
	}
	m := views.AdminPage{Chrome: h.Chrome(r, "Installation", "admin"), Current: current, Target: current}
	if h.Runs != nil && h.Runs.Vault != nil {
		settings, _, ok, err := h.Runs.Vault.S3BackupTarget(r.Context())
		if err != nil {
			return err
		}
		if ok {
			m.S3 = views.S3TargetForm{Endpoint: settings.Endpoint, Region: settings.Region, PathStyle: settings.PathStyle, KeysSet: true}
		}
	}
	edit(&m)
	if h.Runs != nil {
		if m.CurrentProblem, err = h.Runs.TargetProblem(r.Context()); err != nil {
			return err
		}
	}
	alarms, err := h.DB.BackupAlarms(r.Context())
	if err != nil {
		return err
	}
	for _, a := range alarms {
		m.Alarms = append(m.Alarms, views.NewBackupAlarmView(a))
	}
	if err := h.hostnameClaims(r, &m); err != nil {
		return err
	}
	return Render(w, r, status, views.Admin(m))
}

// hostnameClaims fills the page's hostname claims and the environments a
// claim may be moved to.
func (h *Admin) hostnameClaims(r *http.Request, m *views.AdminPage) error {
	claims, err := h.DB.HostnameClaims(r.Context())
	if err != nil {
		return err
	}
	for _, c := range claims {
		m.Claims = append(m.Claims, views.HostnameClaimView{Hostname: c.Hostname, Owner: c.Project + " / " + c.Environment, Since: c.Since})
	}
	// The move form's environment is typed (project/environment), so the
	// page lists no environment: an installation may hold thousands.
	return nil
}

// moveTarget finds the environment a move names: typed as
// project/environment (spaces around the slash allowed), or an id.
func (h *Admin) moveTarget(r *http.Request, typed string) (int64, string) {
	if id, err := strconv.ParseInt(typed, 10, 64); err == nil && id > 0 {
		return id, ""
	}
	project, env, ok := strings.Cut(typed, "/")
	project, env = strings.TrimSpace(project), strings.TrimSpace(env)
	if !ok || project == "" || env == "" {
		return 0, ""
	}
	e, err := h.DB.EnvironmentByName(r.Context(), project, env)
	if err != nil {
		return 0, "No environment is named " + project + "/" + env + ": type it as project/environment, such as shop/production."
	}
	return e.ID, ""
}

// MoveHostname moves a hostname's claim to another environment
// (installation admins): fields hostname, environment (its id) and
// confirm, the hostname typed again. A refusal re-renders the page with
// the reason next to the form.
func (h *Admin) MoveHostname(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	if err := RequireAdmin(r); err != nil {
		return err
	}
	mv := views.HostnameMove{Hostname: strings.TrimSpace(r.PostForm.Get("hostname")), Environment: strings.TrimSpace(r.PostForm.Get("environment")),
		Confirm: strings.TrimSpace(r.PostForm.Get("confirm"))}
	refuse := func(msg string) error {
		return h.renderPage(w, r, http.StatusUnprocessableEntity, func(m *views.AdminPage) { m.Move, m.MoveError = mv, msg })
	}
	to, problem := h.moveTarget(r, mv.Environment)
	switch {
	case mv.Hostname == "":
		return refuse("Choose the hostname to move.")
	case problem != "":
		return refuse(problem)
	case to < 1:
		return refuse("Type the environment to move " + mv.Hostname + " to, as project/environment.")
	case !strings.EqualFold(mv.Confirm, mv.Hostname):
		return refuse("Type the hostname, " + mv.Hostname + ", to confirm the move.")
	}
	moved, err := h.DB.MoveHostnameClaim(r.Context(), ActorOf(r), mv.Hostname, to)
	if c := apperr.CodeOf(err); c == apperr.Invalid || c == apperr.NotFound {
		return refuse(apperr.Message(err))
	}
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", moved.Hostname+" now belongs to "+moved.Project+" / "+moved.Environment+".")
	return SeeOther(w, r, paths.Admin+"#hostname-claims")
}

// SetBackupTarget checks and stores the backup target (installation
// admins): field target, and for an s3:// URL endpoint, region,
// path_style (1 for path-style addressing), access_key and secret_key
// (empty: keep the stored one).
func (h *Admin) SetBackupTarget(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	if err := RequireAdmin(r); err != nil {
		return err
	}
	if h.Runs == nil {
		return apperr.Errorf(apperr.Conflict, "Backups are not available: this Studio has no value-encryption key configured.")
	}
	f := runs.BackupTargetForm{Target: r.PostForm.Get("target"), Endpoint: r.PostForm.Get("endpoint"), Region: r.PostForm.Get("region"),
		PathStyle: formBool(r.PostForm.Get("path_style")), AccessKey: r.PostForm.Get("access_key"), SecretKey: r.PostForm.Get("secret_key")}
	if err := h.Runs.SaveBackupTarget(r.Context(), ActorOf(r), f); err != nil {
		var br *runs.BackupRefusal
		if errors.As(err, &br) {
			// A URL with credentials in it is not shown again; the keys
			// never are.
			if strings.Contains(f.Target, "@") {
				f.Target = ""
			}
			f.AccessKey, f.SecretKey = "", ""
			return h.render(w, r, http.StatusUnprocessableEntity, &f, br.Field, br.Message)
		}
		return err
	}
	h.Flash(r.Context(), "success", "Backup target saved.")
	return SeeOther(w, r, paths.Admin)
}

// formBool reads a checkbox or radio's value: 1, on, true or yes.
func formBool(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "on", "true", "yes":
		return true
	}
	return false
}

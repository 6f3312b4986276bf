package handlers

import (
	"errors"
	"net/http"
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
	return h.render(w, r, http.StatusOK, nil, "")
}

func (h *Admin) render(w http.ResponseWriter, r *http.Request, status int, posted *string, problem string) error {
	current, err := h.DB.BackupTarget(r.Context())
	if err != nil {
		return err
	}
	m := views.AdminPage{Chrome: h.Chrome(r, "Installation", "admin"), Current: current, Target: current, TargetError: problem}
	if posted != nil {
		m.Target = *posted
	}
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
	return Render(w, r, status, views.Admin(m))
}

// SetBackupTarget checks and stores the backup target (installation
// admins): field target.
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
	target := r.PostForm.Get("target")
	if err := h.Runs.SetBackupTarget(r.Context(), ActorOf(r), target); err != nil {
		var br *runs.BackupRefusal
		if errors.As(err, &br) {
			// A URL may carry credentials: it is not shown again.
			if strings.Contains(target, "://") {
				target = ""
			}
			return h.render(w, r, http.StatusUnprocessableEntity, &target, br.Message)
		}
		return err
	}
	h.Flash(r.Context(), "success", "Backup target saved.")
	return SeeOther(w, r, paths.Admin)
}

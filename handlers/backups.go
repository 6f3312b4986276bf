package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Backups shows an environment's backups and changes its schedule, takes,
// removes and restores snapshots, and accepts data after a failed restore.
type Backups struct {
	*Base
	Runs *runs.Service
}

// NewBackups returns the backup handlers; svc nil means backups are off.
func NewBackups(b *Base, svc *runs.Service) *Backups { return &Backups{Base: b, Runs: svc} }

func (h *Backups) service() (*runs.Service, error) {
	if h.Runs == nil {
		return nil, apperr.Errorf(apperr.Conflict, "Backups are not available: this Studio has no value-encryption key configured.")
	}
	return h.Runs, nil
}

// backupsForm is what a re-rendered backups page shows besides what is stored.
type backupsForm struct {
	cron, keep, cronErr, keepErr, formErr, acceptErr string
	posted                                           bool
	drillCron, drillErr                              string
	drillPosted                                      bool
}

// BackupsPageSize is how many snapshots one page of the backups page lists.
const BackupsPageSize = 25

// ShowBackupsPage renders the backups page (any role).
func (h *Backups) ShowBackupsPage(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	return h.render(w, r, http.StatusOK, env, role, backupsForm{})
}

// ShowBackupsLive answers the backups page's live parts (any role, as the
// page), which its script fetches again when a snapshot or a restore starts
// or ends: each top-level element replaces the page's element of its id.
func (h *Backups) ShowBackupsLive(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	m, err := h.page(r, env, role, backupsForm{})
	if err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.BackupsLiveParts(m))
}

func (h *Backups) render(w http.ResponseWriter, r *http.Request, status int, env *store.Environment, role store.Role, f backupsForm) error {
	m, err := h.page(r, env, role, f)
	if err != nil {
		return err
	}
	m.Chrome = h.Chrome(r, "Backups · "+env.Project+" / "+env.Name, "projects")
	return Render(w, r, status, views.Backups(m))
}

// page builds the backups page's model, all but its chrome: the page and
// its live parts read the same.
func (h *Backups) page(r *http.Request, env *store.Environment, role store.Role, f backupsForm) (views.BackupsPage, error) {
	svc, err := h.service()
	if err != nil {
		return views.BackupsPage{}, err
	}
	ctx := r.Context()
	u := CurrentUser(ctx)
	now := svc.Now()
	m := views.BackupsPage{
		Project: env.Project, Env: env.Name, State: env.State, Down: env.State == store.EnvironmentRestoreFailed, LastEventSeq: env.LastEventSeq,
		IsInstallAdmin: u != nil && u.IsAdmin,
		CanManage:      role.Includes(store.RoleAdmin), CanBackup: role.Includes(store.RoleDeployer),
		CronError: f.cronErr, KeepError: f.keepErr, FormError: f.formErr, AcceptError: f.acceptErr,
	}
	target, err := h.DB.BackupTarget(ctx)
	if err != nil {
		return m, err
	}
	m.NoTarget = target == ""
	if m.TargetProblem, err = svc.TargetProblem(ctx); err != nil {
		return m, err
	}
	latest, err := h.DB.LatestRevision(ctx, env.ProjectID)
	if err != nil {
		return m, err
	}
	if len(runs.SnapshotServices(latest.Definition)) == 0 {
		m.Refusal = "The latest revision declares no database, bucket or volume: there is nothing to snapshot, so schedules and manual backups are refused."
	}
	if m.Status, err = BackupStatus(r, h.DB, svc, env); err != nil {
		return m, err
	}
	m.Cron, m.Keep = m.Status.Cron, m.Status.Keep
	m.DrillCron, m.DrillCronError = m.Status.DrillCron, f.drillErr
	if !m.Status.Drills {
		m.DrillCron = store.DefaultDrillCron
	}
	if f.drillPosted {
		m.DrillCron = f.drillCron
	}
	m.CanDrill = m.CanManage && m.Status.LastSuccess != ""
	if f.posted {
		m.Cron, m.Keep = f.cron, f.keep
	}
	if m.Cron != "" {
		m.Preview, m.PreviewError = previewFires(m.Cron, now)
	}
	// A page of snapshots, newest first; ?before=ID reads the older ones
	// (a keyset: a deep page reads only its rows).
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	before = max(before, 0)
	list, more, err := h.DB.BackupsBefore(ctx, env.ID, before, BackupsPageSize)
	if err != nil {
		return m, err
	}
	m.Live = paths.BackupsLive(env.Project, env.Name)
	if before > 0 {
		m.Live += "?before=" + strconv.FormatInt(before, 10)
		m.NewestURL = paths.Backups(env.Project, env.Name)
	}
	if more && len(list) > 0 {
		m.OlderURL = paths.Backups(env.Project, env.Name) + "?before=" + strconv.FormatInt(list[len(list)-1].ID, 10) + "#snapshots"
	}
	missing, err := svc.MissingSnapshots(ctx, env, list)
	if err != nil {
		return m, err
	}
	var runIDs []int64
	for _, b := range list {
		if b.RunID != nil {
			runIDs = append(runIDs, *b.RunID)
		}
	}
	backupRuns, err := h.DB.RunsByID(ctx, runIDs)
	if err != nil {
		return m, err
	}
	for i := range list {
		b := &list[i]
		row := views.BackupRow{ID: b.ID, Number: b.Number, Name: b.Name, Origin: b.Origin, At: humanize.Minute(b.At()), Skipped: b.Skipped}
		if run := backupRunOf(b, backupRuns); run != nil {
			rv := views.NewRunView(env, run, now, false)
			row.Run = &rv
			row.Size = views.ByteSize(b.Size)
			row.CanRemove = m.CanManage && store.RunFinished(b.RunStatus)
			row.Missing = missing[b.ID]
			row.Leftover = b.Leftover
			row.CanRestore = m.CanManage && b.Succeeded() && row.Missing == ""
		}
		if e := b.ExpiresAt(); e != nil && b.RunID != nil {
			row.Expires = humanize.Minute(*e)
		}
		m.Snapshots = append(m.Snapshots, row)
	}
	return m, nil
}

// backupRunOf is b's run from runs, nil when it has none (or it is gone).
func backupRunOf(b *store.Backup, runs map[int64]*store.Run) *store.Run {
	if b.RunID == nil {
		return nil
	}
	return runs[*b.RunID]
}

// BackupStatus builds the schedule, next fire, last good snapshot and
// alarm of env (the backups and environment pages).
func BackupStatus(r *http.Request, db *store.DB, svc *runs.Service, env *store.Environment) (views.BackupStatusView, error) {
	ctx := r.Context()
	var v views.BackupStatusView
	now := db.Now()
	if svc != nil {
		now = svc.Now()
	}
	sched, err := db.BackupSchedule(ctx, env.ID)
	if err != nil && apperr.CodeOf(err) != apperr.NotFound {
		return v, err
	}
	if sched != nil {
		v.Scheduled, v.Cron, v.Keep = true, sched.Cron, sched.KeepText
		if c, err := runs.ParseCron(sched.Cron); err == nil {
			if next := c.Next(now); !next.IsZero() {
				v.Next, v.NextAt, v.Now = humanize.Time(next), next, now
			}
		}
	}
	last, err := db.LastGoodBackupAt(ctx, env.ID)
	if err != nil {
		return v, err
	}
	if last != nil {
		v.LastSuccess, v.LastAt = humanize.Time(*last), last.UTC().Format(time.RFC3339Nano)
		v.LastAge = humanize.Duration(now.Sub(*last))
	}
	if err := drillStatus(r, db, env, now, &v); err != nil {
		return v, err
	}
	if v.Where, err = db.BackupTarget(ctx); err != nil {
		return v, err
	}
	latest, err := db.LatestRevision(ctx, env.ProjectID)
	if err != nil && apperr.CodeOf(err) != apperr.NotFound {
		return v, err
	}
	if latest != nil {
		var names []string
		for _, s := range runs.SnapshotServices(latest.Definition) {
			names = append(names, s.String())
		}
		v.Covers = humanize.JoinAnd(names)
	}
	if svc != nil {
		if _, err := platform.Backups(svc.Platform); err != nil {
			v.Covers = runs.Sentence(err.Error())
		} else if latest != nil {
			if msg := runs.CannotSnapshot(svc.Platform, latest.Definition); msg != "" {
				v.Covers = msg
			}
		}
	}
	alarm, err := db.BackupAlarmOf(ctx, env.ID)
	if err != nil {
		return v, err
	}
	if alarm != nil {
		v.Alarm = alarm.Reason
		v.AlarmRunURL = views.NewBackupAlarmView(*alarm).RunURL
	}
	return v, nil
}

// previewFires lists the next five fires of expr, or says what is wrong.
func previewFires(expr string, now time.Time) ([]string, string) {
	c, err := runs.ParseCron(expr)
	if err != nil {
		return nil, err.Error()
	}
	var out []string
	for _, t := range c.NextN(now, 5) {
		out = append(out, humanize.DayMinute(t))
	}
	if len(out) == 0 {
		return nil, "This expression never fires."
	}
	return out, ""
}

// PreviewSchedule answers the next five fires of ?cron= as JSON, for the
// page's script (any role).
func (h *Backups) PreviewSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := h.Environment(r, store.RoleViewer); err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	fires, problem := previewFires(r.URL.Query().Get("cron"), svc.Now())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	return json.NewEncoder(w).Encode(struct {
		Fires []string `json:"fires"`
		Error string   `json:"error,omitempty"`
	}{fires, problem})
}

// refusal re-renders the page with a refused action's sentence next to
// its field (422), or returns err when it is no refusal.
func (h *Backups) refusal(w http.ResponseWriter, r *http.Request, env *store.Environment, role store.Role, f backupsForm, err error) error {
	var br *runs.BackupRefusal
	if !errors.As(err, &br) {
		return err
	}
	if br.Also != nil && br.Also.Field == "keep" {
		f.keepErr = br.Also.Message
	}
	switch br.Field {
	case "cron":
		f.cronErr = br.Message
	case "keep":
		f.keepErr = br.Message
	case "drill-cron":
		f.drillErr = br.Message
	case "confirm":
		f.acceptErr = br.Message
	default:
		f.formErr = br.Message
		if br.NoTarget {
			f.formErr = ""
		}
	}
	return h.render(w, r, http.StatusUnprocessableEntity, env, role, f)
}

// SetSchedule sets or changes the schedule (admins): fields cron and keep.
func (h *Backups) SetSchedule(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, role, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	f := backupsForm{cron: r.PostForm.Get("cron"), keep: r.PostForm.Get("keep"), posted: true}
	if err := svc.SetBackupSchedule(r.Context(), ActorOf(r), env, f.cron, f.keep); err != nil {
		return h.refusal(w, r, env, role, f, err)
	}
	h.Flash(r.Context(), "success", "Backup schedule saved.")
	return SeeOther(w, r, backupsURL(env))
}

// RemoveSchedule turns automatic backups off (admins).
func (h *Backups) RemoveSchedule(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	if err := h.DB.RemoveBackupSchedule(r.Context(), ActorOf(r), env); err != nil {
		return err
	}
	h.Flash(r.Context(), "success", "Backup schedule removed. Snapshots already taken stay.")
	return SeeOther(w, r, backupsURL(env))
}

// TakeSnapshot takes a manual snapshot (deployers and admins) and answers
// 303 to its run page.
func (h *Backups) TakeSnapshot(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleDeployer)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	run, err := svc.StartBackup(r.Context(), ActorOf(r), env)
	if err != nil {
		return h.refusal(w, r, env, role, backupsForm{}, err)
	}
	return SeeOther(w, r, paths.Run(env.Project, env.Name, run.ID))
}

// backup loads the {backup} of env.
func (h *Backups) backup(r *http.Request, env *store.Environment) (*store.Backup, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "backup"), 10, 64)
	if err != nil || id < 1 {
		return nil, apperr.Errorf(apperr.NotFound, "No such snapshot.")
	}
	b, err := h.DB.BackupByID(r.Context(), env.ID, id)
	if err != nil {
		return nil, err
	}
	if b.RunID == nil {
		return nil, apperr.Errorf(apperr.NotFound, "No such snapshot.")
	}
	return b, nil
}

func (h *Backups) confirmPage(r *http.Request, env *store.Environment, b *store.Backup, action, problem string) views.BackupConfirmPage {
	title := "Remove snapshot"
	if action == "restore" {
		title = "Restore"
	}
	return views.BackupConfirmPage{Chrome: h.Chrome(r, title+" · "+env.Project+" / "+env.Name, "projects"),
		Project: env.Project, Env: env.Name, Action: action, ID: b.ID, Name: b.Name, Origin: b.Origin,
		At: humanize.Time(b.At()), Size: views.ByteSize(b.Size), ConfirmError: problem}
}

// ShowRestorePage confirms a restore (admins).
func (h *Backups) ShowRestorePage(w http.ResponseWriter, r *http.Request) error {
	return h.showConfirm(w, r, "restore")
}

// ShowRemovePage confirms removing a snapshot (admins).
func (h *Backups) ShowRemovePage(w http.ResponseWriter, r *http.Request) error {
	return h.showConfirm(w, r, "remove")
}

func (h *Backups) showConfirm(w http.ResponseWriter, r *http.Request, action string) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	b, err := h.backup(r, env)
	if err != nil {
		return err
	}
	return Render(w, r, http.StatusOK, views.BackupConfirm(h.confirmPage(r, env, b, action, "")))
}

// Restore starts a restore run (admins, field confirm: the environment's
// name) and answers 303 to its run page.
func (h *Backups) Restore(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	b, err := h.backup(r, env)
	if err != nil {
		return err
	}
	run, err := svc.StartRestore(r.Context(), ActorOf(r), env, b.ID, r.PostForm.Get("confirm"))
	if err != nil {
		var br *runs.BackupRefusal
		if errors.As(err, &br) {
			return Render(w, r, http.StatusUnprocessableEntity, views.BackupConfirm(h.confirmPage(r, env, b, "restore", br.Message)))
		}
		return err
	}
	return SeeOther(w, r, paths.Run(env.Project, env.Name, run.ID))
}

// Remove deletes a snapshot and its files (admins, field confirm: the
// snapshot's name).
func (h *Backups) Remove(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	b, err := h.backup(r, env)
	if err != nil {
		return err
	}
	if err := svc.RemoveBackup(r.Context(), ActorOf(r), env, b.ID, r.PostForm.Get("confirm")); err != nil {
		var br *runs.BackupRefusal
		if errors.As(err, &br) {
			return Render(w, r, http.StatusUnprocessableEntity, views.BackupConfirm(h.confirmPage(r, env, b, "remove", br.Message)))
		}
		return err
	}
	h.Flash(r.Context(), "success", "Snapshot "+b.Name+" removed.")
	return SeeOther(w, r, backupsURL(env))
}

// Accept accepts the data as it is after a failed restore (admins, field
// confirm: the environment's name).
func (h *Backups) Accept(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, role, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	if err := svc.AcceptData(r.Context(), ActorOf(r), env, r.PostForm.Get("confirm")); err != nil {
		return h.refusal(w, r, env, role, backupsForm{}, err)
	}
	h.Flash(r.Context(), "success", env.Name+" is active again with its data as it is; deploys are allowed.")
	return SeeOther(w, r, backupsURL(env))
}

func backupsURL(env *store.Environment) string {
	return paths.Backups(env.Project, env.Name)
}

// SetDrillSchedule sets or turns off the restore drill schedule (admins):
// field cron, "" for off.
func (h *Backups) SetDrillSchedule(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	env, role, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	cron := r.PostForm.Get("cron")
	if len(cron) > 200 {
		return h.refusal(w, r, env, role, backupsForm{drillCron: cron[:200], drillPosted: true},
			&runs.BackupRefusal{Field: "drill-cron", Message: "A cron line is at most 200 characters."})
	}
	if err := svc.SetDrillSchedule(r.Context(), ActorOf(r), env, cron); err != nil {
		return h.refusal(w, r, env, role, backupsForm{drillCron: cron, drillPosted: true}, err)
	}
	if strings.TrimSpace(cron) == "" {
		h.Flash(r.Context(), "success", "Restore drills turned off.")
	} else {
		h.Flash(r.Context(), "success", "Drill schedule saved.")
	}
	return SeeOther(w, r, backupsURL(env)+"#drills")
}

// RunDrill starts a restore drill now (admins) and answers 303 to its run.
func (h *Backups) RunDrill(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	run, err := svc.StartDrill(r.Context(), ActorOf(r), env)
	if err != nil {
		return h.refusal(w, r, env, role, backupsForm{}, err)
	}
	return SeeOther(w, r, paths.Run(env.Project, env.Name, run.ID))
}

// drillStatus adds the drill schedule and the last proven restore to v.
func drillStatus(r *http.Request, db *store.DB, env *store.Environment, now time.Time, v *views.BackupStatusView) error {
	ctx := r.Context()
	sc, err := db.DrillScheduleOf(ctx, env.ID)
	if err != nil {
		return err
	}
	if sc != nil {
		v.Drills, v.DrillCron, v.DrillDefault = true, sc.Cron, sc.Cron == store.DefaultDrillCron
		if c, err := runs.ParseCron(sc.Cron); sc.Cron != "" && err == nil {
			if next := c.Next(now); !next.IsZero() {
				v.DrillNext = humanize.Time(next)
			}
		}
	}
	run, err := db.LastGoodDrill(ctx, env.ID)
	if err != nil || run == nil {
		return err
	}
	cps, err := db.Checkpoints(ctx, run.ID)
	if err != nil {
		return err
	}
	s := runs.SummarizeDrill(cps)
	age := max(now.Sub(*run.FinishedAt).Round(time.Second), time.Second)
	parts := []string{humanize.Duration(age) + " ago", humanize.Count(s.Objects, "object", "objects"), views.ByteSize(s.Bytes)}
	switch {
	case s.Counted:
		parts = append(parts, humanize.Count(s.Tables, "table", "tables"), humanize.Count(int(s.Rows), "row", "rows"))
	case drilledDatabase(cps):
		parts = append(parts, "no tables counted (the local platform simulates databases without tables)")
	}
	if run.StartedAt != nil {
		parts = append(parts, humanize.Duration(run.FinishedAt.Sub(*run.StartedAt)))
	}
	v.LastProven, v.LastProvenURL = strings.Join(parts, " · "), paths.Run(env.Project, env.Name, run.ID)
	return nil
}

// drilledDatabase says whether a drill's checkpoints restored a database.
func drilledDatabase(cps []store.Checkpoint) bool {
	for _, cp := range cps {
		if d := runs.DecodeCheckpointDetail(cp.Detail); cp.Kind == runs.KindDrillRestore && d.Snapshot != nil && d.Snapshot.Service.Kind == "database" {
			return true
		}
	}
	return false
}

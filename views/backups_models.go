package views

import (
	"strconv"
	"time"

	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
)

// BackupsPage is the model of an environment's backups page.
type BackupsPage struct {
	Chrome  Chrome
	Project string
	Env     string
	// State is the environment's state; Down when a restore failed.
	State string
	Down  bool
	// LastEventSeq is the environment's newest event when the page was
	// read: the page follows the environment's stream after it, and reads
	// itself again when a snapshot or restore starts or ends.
	LastEventSeq int64
	// NoTarget: the installation has no backup target; IsInstallAdmin
	// links to the admin page.
	NoTarget       bool
	IsInstallAdmin bool
	// TargetProblem says why snapshots cannot be written to the backup
	// target now (gone, unmounted, read-only), or "".
	TargetProblem string
	// Refusal says why backups of this environment are refused (nothing
	// to snapshot), or "".
	Refusal string
	Status  BackupStatusView
	// CanManage: environment admins (schedule, remove, restore, accept);
	// CanBackup: deployers and admins (manual snapshot).
	CanManage bool
	CanBackup bool
	// The schedule form: what was posted and its errors.
	Cron, Keep           string
	CronError, KeepError string
	// DrillCron is the drill form's cron line, DrillCronError why it was
	// refused; CanDrill: a drill can be started now.
	DrillCron, DrillCronError string
	CanDrill                  bool
	FormError, AcceptError    string
	// Preview lists the next five fires in UTC of Cron.
	Preview      []string
	PreviewError string
	// Snapshots is one page of them, newest first; OlderURL the next
	// page's link ("" on the last), NewestURL the first page's ("" on it).
	Snapshots []BackupRow
	OlderURL  string
	NewestURL string
	// Live is where the page's script fetches BackupsLiveParts again
	// (paths.BackupsLive, with this page's ?before=).
	Live string
}

// BackupStatusView is the schedule, its next fire, the last good snapshot
// and the alarm, as the backups and environment pages show them.
type BackupStatusView struct {
	Scheduled bool
	Cron      string
	Keep      string
	// Next is the next fire ("2026-12-02 03:00 UTC"), NextAt the same time
	// and Now when the page was rendered: the page counts down to it
	// (Countdown).
	Next        string
	NextAt, Now time.Time
	// LastSuccess is when the newest good snapshot was taken, LastAt the
	// same in RFC 3339 and LastAge how long ago when rendered ("48s"): the
	// script counts it on.
	LastSuccess, LastAt, LastAge string
	// Alarm is the red warning's sentence, or "".
	Alarm string
	// AlarmRunURL is the run the alarm is about, or "".
	AlarmRunURL string
	// Covers is what a snapshot takes on this platform ("database main,
	// bucket files and volume api/state"), Where the target (no
	// credentials), "" when none.
	Covers, Where string
	// Drills is the drill schedule: DrillCron ("" off), DrillNext its
	// next fire; DrillDefault says it is the default one.
	Drills       bool
	DrillCron    string
	DrillNext    string
	DrillDefault bool
	// LastProven is the last successful drill's words ("2 days ago · 3
	// objects · 12 KB · 0.4 s"), LastProvenURL its run.
	LastProven, LastProvenURL string
}

// BackupRow is one snapshot or skipped fire.
type BackupRow struct {
	ID int64
	// Number counts the environment's snapshots ("#3"); 0 for a skipped fire.
	Number int
	Name   string
	Origin string
	At     string
	Size   string
	// Run is the backup run (nil for a skipped fire).
	Run     *RunView
	Skipped string
	Expires string
	// Missing says why a completed snapshot's files cannot be restored
	// (its target is gone, a file is missing), or "": such a snapshot is
	// shown as missing and offers no restore.
	Missing string
	// Leftover is the path of the folder a snapshot that did not complete
	// left on the target because it could not be removed, or "".
	Leftover string
	// CanRestore and CanRemove: admins, for completed / finished snapshots.
	CanRestore bool
	CanRemove  bool
}

// BackupConfirmPage confirms restoring or removing one snapshot.
type BackupConfirmPage struct {
	Chrome  Chrome
	Project string
	Env     string
	// Action is "restore" or "remove".
	Action       string
	ID           int64
	Name         string
	At           string
	Origin       string
	Size         string
	ConfirmError string
}

// AdminPage is the installation admin page.
type AdminPage struct {
	Chrome      Chrome
	Target      string
	TargetError string
	// TargetField is the form field TargetError concerns: target,
	// endpoint, region, access_key or secret_key.
	TargetField string
	// S3 is the S3 part of the form: as stored, or as posted.
	S3 S3TargetForm
	// Current is the stored target ("" when none); CurrentProblem says why
	// snapshots cannot be written to it now, or "".
	Current        string
	CurrentProblem string
	Alarms         []BackupAlarmView
	// Claims are the installation's hostname claims. Move is the move
	// form as posted (its environment typed), MoveError why it was refused.
	Claims    []HostnameClaimView
	Move      HostnameMove
	MoveError string
}

// S3TargetForm is how to reach an S3 target. The keys are never shown:
// KeysSet says the current S3 target has them stored (the form then
// keeps them when their fields are left empty).
type S3TargetForm struct {
	Endpoint  string
	Region    string
	PathStyle bool
	KeysSet   bool
}

// HostnameMove is the form that moves a hostname's claim: the hostname,
// the target environment's id and the hostname typed to confirm.
type HostnameMove struct {
	Hostname, Environment, Confirm string
}

// BackupAlarmView is an environment whose backups are in alarm.
type BackupAlarmView struct {
	Project, Env, Reason string
	// RunURL is the failed run the alarm is about, or "".
	RunURL string
}

// NewBackupAlarmView builds an alarm's model.
func NewBackupAlarmView(a store.BackupAlarm) BackupAlarmView {
	v := BackupAlarmView{Project: a.Project, Env: a.Environment, Reason: a.Reason}
	if a.RunID != nil {
		v.RunURL = paths.Run(a.Project, a.Environment, *a.RunID)
	}
	return v
}

func backupsPath(project, env string) string { return paths.Backups(project, env) }

func backupPath(project, env string, id int64) string {
	return backupsPath(project, env) + "/" + strconv.FormatInt(id, 10)
}

// ByteSize reads like 4.1 kB, 12 MB.
func ByteSize(n int64) string {
	const unit = 1000
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("kMGTPE"[exp]) + "B"
}

// HostnameClaimView is a hostname an environment holds (installation admin page).
type HostnameClaimView struct {
	Hostname string
	// Owner is the holder's "project / environment".
	Owner string
	Since time.Time
}

// targetField is the field the admin page's target error concerns.
func targetField(m AdminPage) string {
	if m.TargetField == "" {
		return "target"
	}
	return m.TargetField
}

// keyPlaceholder is a key field's placeholder: stored keys are kept when
// it is left empty.
func keyPlaceholder(set bool) string {
	if set {
		return "Empty: keep the stored key"
	}
	return ""
}

package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// AuditEnvironmentOptions is how many environments the audit filter
// offers as a list; with more, the environment is typed.
const AuditEnvironmentOptions = 100

// AuditPageSize is how many events one page of the audit log shows.
const AuditPageSize = 50

// Audit shows the audit log: installation admins see every event,
// environment admins the events of the environments they administer, and
// everybody else is refused (403), because for them there is nothing to show.
type Audit struct {
	*Base
}

// NewAudit returns the audit log handler.
func NewAudit(b *Base) *Audit { return &Audit{Base: b} }

// ShowAuditPage renders one page of the audit log, filtered by the
// environment ("project/env") and action query parameters.
func (h *Audit) ShowAuditPage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	u := CurrentUser(ctx)
	if u == nil {
		return apperr.Errorf(apperr.Unauthorized, "Sign in first.")
	}
	// An installation admin sees every environment: only as many are read
	// as the filter can offer (past that it is typed), not thousands.
	limit := 0
	if u.IsAdmin {
		limit = AuditEnvironmentOptions + 1
	}
	envs, err := h.DB.AdminEnvironments(ctx, u, limit)
	if err != nil {
		return err
	}
	q := store.AuditQuery{All: u.IsAdmin, Limit: AuditPageSize}
	scope := "Every event of this installation."
	if !u.IsAdmin {
		if len(envs) == 0 {
			return apperr.Errorf(apperr.Forbidden, "The audit log shows the events of the environments you administer, and you are not an admin of any.")
		}
		for _, e := range envs {
			q.EnvironmentIDs = append(q.EnvironmentIDs, e.ID)
		}
		scope = "Events of the environments you administer."
	}

	params := r.URL.Query()
	wantEnv, wantAction := params.Get("environment"), params.Get("action")
	m := views.AuditPage{Chrome: h.Chrome(r, "Audit log", "audit"), Scope: scope,
		Person: strings.TrimSpace(params.Get("person")), From: params.Get("from"), To: params.Get("to"), Text: strings.TrimSpace(params.Get("q"))}
	m.Filtered = wantEnv != "" || wantAction != "" || m.Person != "" || m.From != "" || m.To != "" || m.Text != ""
	q.Person, q.Text = m.Person, m.Text
	// Dates are whole UTC days: from the start of From to the end of To.
	if m.From != "" {
		t, err := time.Parse(time.DateOnly, m.From)
		if err != nil {
			return apperr.Errorf(apperr.Invalid, "The date %q is not a date like 2026-11-30.", m.From)
		}
		q.From = t
	}
	if m.To != "" {
		t, err := time.Parse(time.DateOnly, m.To)
		if err != nil {
			return apperr.Errorf(apperr.Invalid, "The date %q is not a date like 2026-11-30.", m.To)
		}
		q.To = t.AddDate(0, 0, 1)
	}
	// Past AuditEnvironmentOptions environments the filter is typed
	// (project/environment), not a list of thousands of options.
	m.EnvironmentTyped, m.Environment = len(envs) > AuditEnvironmentOptions, wantEnv
	for _, e := range envs {
		key := e.Project + "/" + e.Name
		if !m.EnvironmentTyped {
			m.Environments = append(m.Environments, views.FilterOption{Value: key, Label: key, Selected: key == wantEnv})
		}
		if key == wantEnv {
			q.EnvironmentID = e.ID
		}
	}
	if wantEnv != "" && q.EnvironmentID == 0 && m.EnvironmentTyped && u.IsAdmin {
		// Not among those read: an admin may name any environment.
		if project, name, ok := strings.Cut(wantEnv, "/"); ok {
			if env, err := h.DB.EnvironmentByName(ctx, project, name); err == nil {
				q.EnvironmentID = env.ID
			} else if apperr.CodeOf(err) != apperr.NotFound {
				return err
			}
		}
	}
	if wantEnv != "" && q.EnvironmentID == 0 {
		if m.EnvironmentTyped {
			return apperr.Errorf(apperr.Invalid, "No environment you may see is named %q: type it as project/environment, such as shop/production.", wantEnv)
		}
		return apperr.Errorf(apperr.Invalid, "You can filter by the environments the list offers; %q is not one of them.", wantEnv)
	}
	actions, err := h.DB.AuditActions(ctx, q)
	if err != nil {
		return err
	}
	if wantAction != "" && !slices.Contains(actions, wantAction) {
		actions = append(actions, wantAction)
	}
	for _, a := range actions {
		m.Actions = append(m.Actions, views.FilterOption{Value: a, Label: a, Selected: a == wantAction})
	}
	q.Action = wantAction

	// Pages continue from a record (a keyset): ?before=ID lists the older
	// ones, ?after=ID the newer ones just before it.
	if id, err := strconv.ParseInt(params.Get("before"), 10, 64); err == nil && id > 0 {
		q.Before = id
	} else if id, err := strconv.ParseInt(params.Get("after"), 10, 64); err == nil && id > 0 {
		q.After = id
	}
	events, more, err := h.DB.AuditEvents(ctx, q)
	if err != nil {
		return err
	}
	for _, e := range events {
		row := views.AuditRow{
			At:        humanize.Time(e.At),
			Ago:       views.Ago(e.At),
			AtISO:     e.At.UTC().Format("2006-01-02T15:04:05Z"),
			Actor:     e.Actor,
			Action:    e.Action,
			Target:    e.Target,
			RequestID: e.RequestID,
		}
		if e.Actor == "" {
			row.ActorNote = "system"
			if e.Action == "sign-in.failed" {
				row.ActorNote = "anonymous visitor"
			}
		}
		if e.Project != "" {
			row.Where = e.Project
			if e.Environment != "" {
				row.Where += "/" + e.Environment
			}
		}
		row.TargetURL = auditTargetURL(e)
		keys := make([]string, 0, len(e.Detail))
		for k := range e.Detail {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if v := auditDetailText(e.Detail[k]); v != "" {
				row.Details = append(row.Details, views.AuditDetail{Key: k, Value: v})
			}
		}
		m.Events = append(m.Events, row)
	}
	pageURL := func(key string, id int64) string {
		v := url.Values{}
		if wantEnv != "" {
			v.Set("environment", wantEnv)
		}
		if wantAction != "" {
			v.Set("action", wantAction)
		}
		for k, val := range map[string]string{"person": m.Person, "from": m.From, "to": m.To, "q": m.Text} {
			if val != "" {
				v.Set(k, val)
			}
		}
		if key != "" {
			v.Set(key, strconv.FormatInt(id, 10))
		}
		return paths.AuditFiltered(v.Encode())
	}
	// A page after ?before= has newer records (the one it continues
	// from), one after ?after= older ones; more says whether the list goes
	// on in the direction read.
	newer, older := q.Before > 0 || (q.After > 0 && more), q.After > 0 || (q.After == 0 && more)
	if q.After > 0 && len(events) == 0 {
		newer, older = false, false
	}
	if len(events) > 0 {
		if newer {
			m.PrevURL, m.NewestURL = pageURL("after", events[0].ID), pageURL("", 0)
		}
		if older {
			m.NextURL = pageURL("before", events[len(events)-1].ID)
		}
	} else if q.Before > 0 || q.After > 0 {
		m.NewestURL = pageURL("", 0)
	}
	return Render(w, r, http.StatusOK, views.Audit(m))
}

// auditDetailText writes one detail value as a person reads it: lists joined
// by commas, a {name, version} pair as "NAME v3", and nothing for an empty
// list (so that no "[]" or "map[...]" reaches the page).
func auditDetailText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case []any:
		parts := make([]string, 0, len(v))
		for _, x := range v {
			if t := auditDetailText(x); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, ", ")
	case []string:
		return strings.Join(v, ", ")
	case map[string]any:
		if name, ok := v["name"]; ok {
			if ver, ok := v["version"]; ok {
				return fmt.Sprintf("%v v%v", name, ver)
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+" "+auditDetailText(v[k]))
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprint(v)
}

// auditTargetURL is the page of what an event's target names: a run
// ("run 12"), a revision ("revision 3") or a snapshot (its environment's
// backups page); "" for anything else.
func auditTargetURL(e store.AuditRecord) string {
	kind, rest, _ := strings.Cut(e.Target, " ")
	n, err := strconv.ParseInt(rest, 10, 64)
	switch {
	case kind == "run" && err == nil && n > 0 && e.Project != "" && e.Environment != "":
		return paths.Run(e.Project, e.Environment, n)
	case kind == "revision" && err == nil && n > 0 && e.Project != "":
		return paths.Revision(e.Project, int(n))
	case kind == "snapshot" && rest != "" && e.Project != "" && e.Environment != "":
		return paths.Backups(e.Project, e.Environment)
	}
	return ""
}

package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// AppLogs serves an application's runtime logs page (issue 39): the last
// lines of its pods, filtered by a time window and a search, the previous
// container's log, and a download of exactly the lines it shows. Viewers
// of the environment may read them; every line is masked by the service
// (runs.Service.AppLogs) before it reaches the page.
type AppLogs struct {
	*Base
	Runs *runs.Service
}

// NewAppLogs returns the runtime logs handlers.
func NewAppLogs(b *Base, svc *runs.Service) *AppLogs { return &AppLogs{Base: b, Runs: svc} }

// LogTimeLayout is how the page writes a time of its window (the
// datetime-local input's form, read as UTC).
const LogTimeLayout = "2006-01-02T15:04:05"

// ParseLogTime reads a time of the logs' window: RFC 3339, the
// datetime-local input's form (UTC), or a duration before now ("15m",
// "2h"); "" is no bound.
func ParseLogTime(field, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, LogTimeLayout, "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, apperr.Errorf(apperr.Invalid, "%s must be a time such as 2026-03-01T14:30 (UTC) or a duration before now such as 15m; %q is neither.", field, humanize.Clip(s, 40))
}

// LogRequestOf reads the logs' request from the URL's query.
func LogRequestOf(r *http.Request, now time.Time) (runs.LogRequest, error) {
	q := r.URL.Query()
	req := runs.LogRequest{App: chi.URLParam(r, "app"), Query: strings.TrimSpace(q.Get("q")), Previous: q.Get("previous") == "1"}
	var err error
	if req.Since, err = ParseLogTime("Since", q.Get("since"), now); err != nil {
		return req, err
	}
	if req.Until, err = ParseLogTime("Until", q.Get("until"), now); err != nil {
		return req, err
	}
	if a := q.Get("after"); a != "" {
		if req.After, err = time.Parse(time.RFC3339Nano, a); err != nil {
			return req, apperr.Errorf(apperr.Invalid, "after must be a time in RFC 3339.")
		}
	}
	return req, req.Check()
}

// ShowAppLogsPage serves GET .../apps/{app}/logs, and with download=1 the
// same lines as a text file.
func (h *AppLogs) ShowAppLogsPage(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	if h.Runs == nil {
		return apperr.Errorf(apperr.Unavailable, "Runtime logs are not available on this Studio.")
	}
	now := h.DB.Now()
	req, reqErr := LogRequestOf(r, now)
	app := chi.URLParam(r, "app")
	m := views.AppLogsPage{
		Chrome:  h.Chrome(r, fmt.Sprintf("Logs of %s · %s · %s", app, env.Name, env.Project), "projects"),
		Project: env.Project, Env: env.Name, App: app,
		Since: r.URL.Query().Get("since"), Until: r.URL.Query().Get("until"), Query: req.Query, Previous: req.Previous,
		LinesLimit: runs.LogPageLines,
	}
	if reqErr != nil {
		if apperr.CodeOf(reqErr) != apperr.Invalid {
			return reqErr
		}
		if r.URL.Query().Get("download") == "1" {
			return reqErr
		}
		m.Error = apperr.Message(reqErr)
		return Render(w, r, http.StatusBadRequest, views.AppLogs(m))
	}
	res, err := h.Runs.AppLogs(r.Context(), env, req)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("download") == "1" {
		return downloadLogs(w, env, req, res, now)
	}
	m.Cut = res.Cut
	for _, c := range res.Containers {
		m.Containers = append(m.Containers, views.LogContainerView{Pod: c.Pod, Container: c.Container, Restarts: c.Restarts, Running: c.Running})
	}
	for _, l := range res.Lines {
		m.Lines = append(m.Lines, views.NewRuntimeLine(l))
	}
	if len(res.Lines) > 0 {
		m.After = res.Lines[len(res.Lines)-1].At.UTC().Format(time.RFC3339Nano)
	} else {
		m.After = now.UTC().Format(time.RFC3339Nano)
	}
	query := r.URL.Query()
	query.Del("after")
	query.Set("download", "1")
	m.DownloadURL = paths.AppLogs(env.Project, env.Name, app) + "?" + query.Encode()
	if !req.Previous && req.Until.IsZero() {
		follow := url.Values{}
		if req.Query != "" {
			follow.Set("q", req.Query)
		}
		m.FollowURL = paths.AppLogsFollow(env.Project, env.Name, app)
		if len(follow) > 0 {
			m.FollowURL += "?" + follow.Encode()
		}
	}
	return Render(w, r, http.StatusOK, views.AppLogs(m))
}

// downloadLogs writes the lines res found as a text file: a line each,
// its time (UTC), pod/container and text, exactly the lines the page shows
// for the same request.
func downloadLogs(w http.ResponseWriter, env *store.Environment, req runs.LogRequest, res *runs.LogResult, now time.Time) error {
	var b strings.Builder
	for _, l := range res.Lines {
		fmt.Fprintf(&b, "%s  %s/%s  %s\n", l.At.UTC().Format("2006-01-02T15:04:05.000Z"), l.Pod, l.Container, l.Text)
	}
	name := fmt.Sprintf("%s-%s-%s", env.Project, env.Name, req.App)
	if req.Previous {
		name += "-previous"
	}
	name += "-" + now.UTC().Format("20060102T150405Z") + ".log"
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, name))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, err := w.Write([]byte(b.String()))
	return err
}

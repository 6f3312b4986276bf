package runs

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs/mask"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/termsafe"
)

// Runtime logs (issue 39): what an application's containers print, read
// from the platform (platform.LogReader) and, before any line leaves this
// package, masked with the environment's values in every form the run
// logs mask (runs/mask) and with terminal control sequences written
// visibly (termsafe). Search runs on the masked text: a value's plaintext
// cannot be found by searching for it.

// The bounds of a read of runtime logs.
const (
	// LogPageLines and LogPageBytes bound what one read answers (a page,
	// a download): the last lines that match, at most so many.
	LogPageLines = 1000
	LogPageBytes = 1 << 20
	// LogLineBytes bounds one line as printed; a longer one is cut.
	LogLineBytes = 16 << 10
	// logSearchLines and logSearchBytes bound what is read of each
	// container to search (or to fill a time window) before the last
	// LogPageLines matches are kept.
	logSearchLines = 100_000
	logSearchBytes = 16 << 20
	// LogQueryRunes bounds a search's text, in characters.
	LogQueryRunes = 200
	// logMaskRefresh is how often a follow reads the values again (a
	// value set meanwhile is masked from then on; a new pod's first line
	// reads them at once).
	logMaskRefresh = 2 * time.Second
)

// LogRequest is what to read of an application's runtime log.
type LogRequest struct {
	App string
	// Since (inclusive) and Until (exclusive) bound the lines' times
	// (zero: unbounded).
	Since, Until time.Time
	// After drops every line at or before it (a follow resuming after the
	// last line it showed).
	After time.Time
	// Query keeps the lines that contain it, ignoring case, as they are
	// shown (masked).
	Query string
	// Previous reads each container's previous log (before its last
	// restart).
	Previous bool
}

// Check validates r, in the words a form shows.
func (r LogRequest) Check() error {
	if n := utf8.RuneCountInString(r.Query); n > LogQueryRunes {
		return apperr.Errorf(apperr.Invalid, "This search has %s.", humanize.TooLong(n, LogQueryRunes))
	}
	if !r.Since.IsZero() && !r.Until.IsZero() && !r.Until.After(r.Since) {
		return apperr.Errorf(apperr.Invalid, "The end of the time window must come after its start.")
	}
	return nil
}

// LogResult is what a read of runtime logs found.
type LogResult struct {
	Containers []platform.LogContainer
	// Lines are the last lines that match, oldest first, masked and made
	// visible.
	Lines []platform.LogLine
	// Cut says older lines that match were left out (LogPageLines,
	// LogPageBytes, or what is read of a container to search).
	Cut bool
}

// logApp checks that app is an application env runs and returns the
// platform's log reader.
func (s *Service) logApp(ctx context.Context, env *store.Environment, app string) (platform.LogReader, error) {
	lr, err := platform.Logs(s.Platform)
	if err != nil {
		return nil, apperr.Errorf(apperr.Unavailable, "%s", err.Error())
	}
	if env.ActiveRevisionID == nil {
		return nil, apperr.Errorf(apperr.NotFound, "Environment %s runs nothing yet: deploy it first.", env.Name)
	}
	rev, err := s.DB.RevisionByID(ctx, *env.ActiveRevisionID)
	if err != nil {
		return nil, err
	}
	if _, ok := rev.Definition.Applications[app]; !ok {
		return nil, apperr.Errorf(apperr.NotFound, "Environment %s runs no application named %q.", env.Name, app)
	}
	return lr, nil
}

// CheckAppLogs says why app's runtime log of env cannot be read (the
// platform keeps none, the environment runs nothing or no such
// application), or nil: what a follow checks before it starts.
func (s *Service) CheckAppLogs(ctx context.Context, env *store.Environment, app string) error {
	_, err := s.logApp(ctx, env, app)
	return err
}

// runtimeMasker hides what env's applications may print: every value
// stored now and every value of the release they run (a rollback runs
// earlier versions). Without them nothing is shown.
func (s *Service) runtimeMasker(ctx context.Context, envID int64) (*mask.Masker, error) {
	if s.Vault == nil {
		return mask.New(nil), nil
	}
	refuse := func(err error) error {
		s.Logger.Warn("runtime logs: values not read for masking", "environment", envID, "err", err)
		return apperr.Errorf(apperr.Unavailable, "The logs cannot be shown now: the environment's values could not be read to hide them.")
	}
	current, err := s.Vault.ResolveValuesForDeploy(ctx, envID)
	if err != nil {
		return nil, refuse(err)
	}
	defer clear(current)
	values := slices.AppendSeq(make([]string, 0, len(current)), maps.Values(current))
	runID, err := s.DB.ActiveReleaseRun(ctx, envID)
	if err != nil {
		return nil, refuse(err)
	}
	if runID != 0 {
		release, err := s.Vault.ResolveReleaseValues(ctx, envID, runID)
		if err != nil {
			return nil, refuse(err)
		}
		values = slices.AppendSeq(values, maps.Values(release))
		clear(release)
	}
	m := mask.New(values)
	clear(values)
	return m, nil
}

// showLine is line as it may leave the server: cut at LogLineBytes,
// masked as printed and once cleaned (as the run logs are), control
// sequences made visible.
func showLine(m *mask.Masker, l platform.LogLine) platform.LogLine {
	text := l.Text
	if len(text) > LogLineBytes {
		cut := LogLineBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = m.MaskCut(mask.Clean(m.MaskCut(text[:cut]))) + "…"
	} else {
		// Masked as printed, then cleaned (as the store cleans run logs)
		// and masked again when cleaning changed it.
		masked := m.Mask(text)
		if cleaned := mask.Clean(masked); cleaned != masked {
			masked = m.Mask(cleaned)
		}
		text = masked
	}
	l.Text = termsafe.Visible(text)
	l.Pod = termsafe.Visible(l.Pod)
	l.Container = termsafe.Visible(l.Container)
	return l
}

// logMatcher keeps the lines of a request: in its window, after After,
// containing its query.
type logMatcher struct {
	req   LogRequest
	query string
	// maskInQuery: the query holds a character of mask.Mask.
	maskInQuery bool
}

func newLogMatcher(req LogRequest) logMatcher {
	q := strings.ToLower(req.Query)
	return logMatcher{req: req, query: q, maskInQuery: strings.ContainsAny(q, mask.Mask)}
}

// inWindow is whether l's time is in the request's window.
func (m logMatcher) inWindow(l platform.LogLine) bool {
	r := m.req
	return (r.Since.IsZero() || !l.At.Before(r.Since)) && (r.Until.IsZero() || l.At.Before(r.Until)) && (r.After.IsZero() || l.At.After(r.After))
}

// matches is whether shown (a line as shown) contains the query.
func (m logMatcher) matches(shown platform.LogLine) bool {
	return m.query == "" || containsFold(shown.Text, m.query)
}

// keep is l as shown when it matches the query. A line with nothing to
// make visible (no control character, valid UTF-8) is shown as masked,
// and masking only replaces parts of it by mask.Mask: a query without
// the mask's glyph found in what is shown is found in the line as
// printed. So such a line that lacks the query is passed over without
// being masked (a search reads many lines and keeps few).
func (m logMatcher) keep(mk *mask.Masker, l platform.LogLine) (platform.LogLine, bool) {
	if m.query != "" && !m.maskInQuery && len(l.Text) <= LogLineBytes && !containsFold(l.Text, m.query) && termsafe.Visible(l.Text) == l.Text {
		return platform.LogLine{}, false
	}
	shown := showLine(mk, l)
	return shown, m.matches(shown)
}

// containsFold is whether s contains lower (lower case), ignoring case.
func containsFold(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), lower)
		}
	}
	// ASCII: no allocation per line.
	n := len(lower)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for j < n {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				break
			}
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

// AppLogs reads the last lines of app's runtime log that match req, at
// most LogPageLines and LogPageBytes of them.
func (s *Service) AppLogs(ctx context.Context, env *store.Environment, req LogRequest) (*LogResult, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	lr, err := s.logApp(ctx, env, req.App)
	if err != nil {
		return nil, err
	}
	penv := platform.Env{ID: env.ID, Project: env.Project, Name: env.Name}
	m, err := s.runtimeMasker(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	containers, err := lr.LogContainers(ctx, penv, req.App)
	if err != nil {
		return nil, platformLogError(m, req.App, err)
	}
	sortContainers(containers)
	q := platform.LogQuery{App: req.App, Previous: req.Previous, Since: req.Since, Until: req.Until,
		TailLines: LogPageLines, LimitBytes: LogPageBytes + LogPageLines*LogLineBytes/64}
	if req.Query != "" || !req.Until.IsZero() {
		// What matches may lie before the last page of lines.
		q.TailLines, q.LimitBytes = logSearchLines, logSearchBytes
	}
	match := newLogMatcher(req)
	res := &LogResult{Containers: containers}
	read := map[string]int{} // lines read by container
	err = lr.ReadLogs(ctx, penv, q, func(l platform.LogLine) error {
		read[l.Pod+"/"+l.Container]++
		if !match.inWindow(l) {
			return nil
		}
		if shown, ok := match.keep(m, l); ok {
			res.Lines = append(res.Lines, shown)
		}
		return nil
	})
	if err != nil {
		return nil, platformLogError(m, req.App, err)
	}
	for _, n := range read {
		if n >= q.TailLines {
			res.Cut = true // the container's log may go further back
		}
	}
	slices.SortStableFunc(res.Lines, func(a, b platform.LogLine) int { return a.At.Compare(b.At) })
	res.Lines, res.Cut = lastLines(res.Lines, res.Cut)
	return res, nil
}

// lastLines keeps the last lines within LogPageLines and LogPageBytes.
func lastLines(lines []platform.LogLine, cut bool) ([]platform.LogLine, bool) {
	from, bytes := len(lines), 0
	for from > 0 && len(lines)-from < LogPageLines {
		b := len(lines[from-1].Text) + len(lines[from-1].Pod) + len(lines[from-1].Container) + 40
		if bytes+b > LogPageBytes {
			break
		}
		bytes += b
		from--
	}
	if from > 0 {
		cut = true
	}
	return slices.Clip(lines[from:]), cut
}

// FollowAppLogs hands emit each new line of app's runtime log that matches
// req (lines after req.After, and from every pod that starts meanwhile),
// masked and made visible, until ctx ends (nil) or emit fails (its error).
// It first hands over, as AppLogs, the last lines after req.After.
func (s *Service) FollowAppLogs(ctx context.Context, env *store.Environment, req LogRequest, emit func(platform.LogLine) error) error {
	if err := req.Check(); err != nil {
		return err
	}
	if req.Previous {
		return apperr.Errorf(apperr.Invalid, "A previous container's log does not grow: it cannot be followed.")
	}
	lr, err := s.logApp(ctx, env, req.App)
	if err != nil {
		return err
	}
	m, err := s.runtimeMasker(ctx, env.ID)
	if err != nil {
		return err
	}
	made := time.Now()
	seen := map[string]bool{}
	match := newLogMatcher(req)
	since := req.Since
	if req.After.After(since) {
		since = req.After
	}
	penv := platform.Env{ID: env.ID, Project: env.Project, Name: env.Name}
	q := platform.LogQuery{App: req.App, Since: since, Until: req.Until, TailLines: LogPageLines, LimitBytes: LogPageBytes, Follow: true}
	err = lr.ReadLogs(ctx, penv, q, func(l platform.LogLine) error {
		if !match.inWindow(l) {
			return nil
		}
		if key := l.Pod + "/" + l.Container; !seen[key] || time.Since(made) > logMaskRefresh {
			// A new pod may run with values set since: read them again.
			if len(seen) > 0 || time.Since(made) > logMaskRefresh {
				nm, err := s.runtimeMasker(ctx, env.ID)
				if err != nil {
					return err
				}
				m, made = nm, time.Now()
			}
			seen[key] = true
		}
		if shown, ok := match.keep(m, l); ok {
			return emit(shown)
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil && apperr.CodeOf(err) == apperr.Internal {
		return platformLogError(m, req.App, err)
	}
	return err
}

// platformLogError is what a reader is told when the platform failed to
// hand over app's logs: its error in one sentence, masked (an error may
// quote what it read).
func platformLogError(m *mask.Masker, app string, err error) error {
	if apperr.CodeOf(err) != apperr.Internal {
		return err
	}
	return apperr.Errorf(apperr.Unavailable, "The logs of %s could not be read from the platform: %s", app, termsafe.Visible(m.Mask(err.Error())))
}

// sortContainers orders containers by pod, then container.
func sortContainers(cs []platform.LogContainer) {
	slices.SortFunc(cs, func(a, b platform.LogContainer) int {
		return cmp.Or(strings.Compare(a.Pod, b.Pod), strings.Compare(a.Container, b.Container))
	})
}

package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
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

// MaxDotenvBytes caps a pasted .env file.
const MaxDotenvBytes = 1 << 20

// Values shows an environment's values (any role: names, states, versions,
// who and when) and lets environment admins and installation admins set,
// import, delete and prune them. No handler here ever sees a stored value:
// it sends plaintext into the vault and gets names and versions back.
type Values struct {
	*Base
	Vault *store.Vault
}

// NewValues returns the values handlers.
func NewValues(b *Base, v *store.Vault) *Values { return &Values{Base: b, Vault: v} }

func (h *Values) vault() (*store.Vault, error) {
	if h.Vault == nil {
		return nil, fmt.Errorf("handlers: no value-encryption keyring configured")
	}
	return h.Vault, nil
}

// page builds the values page model of page 1 without a filter; form
// fields re-show a failed post.
func (h *Values) page(r *http.Request, env *store.Environment, role store.Role) (views.ValuesPage, error) {
	return h.listPage(r, env, role, url.Values{})
}

// listPage builds the values page model: the names the manifest references
// (a few, in Go) and then the orphaned ones, counted and read a page at a
// time in SQL, so that the page reads what it shows, not every stored
// value. query holds ?filter=, ?history=, ?page= and ?versions=.
func (h *Values) listPage(r *http.Request, env *store.Environment, role store.Role, query url.Values) (views.ValuesPage, error) {
	ctx := r.Context()
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return views.ValuesPage{}, err
	}
	referenced := store.ContractNames(shown.Contract)
	stored, err := h.DB.StoredValuesNamed(ctx, env.ID, referenced)
	if err != nil {
		return views.ValuesPage{}, err
	}
	m := views.ValuesPage{
		Chrome:    h.Chrome(r, "Values · "+env.Project+" / "+env.Name, "projects"),
		Project:   env.Project,
		Env:       env.Name,
		Revision:  shown.Revision.Number,
		CanManage: role.Includes(store.RoleAdmin),
	}
	uses := compiler.ValueUses(shown.Def)
	for _, s := range store.ValueStates(shown.Contract, stored) {
		m.Rows = append(m.Rows, valueRow(s, uses))
	}
	orphaned, err := h.DB.OrphanedValueCount(ctx, env.ID, referenced, "")
	if err != nil {
		return views.ValuesPage{}, err
	}
	m.OrphanedCount, m.Total = orphaned, len(m.Rows)+orphaned

	// The filter works without JavaScript as a GET form; the script
	// filters the same rows as one types.
	filter := ""
	if f := strings.TrimSpace(query.Get("filter")); f != "" {
		m.Filter, filter = f, f
		kept := m.Rows[:0]
		for _, row := range m.Rows {
			if strings.Contains(row.FilterText(), strings.ToLower(f)) {
				kept = append(kept, row)
			}
		}
		m.Rows = kept
	}
	// ?history=NAME shows that value alone with its earlier versions, a
	// page at a time.
	if n := query.Get("history"); store.ValidValueName(n) {
		kept := m.Rows[:0]
		for _, row := range m.Rows {
			if row.Name == n {
				kept = append(kept, row)
			}
		}
		m.Rows, m.History = kept, n
		if len(kept) == 0 && !slices.Contains(referenced, n) {
			one, err := h.DB.StoredValuesNamed(ctx, env.ID, []string{n})
			if err != nil {
				return views.ValuesPage{}, err
			}
			for _, sv := range one {
				m.Rows = append(m.Rows, valueRow(store.ValueState{Name: sv.Name, State: store.Orphaned, Stored: &sv}, uses))
			}
		}
		m.Matched = len(m.Rows)
		return m, h.pageOfValues(r, env, &m, query)
	}
	// The page's rows: the referenced ones first, then the orphaned ones
	// of the page, read from SQL by position among the orphaned names.
	// Without a filter, every orphaned value matches: counted above.
	matchedOrphans := orphaned
	if filter != "" {
		if matchedOrphans, err = h.DB.OrphanedValueCount(ctx, env.ID, referenced, filter); err != nil {
			return views.ValuesPage{}, err
		}
	}
	m.Matched = len(m.Rows) + matchedOrphans
	m.Page = 1
	if p, err := strconv.Atoi(query.Get("page")); err == nil && p > 1 && p <= (m.Matched+ValuesPageSize-1)/ValuesPageSize {
		m.Page = p
	}
	from := (m.Page - 1) * ValuesPageSize
	to := min(m.Matched, from+ValuesPageSize)
	m.More, m.From = to < m.Matched, from+1
	ref := m.Rows
	m.Rows = append([]views.ValueRow(nil), ref[min(from, len(ref)):min(to, len(ref))]...)
	if to > len(ref) {
		offset := max(from, len(ref)) - len(ref)
		orphans, err := h.DB.OrphanedValuesPage(ctx, env.ID, referenced, filter, offset, to-max(from, len(ref)))
		if err != nil {
			return views.ValuesPage{}, err
		}
		for i := range orphans {
			m.Rows = append(m.Rows, valueRow(store.ValueState{Name: orphans[i].Name, State: store.Orphaned, Stored: &orphans[i]}, uses))
		}
	}
	return m, h.pageOfValues(r, env, &m, query)
}

// valueRow is the values page's row of one state.
func valueRow(s store.ValueState, uses map[string][]string) views.ValueRow {
	row := views.ValueRow{Name: s.Name, Kind: string(s.State), State: string(s.State), Uses: uses[s.Name]}
	if s.State == store.OptionalDefault {
		row.State = "optional · default " + s.Default + " used"
		if s.Default == "" {
			row.State = "optional · default (empty) used"
		}
	}
	if s.Stored != nil {
		row.Set, row.Version, row.UpdatedBy, row.UpdatedAt = true, s.Stored.Version, s.Stored.UpdatedBy, s.Stored.UpdatedAt
	}
	return row
}

// ValuesPageSize is how many values one page of the values list shows;
// earlierInline is how many earlier versions, across a page, are listed
// with their restore buttons on it (more are a link to each value's
// history); HistoryPageSize is a history page's versions.
const (
	ValuesPageSize  = 50
	earlierInline   = 40
	HistoryPageSize = 50
)

// pageOfValues reads the earlier versions of m's rows (a page) only: their
// counts, the versions themselves when they are few, or one history page
// of m.History.
func (h *Values) pageOfValues(r *http.Request, env *store.Environment, m *views.ValuesPage, query url.Values) error {
	ctx := r.Context()
	if m.History != "" {
		m.Page, m.From = 1, 1
	}
	names := make([]string, len(m.Rows))
	for i, row := range m.Rows {
		names[i] = row.Name
	}
	counts, err := h.DB.EarlierValueVersionCounts(ctx, env.ID, names)
	if err != nil {
		return err
	}
	total := 0
	for i := range m.Rows {
		m.Rows[i].EarlierCount = counts[m.Rows[i].Name]
		total += m.Rows[i].EarlierCount
	}
	offset, limit := 0, earlierInline
	if m.History != "" {
		m.HistoryPage = 1
		if p, err := strconv.Atoi(query.Get("versions")); err == nil && p > 1 && p < 1_000_000 {
			m.HistoryPage = p
		}
		offset, limit = (m.HistoryPage-1)*HistoryPageSize, HistoryPageSize
	} else if total > earlierInline {
		return nil
	}
	earlier, err := h.DB.EarlierValueVersionsOf(ctx, env.ID, names, offset, limit)
	if err != nil {
		return err
	}
	for i := range m.Rows {
		row := &m.Rows[i]
		for _, e := range earlier[row.Name] {
			row.Earlier = append(row.Earlier, views.EarlierVersionView{Version: e.Version, SetBy: e.SetBy, SetAt: e.SetAt})
		}
		row.HistoryMore = m.History != "" && offset+len(row.Earlier) < row.EarlierCount
	}
	return nil
}

// ShowValuesPage lists the environment's values by state; ?name=X fills
// the set form's name.
func (h *Values) ShowValuesPage(w http.ResponseWriter, r *http.Request) error {
	env, role, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	query := r.URL.Query()
	m, err := h.listPage(r, env, role, query)
	if err != nil {
		return err
	}
	if n := query.Get("name"); store.ValidValueName(n) {
		m.SetName, m.FocusValue = n, true
	}
	return Render(w, r, http.StatusOK, views.Values(m))
}

// SetValue stores the posted value (fields name and value) as the next
// version of name. An empty value is a real empty string; a missing value
// field is an error.
func (h *Values) SetValue(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, role, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	vault, err := h.vault()
	if err != nil {
		return err
	}
	if err := ParseForm(r); err != nil {
		return err
	}
	name := strings.TrimSpace(r.PostForm.Get("name"))
	values, hasValue := r.PostForm["value"]
	rerender := func(nameErr, valueErr string) error {
		m, err := h.page(r, env, role)
		if err != nil {
			return err
		}
		// The name is kept as typed, even when invalid: it is no secret.
		m.SetName, m.SetNameError, m.SetValueError = name, nameErr, valueErr
		return Render(w, r, http.StatusUnprocessableEntity, views.Values(m))
	}
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	var value *string
	if hasValue {
		value = &values[0]
	}
	if field, p := valueInputProblem(shown.Contract, name, value); field == "name" {
		return rerender(p, "")
	} else if field == "value" {
		return rerender("", p)
	}
	// A name the manifest does not use would be stored only to be
	// ignored: ask first (the value is never sent back, so it is typed
	// again with the confirmation).
	if !store.References(shown.Contract, name) && r.PostForm.Get("confirm_orphan") != "1" {
		m, err := h.page(r, env, role)
		if err != nil {
			return err
		}
		m.SetName, m.ConfirmOrphan = name, true
		return Render(w, r, http.StatusOK, views.Values(m))
	}
	version, err := vault.SetValue(ctx, ActorOf(r), env, name, values[0])
	if err != nil {
		return err
	}
	if store.References(shown.Contract, name) {
		h.Flash(ctx, "success", fmt.Sprintf("Saved %s as version %d.", name, version))
	} else {
		h.Flash(ctx, "info", fmt.Sprintf("Saved %s as version %d. The manifest does not reference %s, so it is orphaned: deploys ignore it.", name, version, name))
	}
	return SeeOther(w, r, paths.Values(env.Project, env.Name))
}

// ImportValues stores the values of a pasted .env file (field dotenv) in
// one transaction and says which names changed and which were skipped.
func (h *Values) ImportValues(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, role, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	vault, err := h.vault()
	if err != nil {
		return err
	}
	var src string
	rerender := func(msg string) error {
		m, err := h.page(r, env, role)
		if err != nil {
			return err
		}
		m.ImportError = msg
		if dotenvHoldsNoValue(src) {
			m.ImportText = src
		}
		return Render(w, r, http.StatusUnprocessableEntity, views.Values(m))
	}
	src = r.FormValue("dotenv")
	if len(src) > MaxDotenvBytes {
		src = ""
		return rerender("The file is larger than 1 MiB.")
	}
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	entries, problems, err := dotenvEntries(src, shown.Contract)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		m, err := h.page(r, env, role)
		if err != nil {
			return err
		}
		m.ImportError = humanize.Count(len(problems), "problem", "problems") + " in the pasted file; nothing was changed:"
		m.ImportProblems = problems
		if dotenvHoldsNoValue(src) {
			m.ImportText = src
		}
		return Render(w, r, http.StatusUnprocessableEntity, views.Values(m))
	}
	if len(entries) == 0 {
		return rerender("Paste the contents of a .env file: lines of NAME=value.")
	}
	res, err := vault.ImportValues(ctx, ActorOf(r), env, shown.Contract, entries)
	if apperr.CodeOf(err) == apperr.Invalid {
		return rerender(apperr.Message(err) + " Nothing was changed.")
	}
	if err != nil {
		return err
	}
	var msg strings.Builder
	var changed []string
	for _, c := range res.Changed {
		changed = append(changed, fmt.Sprintf("%s (v%d)", c.Name, c.Version))
	}
	switch {
	case len(changed) > 0:
		fmt.Fprintf(&msg, "Imported: %s.", firstNames(changed))
	default:
		msg.WriteString("Imported: nothing changed.")
	}
	if len(res.Unchanged) > 0 {
		fmt.Fprintf(&msg, " Unchanged: %s.", firstNames(res.Unchanged))
	}
	kind := "success"
	if len(res.Skipped) > 0 {
		kind = "info"
		noun := "names"
		if len(res.Skipped) == 1 {
			noun = "name"
		}
		fmt.Fprintf(&msg, " Skipped %d %s the manifest does not reference: %s.", len(res.Skipped), noun, firstNames(res.Skipped))
	}
	h.Flash(ctx, kind, msg.String())
	return SeeOther(w, r, paths.Values(env.Project, env.Name))
}

// dotenvEntries reads a pasted .env file and lists every problem of it at
// once, by line, never quoting its text: what the parser finds, a value
// that cannot become an environment variable, and a name that matches a
// name of the manifest (c) only when case is ignored ("did you mean
// APP_DOMAIN?"). err is for what is not the file's fault.
func dotenvEntries(src string, c compiler.ValueContract) (entries []store.DotenvEntry, problems []string, err error) {
	entries, err = store.ParseDotenv(src)
	if de, ok := errors.AsType[*store.DotenvError](err); ok {
		problems = append(problems, de.Problems...)
	} else if apperr.CodeOf(err) == apperr.Invalid {
		return nil, []string{apperr.Message(err)}, nil
	} else if err != nil {
		return nil, nil, err
	}
	for _, en := range entries {
		if p := store.ValueProblem(en.Value); p != "" {
			problems = append(problems, fmt.Sprintf("Line %d, %s: %s", en.Line, en.Name, p))
		}
		if store.References(c, en.Name) {
			continue
		}
		if want := suggestName(c, en.Name); want != "" {
			problems = append(problems, fmt.Sprintf("Line %d: the manifest has no %s; did you mean %s?", en.Line, en.Name, want))
		}
	}
	// By line, as the file reads.
	slices.SortStableFunc(problems, func(a, b string) int { return problemLine(a) - problemLine(b) })
	return entries, problems, nil
}

// problemLine is the line a problem ("Line 3: …", "Line 3, NAME: …") is on,
// 0 for one about the whole file.
func problemLine(p string) int {
	rest, ok := strings.CutPrefix(p, "Line ")
	if !ok {
		return 0
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	n, _ := strconv.Atoi(rest[:max(end, 0)])
	return n
}

// suggestName is the name of contract c that name matches when case is
// ignored ("" when none, or when name is that name).
// valueInputProblem is the one check of a value a person sets, through
// the values page or the API: which field is wrong ("name" or "value", ""
// when neither) and why, in a sentence. A name that matches a name the
// manifest uses but for its case is given that name ("Did you mean
// APP_DOMAIN?"). value is nil when the request sent none.
func valueInputProblem(c compiler.ValueContract, name string, value *string) (field, problem string) {
	if p := store.ValueNameProblem(name); p != "" {
		if want := suggestName(c, name); want != "" {
			p += " Did you mean " + want + "?"
		}
		return "name", p
	}
	if value == nil {
		return "value", "The request sent no value field."
	}
	if p := store.ValueProblem(*value); p != "" {
		return "value", p
	}
	return "", ""
}

func suggestName(c compiler.ValueContract, name string) string {
	names := slices.Clone(c.Required)
	for n := range c.Optional {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if n != name && strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

// firstNames lists up to 20 names and counts the rest, so that the message
// of an import of thousands of lines stays readable (and small enough to
// keep in the session).
func firstNames(names []string) string {
	const shown = 20
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// ShowDeleteValuePage asks for confirmation before deleting one value.
func (h *Values) ShowDeleteValuePage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	stored, err := h.DB.StoredValues(ctx, env.ID)
	if err != nil {
		return err
	}
	for _, s := range stored {
		if s.Name == name {
			shown, err := h.shownRevision(ctx, env)
			if err != nil {
				return err
			}
			return Render(w, r, http.StatusOK, views.ValueDelete(views.ValueDeletePage{
				Chrome: h.Chrome(r, "Delete "+name, "projects"), Project: env.Project, Env: env.Name,
				Name: name, Version: s.Version, Required: slices.Contains(shown.Contract.Required, name),
			}))
		}
	}
	return apperr.Errorf(apperr.NotFound, "%s has no stored value in %s.", name, env.Name)
}

// DeleteValue deletes one value after confirmation.
func (h *Values) DeleteValue(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	vault, err := h.vault()
	if err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	version, err := vault.DeleteValue(r.Context(), ActorOf(r), env, name)
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", fmt.Sprintf("Deleted %s (version %d).", name, version))
	return SeeOther(w, r, paths.Values(env.Project, env.Name))
}

// RestoreValue stores a kept earlier version (field version) of the value
// as its next version (environment admins); it is audited as value.restored.
func (h *Values) RestoreValue(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	vault, err := h.vault()
	if err != nil {
		return err
	}
	if err := ParseForm(r); err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	version, err := strconv.ParseInt(r.PostForm.Get("version"), 10, 32)
	if err != nil || version < 1 {
		return apperr.Errorf(apperr.Invalid, "version must be the number of an earlier version of %s, such as 2.", name)
	}
	next, err := vault.RestoreValue(r.Context(), ActorOf(r), env, name, int(version))
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", fmt.Sprintf("Restored %s v%d as v%d. Deploy to use it.", name, version, next))
	return SeeOther(w, r, paths.Values(env.Project, env.Name))
}

// ShowPruneValuesPage lists the orphaned values and asks for confirmation.
func (h *Values) ShowPruneValuesPage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	stored, err := h.DB.StoredValues(ctx, env.ID)
	if err != nil {
		return err
	}
	var orphaned []string
	for _, s := range store.ValueStates(shown.Contract, stored) {
		if s.State == store.Orphaned {
			orphaned = append(orphaned, s.Name)
		}
	}
	return Render(w, r, http.StatusOK, views.ValuesPrune(views.ValuesPrunePage{
		Chrome: h.Chrome(r, "Prune values", "projects"), Project: env.Project, Env: env.Name, Names: orphaned,
	}))
}

// PruneValues deletes the orphaned values listed on the confirmation page
// (field names); a name referenced again meanwhile is kept.
func (h *Values) PruneValues(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	vault, err := h.vault()
	if err != nil {
		return err
	}
	if err := ParseForm(r); err != nil {
		return err
	}
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	pruned, err := vault.PruneValues(ctx, ActorOf(r), env, shown.Contract, r.PostForm["names"])
	if err != nil {
		return err
	}
	if len(pruned) == 0 {
		h.Flash(ctx, "info", "Nothing was pruned: none of those values is orphaned now.")
	} else {
		h.Flash(ctx, "success", fmt.Sprintf("Pruned %d orphaned %s: %s.", len(pruned), humanize.Plural(len(pruned), "value", "values"), strings.Join(pruned, ", ")))
	}
	return SeeOther(w, r, paths.Values(env.Project, env.Name))
}

// dotenvHoldsNoValue reports whether a pasted .env text holds no value at
// all (only blank lines, comments and names with nothing after "="), so
// that a failed import may show it again: anything else may hold secrets.
func dotenvHoldsNoValue(src string) bool {
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, after, ok := strings.Cut(line, "="); ok && strings.TrimSpace(after) != "" {
			return false
		}
	}
	return true
}

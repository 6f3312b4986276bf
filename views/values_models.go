package views

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/paths"
)

// ValuesPage is the model of an environment's values page. It holds names,
// states, versions, who and when: never a value.
type ValuesPage struct {
	Chrome   Chrome
	Project  string
	Env      string
	Revision int
	Rows     []ValueRow
	// Filter is the filter box's text; Total counts the rows before it,
	// Matched after it.
	Filter  string
	Total   int
	Matched int
	// Page is the page of the list shown (ValuesPageSize rows each); More
	// says there are more after it.
	Page int
	More bool
	// From is the position of the page's first row (1-based).
	From int
	// History names the value shown alone with its earlier versions,
	// HistoryPage the page of them.
	History     string
	HistoryPage int
	// OrphanedCount counts the orphaned names, for the prune action.
	OrphanedCount int
	// CanManage: environment admins set, import, delete and prune.
	CanManage bool
	// SetName re-shows the name of a failed set (never the value).
	SetName       string
	SetNameError  string
	SetValueError string
	ImportError   string
	// ImportProblems are every problem of a failed import, one a line.
	ImportProblems []string
	// ImportText re-shows a failed import only when it holds no value.
	ImportText string
	// FocusValue puts the cursor in the value field (after "Replace").
	FocusValue bool
	// ConfirmOrphan asks to confirm setting SetName, which the manifest
	// does not reference.
	ConfirmOrphan bool
}

// ValueRow is one value name and its state.
type ValueRow struct {
	Name string
	// State is one of "required · set", "required · missing",
	// "optional · default <value> used", "optional · set", "orphaned".
	State string
	// Kind is the machine state (store.ValueStateKind: "required · set", ...);
	// State is how it reads.
	Kind      string
	Set       bool
	Version   int
	UpdatedBy string
	UpdatedAt time.Time
	// Uses are the manifest fields that reference the name, such as
	// web.routes.public.domain.
	Uses []string
	// Earlier are the kept earlier versions, newest first, which an admin
	// may restore (never shown: by version, who and when only).
	// (listed when the page's are few, or on the value's history page);
	// EarlierCount counts them all, HistoryMore says the history goes on.
	Earlier      []EarlierVersionView
	EarlierCount int
	HistoryMore  bool
}

// EarlierVersionView is a kept earlier version of a value.
type EarlierVersionView struct {
	Version int
	SetBy   string
	SetAt   time.Time
}

// PageHref is the list's page p, with the filter kept.
func (m ValuesPage) PageHref(p int) string {
	q := url.Values{}
	if m.Filter != "" {
		q.Set("filter", m.Filter)
	}
	if p > 1 {
		q.Set("page", strconv.Itoa(p))
	}
	return withQuery(paths.Values(m.Project, m.Env), q)
}

// HistoryHref is page p of the earlier versions of name.
func (m ValuesPage) HistoryHref(name string, p int) string {
	q := url.Values{"history": {name}}
	if p > 1 {
		q.Set("versions", strconv.Itoa(p))
	}
	return withQuery(paths.Values(m.Project, m.Env), q) + "#values"
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// FilterText is what the filter box matches: the name and its uses.
func (v ValueRow) FilterText() string {
	return strings.ToLower(v.Name + " " + strings.Join(v.Uses, " "))
}

// ValueDeletePage confirms deleting one value.
type ValueDeletePage struct {
	Chrome   Chrome
	Project  string
	Env      string
	Name     string
	Version  int
	Required bool
}

// ValuesPrunePage confirms deleting the orphaned values it lists.
type ValuesPrunePage struct {
	Chrome  Chrome
	Project string
	Env     string
	Names   []string
}

// valueBadge colours a value's state.
func valueBadge(kind string) string {
	switch kind {
	case "required · set", "optional · set":
		return "badge-ok"
	case "required · missing":
		return "badge-danger"
	case "optional · default used":
		return "badge-info"
	}
	return "badge-warn"
}

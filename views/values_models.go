package views

import "time"

// ValuesPage is the model of an environment's values page. It holds names,
// states, versions, who and when: never a value.
type ValuesPage struct {
	Chrome   Chrome
	Project  string
	Env      string
	Revision int
	Rows     []ValueRow
	// Orphaned lists the orphaned names, for the prune action.
	Orphaned []string
	// CanManage: environment admins set, import, delete and prune.
	CanManage bool
	// SetName re-shows the name of a failed set (never the value).
	SetName       string
	SetNameError  string
	SetValueError string
	ImportError   string
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
	State     string
	Badge     string
	Set       bool
	Version   int
	UpdatedBy string
	UpdatedAt time.Time
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

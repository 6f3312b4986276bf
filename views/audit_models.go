package views

// AuditPage is the model of the audit log page.
type AuditPage struct {
	Chrome Chrome
	// Scope says whose events these are, in words.
	Scope        string
	Events       []AuditRow
	Environments []FilterOption
	// EnvironmentTyped, with more environments than a list can offer,
	// asks for the environment as project/environment text instead
	// (Environment holds it as typed).
	EnvironmentTyped bool
	Environment      string
	Actions          []FilterOption
	// Filtered is true when a filter is applied.
	Filtered bool
	// Person, From, To (dates, YYYY-MM-DD) and Text are the other filters as typed.
	Person, From, To, Text string
	// PrevURL is the newer page's link, NextURL the older one's, NewestURL
	// the first page's; "" where there is none.
	PrevURL   string
	NextURL   string
	NewestURL string
}

// AuditRow is one audit event as the page shows it.
type AuditRow struct {
	At    string
	AtISO string
	// Ago is the relative time, shown on hover.
	Ago   string
	Actor string
	// ActorNote says who acted when no user did ("anonymous visitor", "system").
	ActorNote string
	Action    string
	Where     string
	Target    string
	// TargetURL is the page of the run, revision or snapshot Target names,
	// or "".
	TargetURL string
	Details   []AuditDetail
	// RequestID ties the event to the server's log lines.
	RequestID string
}

// FilterOption is one choice of a filter's select.
type FilterOption struct {
	Value    string
	Label    string
	Selected bool
}

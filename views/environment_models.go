package views

// LatestRunsShown is how many of an environment's newest runs its page
// lists (and so how many the event hub reads with its events).
const LatestRunsShown = 5

// EnvironmentPage is the model of an environment's overview.
type EnvironmentPage struct {
	// ActiveRevisionID is the id of the revision the environment runs, 0
	// before its first deploy.
	ActiveRevisionID int64
	Chrome           Chrome
	Project          string
	Name             string
	// LastEventSeq is the environment's newest event when the page was
	// rendered: its live stream resumes after it.
	LastEventSeq int64
	State        string
	// Deleting is what became of the environment's deletion while it is
	// deleting (in progress, or why it did not finish), "" otherwise.
	Deleting string
	// OtherCluster says the active revision runs on another cluster or
	// platform than this Studio's (runs.Service.OtherCluster), "" if not.
	OtherCluster string
	Role         string
	// Revision is the revision shown: the one the environment runs, or the
	// latest before its first deploy (Deployed false).
	Revision     int
	RevisionHash string
	Deployed     bool
	Applications []ApplicationView
	Databases    []ServiceView
	Buckets      []ServiceView
	Values       ValuesSummary
	// CanManageValues: environment admins.
	CanManageValues bool
	// CanDeploy: deployers and admins (deploy, check now).
	CanDeploy bool
	// Services are the hostnames with a TLS state.
	Services []ServiceStateView
	// LatestRuns are the newest runs (at most LatestRunsShown).
	LatestRuns []RunView
	// Freeze is the freeze window open now (Frozen), with its countdown.
	Freeze FreezeForm
	// Converging is the revision a failed first deploy still converges to.
	Converging int
	// Backups is the schedule, last good snapshot and alarm (issue 13).
	Backups BackupStatusView
	// Live is the page's live header, notices and releases.
	Live EnvironmentLiveView
}

// ApplicationView is one application as the environment page shows it.
type ApplicationView struct {
	Name string
	// Source is "image REF" or "build CONTEXT (DOCKERFILE)".
	Source  string
	IsImage bool
	Ports   []string
	Routes  []RouteView
	// Replicas is "2" or "2–5"; Autoscaling "CPU 70%" or "".
	Replicas, Autoscaling string
}

// RouteView is one route with its hostnames resolved from the environment's values.
type RouteView struct {
	Name    string
	Domain  HostView
	Path    string
	Port    string
	TLS     string
	Aliases []HostView
}

// HostView is a hostname: the expression as written and, when every value it
// uses is set (or defaulted), the resolved name.
type HostView struct {
	Expression string
	Resolved   string
	// Missing names the values the hostname needs that are not set.
	Missing []string
	// NotAHostname is true when the values expand to something that is not
	// a hostname; Resolved is then empty and nothing of it is shown.
	NotAHostname bool
	// NotDeployed is true when the values it uses are set but the revision
	// shown is not the one active in the environment, so the hostname is
	// not resolved: only a deployed revision's hostnames are shown.
	NotDeployed bool
	// Planned: the environment runs nothing yet; Resolved is the hostname
	// the next deploy will serve (shown to deployers and admins).
	Planned bool
	// State is the hostname's TLS state (issued, DNS pending, cert failed ·
	// retry at ...); empty before its first deploy. Cert is the
	// certificate's state: deferred, issued or failed.
	State, Cert string
}

// ServiceView is a database or bucket with its settings as label/value pairs.
type ServiceView struct {
	Name     string
	Settings []Setting
	Route    *HostView
}

// Setting is one label and value.
type Setting struct {
	Label, Value string
}

// ValuesSummary counts an environment's values by state.
type ValuesSummary struct {
	Required    int
	RequiredSet int
	Missing     []string
	Optional    int
	OptionalSet int
	Orphaned    int
}

// certBadge colours a certificate's state.
func certBadge(cert string) string {
	switch cert {
	case "issued":
		return "badge-ok"
	case "failed":
		return "badge-danger"
	}
	return "badge-warn"
}

package views

import "time"

// RevisionPage is the model of one manifest revision's page.
type RevisionPage struct {
	Chrome    Chrome
	Project   string
	Number    int
	Hash      string
	CreatedBy string
	CreatedAt time.Time
	Latest    bool
	// RunBy names the environments that run this revision.
	RunBy []string
	// Previous and Next are the neighbouring revision numbers, 0 for none.
	Previous, Next int
	Source         ManifestSource
	// Comparisons are against the previous revision and against each
	// other revision an environment runs.
	Comparisons []RevisionComparison
}

// RevisionComparison is this revision against another one.
type RevisionComparison struct {
	// ID anchors the section ("against-2").
	ID string
	// Title says what is compared ("Against revision 2, the previous one").
	Title string
	// Note says what it means, e.g. what deploying would change.
	Note    string
	Against int
	Changes []ChangeView
	Diff    LineDiff
}

// ChangeView is one change of the compiled definition.
type ChangeView struct {
	Text        string
	Destructive bool
}

package views

// ErrorPage is the model of an error page (404, 403, 500 ...).
type ErrorPage struct {
	Chrome    Chrome
	Status    int
	Heading   string
	Message   string
	RequestID string
	// RetryURL, when set, offers to load the same address again (a page
	// that failed for a reason that may pass, such as a database outage).
	RetryURL string
}

package views

// ErrorPage is the model of an error page (404, 403, 500 ...).
type ErrorPage struct {
	Chrome    Chrome
	Status    int
	Heading   string
	Message   string
	RequestID string
}

package views

// LoginPage is the model of the sign-in page.
type LoginPage struct {
	Chrome       Chrome
	OIDCEnabled  bool
	LocalEnabled bool
	// Error says in words why the last sign-in failed.
	Error string
	// Notice says why the visitor was sent here (a form refused while
	// signed out).
	Notice string
	// OIDCStart is the link that starts an OIDC sign-in, carrying the page
	// to return to.
	OIDCStart string
}

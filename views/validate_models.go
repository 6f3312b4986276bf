package views

// ValidatePage is the model of the manifest validator page.
type ValidatePage struct {
	Chrome Chrome
	// Manifest is the text to show in the form, as it was pasted.
	Manifest string
	// Kind is the kind chosen in the form; "" detects it.
	Kind string
	// FileName is the name of the picked file, which helps detection.
	FileName string
	// InsecureSkipVerify is true when the form says the edge agent runs
	// with --insecure-skip-verify.
	InsecureSkipVerify bool
	// Report is nil until a manifest has been submitted.
	Report *ManifestReport
}

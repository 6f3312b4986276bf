package handlers

import (
	"net/http"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/views"
)

// Validate is the public manifest validator: paste a skali.yaml, see every
// diagnostic at its line and, for a valid manifest, what it compiles to.
// Nothing is stored and no sign-in is needed.
type Validate struct {
	*Base
}

// NewValidate returns the validator handlers.
func NewValidate(b *Base) *Validate { return &Validate{Base: b} }

// ShowValidatePage renders the empty validator form.
func (h *Validate) ShowValidatePage(w http.ResponseWriter, r *http.Request) error {
	return Render(w, r, http.StatusOK, views.Validate(views.ValidatePage{
		Chrome: h.Chrome(r, "Validate a manifest", "validate"),
	}))
}

// Validate compiles the posted manifest and re-renders the page with the
// verdict, the diagnostics, the annotated source and, when valid, the
// summary. The status follows `studio validate`'s exit code, so a script can
// read the verdict from it: 200 for a valid manifest (warnings included),
// 422 Unprocessable Content for an invalid one. Text over the compiler's
// 1 MiB limit is answered by the compiler's own diagnostic; a body over the
// web limit fails while parsing and becomes 413 in web.
func (h *Validate) Validate(w http.ResponseWriter, r *http.Request) error {
	if err := ParseForm(r); err != nil {
		return err
	}
	// Browsers send a text area's line breaks as CRLF; the manifest is
	// compiled and shown with the LF a file on disk would have.
	text := strings.ReplaceAll(r.PostForm.Get("manifest"), "\r\n", "\n")
	src := []byte(text)
	res := compiler.Compile(src)
	report := views.NewManifestReport(src, res)
	status := http.StatusOK
	if !report.Valid {
		status = http.StatusUnprocessableEntity
	}
	return Render(w, r, status, views.Validate(views.ValidatePage{
		Chrome:   h.Chrome(r, "Validate a manifest", "validate"),
		Manifest: text,
		Report:   &report,
	}))
}

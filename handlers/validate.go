package handlers

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
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
	text, err := validateSource(r)
	if err != nil {
		return err
	}
	// Browsers send a text area's line breaks as CRLF; the manifest is
	// compiled and shown with the LF a file on disk would have.
	text = strings.ReplaceAll(text, "\r\n", "\n")
	src := []byte(text)
	res := compiler.Compile("skali.yaml", src)
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

// validateSource returns the posted manifest: the chosen file (field
// manifest_file of a multipart post, which is how the form works without
// JavaScript) when one was sent, the text area (field manifest) otherwise.
// With JavaScript the picked file fills the text area and the file field is
// emptied, so what was edited is what is checked.
func validateSource(r *http.Request) (string, error) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if err := ParseForm(r); err != nil {
			return "", err
		}
		return r.PostForm.Get("manifest"), nil
	}
	if err := r.ParseMultipartForm(MaxManifestBytes); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return "", err
		}
		return "", store.Errorf(store.Invalid, "The form could not be read. Go back and send it again.")
	}
	f, fh, err := r.FormFile("manifest_file")
	if err != nil {
		return r.FormValue("manifest"), nil
	}
	defer f.Close()
	if fh.Size == 0 {
		return r.FormValue("manifest"), nil
	}
	// One byte over the compiler's limit is enough for its diagnostic.
	data, err := io.ReadAll(io.LimitReader(f, compiler.MaxManifestSize+1))
	if err != nil {
		return "", err
	}
	return string(data), nil
}

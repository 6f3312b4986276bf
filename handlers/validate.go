package handlers

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/kinds"
	"github.com/skali-dev/studio/views"
)

// Validate is the public manifest validator: paste a skali.yaml, a release
// manifest or secret schema, or an edge recipe or plan, see the kind it was
// recognised as, every diagnostic at its line and, for a valid document, a
// summary that fits its kind.
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
	text, picked, err := validateSource(r)
	if err != nil {
		return err
	}
	// Browsers send a text area's line breaks as CRLF; the manifest is
	// compiled and shown with the LF a file on disk would have.
	text = strings.ReplaceAll(text, "\r\n", "\n")
	src := []byte(text)
	// The kind is detected from the text and the picked file's name, unless
	// the form chose one; an unknown choice is detection too.
	opts := kinds.Options{InsecureSkipVerify: r.PostForm.Get("insecure_skip_verify") == "1"}
	if k, ok := kinds.Parse(r.PostForm.Get("kind")); ok {
		opts.Kind = k
	}
	fileName := r.PostForm.Get("filename")
	if fileName == "" {
		fileName = picked
	}
	if len(fileName) > 255 {
		fileName = ""
	}
	res := kinds.Validate(fileName, src, opts)
	report := views.NewKindReport(src, res)
	status := http.StatusOK
	if !report.Valid {
		status = http.StatusUnprocessableEntity
	}
	return Render(w, r, status, views.Validate(views.ValidatePage{
		Chrome:             h.Chrome(r, "Validate a manifest", "validate"),
		Manifest:           text,
		Kind:               string(opts.Kind),
		FileName:           fileName,
		InsecureSkipVerify: opts.InsecureSkipVerify,
		Report:             &report,
	}))
}

// validateSource returns the posted manifest: the chosen file (field
// manifest_file of a multipart post, which is how the form works without
// JavaScript) when one was sent, the text area (field manifest) otherwise.
// With JavaScript the picked file fills the text area and the file field is
// emptied, so what was edited is what is checked.
// picked is the chosen file's name, which helps to tell the kind apart.
func validateSource(r *http.Request) (text, picked string, err error) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if err := ParseForm(r); err != nil {
			return "", "", err
		}
		return r.PostForm.Get("manifest"), "", nil
	}
	if err := r.ParseMultipartForm(MaxManifestBytes); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return "", "", err
		}
		return "", "", apperr.Errorf(apperr.Invalid, "The form could not be read. Go back and send it again.")
	}
	f, fh, err := r.FormFile("manifest_file")
	if err != nil {
		return r.FormValue("manifest"), "", nil
	}
	defer f.Close()
	if fh.Size == 0 {
		return r.FormValue("manifest"), "", nil
	}
	// One byte over the compiler's limit is enough for its diagnostic.
	data, err := io.ReadAll(io.LimitReader(f, compiler.MaxManifestSize+1))
	if err != nil {
		return "", "", err
	}
	return string(data), fh.Filename, nil
}

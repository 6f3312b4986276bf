package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

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

// CheckRequest is the body of POST /validate/check: the editor's text and
// the choices of the form it belongs to.
type CheckRequest struct {
	Manifest string `json:"manifest"`
	// Kind forces a kind (see kinds.Parse); "" detects it.
	Kind               string `json:"kind"`
	FileName           string `json:"filename"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify"`
}

// CheckAnswer is the answer of POST /validate/check.
type CheckAnswer struct {
	Kind        string            `json:"kind"`
	KindLabel   string            `json:"kind_label"`
	Valid       bool              `json:"valid"`
	Errors      int               `json:"errors"`
	Warnings    int               `json:"warnings"`
	Diagnostics []CheckDiagnostic `json:"diagnostics"`
}

// CheckDiagnostic is one diagnostic with the range the editor underlines:
// from line:column to end_line:end_column (exclusive), 1-based, columns in
// characters (Unicode code points), as the compiler counts them.
type CheckDiagnostic struct {
	Severity  string `json:"severity"`
	Path      string `json:"path"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Message   string `json:"message"`
}

// maxCheckBody bounds a check's body: the largest manifest the compiler
// takes, JSON-escaped (a line break is two bytes), with room for the other
// fields. The compiler answers a longer text with its own diagnostic.
const maxCheckBody = 2*compiler.MaxManifestSize + 64<<10

// Check is the live editor's JSON endpoint: it runs the compiler on the
// posted text exactly as Validate does and answers every diagnostic with
// its range. Like the form it stores nothing and needs no sign-in; it sits
// behind the same cross-origin protection as every post, and takes only
// application/json, which a form on another site cannot send.
func (h *Validate) Check(w http.ResponseWriter, r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return answerCheck(w, http.StatusUnsupportedMediaType, checkRefusal{"Send the manifest as JSON (Content-Type: application/json)."}, nil)
	}
	// One pooled buffer carries the body in and the answer out: a check
	// runs at every pause in typing, and its fixed cost is what the editor
	// waits for beyond the compile (issue 26).
	buf := checkBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer putCheckBuffer(buf)
	if r.ContentLength > maxCheckBody {
		return answerCheck(w, http.StatusRequestEntityTooLarge, checkRefusal{checkTooLarge}, buf)
	}
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxCheckBody)); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return answerCheck(w, http.StatusRequestEntityTooLarge, checkRefusal{checkTooLarge}, buf)
		}
		return answerCheck(w, http.StatusBadRequest, checkRefusal{checkUnreadable}, buf)
	}
	src, req, err := decodeCheckRequest(buf.Bytes())
	if err != nil {
		return answerCheck(w, http.StatusBadRequest, checkRefusal{checkUnreadable}, buf)
	}
	if bytes.Contains(src, crlf) {
		src = bytes.ReplaceAll(src, crlf, lf)
	}
	// The answer needs the diagnostics alone, not a skali.yaml's
	// definition and hash.
	opts := kinds.Options{InsecureSkipVerify: req.InsecureSkipVerify, DiagnosticsOnly: true}
	if k, ok := kinds.Parse(req.Kind); ok {
		opts.Kind = k
	}
	fileName := req.FileName
	if len(fileName) > 255 {
		fileName = ""
	}
	began := time.Now()
	res := kinds.Validate(fileName, src, opts)
	// The compile's own time, for the browser's developer tools and the
	// benchmark that tells it apart from the exchange around it.
	w.Header().Set("Server-Timing", "compile;dur="+strconv.FormatFloat(float64(time.Since(began).Microseconds())/1000, 'f', 3, 64))
	return answerCheck(w, http.StatusOK, NewCheckAnswer(src, res), buf)
}

const (
	checkTooLarge   = "The manifest is too large to check; the limit is 1 MiB."
	checkUnreadable = "The request could not be read as JSON with a manifest field."
)

// checkRefusal is the endpoint's answer to a request it cannot check.
type checkRefusal struct {
	Error string `json:"error"`
}

var (
	crlf = []byte("\r\n")
	lf   = []byte("\n")
)

// checkBuffers holds the buffers checks read their body into and write
// their answer from.
var checkBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putCheckBuffer returns buf to the pool unless a large manifest grew it
// past what typical ones need: the pool would otherwise keep megabytes
// alive for the few.
func putCheckBuffer(buf *bytes.Buffer) {
	if buf.Cap() > 256<<10 {
		return
	}
	checkBuffers.Put(buf)
}

// NewCheckAnswer turns a validation result into the endpoint's answer.
func NewCheckAnswer(src []byte, res *kinds.Result) CheckAnswer {
	a := CheckAnswer{Kind: string(res.Kind), KindLabel: res.Kind.Label(), Valid: res.Valid(), Diagnostics: make([]CheckDiagnostic, 0, len(res.Diagnostics))}
	var starts []int // the offset in src where each line starts
	if len(res.Diagnostics) > 0 {
		starts = append(make([]int, 0, 64), 0)
		for i, c := range src {
			if c == '\n' {
				starts = append(starts, i+1)
			}
		}
	}
	for _, d := range res.Diagnostics {
		if d.Severity == compiler.SeverityError {
			a.Errors++
		} else {
			a.Warnings++
		}
		line, col := max(d.Line, 1), max(d.Column, 1)
		end := col + 1
		if line <= len(starts) {
			from, to := starts[line-1], len(src)
			if line < len(starts) {
				to = starts[line] - 1
			}
			end = views.MarkEnd(string(src[from:to]), col)
		}
		a.Diagnostics = append(a.Diagnostics, CheckDiagnostic{
			Severity: string(d.Severity), Path: d.Path, Line: line, Column: col,
			EndLine: line, EndColumn: end, Message: d.Message,
		})
	}
	return a
}

// answerCheck writes v as the JSON answer, encoded once into buf (the
// request's pooled buffer, free again once the body is decoded) so that the
// answer goes out with its length in one write.
func answerCheck(w http.ResponseWriter, status int, v any, buf *bytes.Buffer) error {
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// ServeSchema answers GET /schema/skali.json: the JSON Schema of skali.yaml
// (compiler.Schema), for editors with a YAML language server. It is
// documentation, public like the validator, and needs no session.
func ServeSchema(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/schema+json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(compiler.Schema())
}

package views_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/a-h/templ"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/views"
)

func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var b bytes.Buffer
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// element returns the outer HTML of the first element whose opening tag
// contains attr, found by counting nested tags of the same name.
func element(t *testing.T, html, tag, attr string) string {
	t.Helper()
	at := strings.Index(html, attr)
	if at < 0 {
		t.Fatalf("no element with %s", attr)
	}
	start := strings.LastIndex(html[:at], "<"+tag)
	depth, i := 0, start
	for i < len(html) {
		open := strings.Index(html[i:], "<"+tag)
		close := strings.Index(html[i:], "</"+tag+">")
		if close < 0 {
			break
		}
		if open >= 0 && open < close {
			depth++
			i += open + 1
			continue
		}
		depth--
		i += close + len("</"+tag+">")
		if depth == 0 {
			return html[start:i]
		}
	}
	t.Fatalf("unclosed <%s> with %s", tag, attr)
	return ""
}

const invalidSrc = `name: shop
applications:
  web:
    image: nginx
    build:
      arguments: {TOKEN: s3cr3t-build-arg}
    ports:
      http: {protocol: http}
    routes:
      public:
        domain: example.com
        port: http
        tls: automatc
`

func TestNewManifestReportInvalid(t *testing.T) {
	src := []byte(invalidSrc)
	r := views.NewManifestReport(src, compiler.Compile(src))
	if r.Valid || r.Summary != nil {
		t.Fatalf("Valid=%v Summary=%v, want an invalid report without summary", r.Valid, r.Summary)
	}
	if got, want := len(r.Source.Lines), 13; got != want {
		t.Fatalf("source lines = %d, want %d", got, want)
	}
	if r.Diagnostics.Errors == 0 || r.Diagnostics.Errors != len(r.Diagnostics.Items)-r.Diagnostics.Warnings {
		t.Errorf("counts: %d errors, %d warnings of %d", r.Diagnostics.Errors, r.Diagnostics.Warnings, len(r.Diagnostics.Items))
	}
	for _, d := range r.Diagnostics.Items {
		if d.Anchor != "L"+itoa(d.Line) {
			t.Errorf("diagnostic at line %d links to %q", d.Line, d.Anchor)
		}
		found := false
		for _, n := range r.Source.Lines[d.Line-1].Notes {
			found = found || n.Path == d.Path && n.Message == d.Message
		}
		if !found {
			t.Errorf("diagnostic %s %s is not under line %d", d.Where(), d.Path, d.Line)
		}
	}
	// The missing port is reported at its parent's key, line 8.
	if l := r.Source.Lines[7]; l.Severity != views.SeverityError || !strings.Contains(l.Notes[0].Message, "missing required field `port`") {
		t.Errorf("line 8 = %+v, want the missing port note", l)
	}
	tls := r.Source.Lines[12]
	var marked []string
	for _, s := range tls.Segments {
		if s.Mark != "" {
			marked = append(marked, s.Text)
		}
	}
	if tls.Text() != "        tls: automatc" || strings.Join(marked, "|") != "automatc" {
		t.Errorf("line 13 text %q marks %q, want the typo marked", tls.Text(), marked)
	}
}

func TestManifestReportViewInvalid(t *testing.T) {
	src := []byte(invalidSrc)
	r := views.NewManifestReport(src, compiler.Compile(src))
	html := render(t, views.ManifestReportView(r))

	verdict := element(t, html, "section", `class="verdict verdict-invalid"`)
	if !strings.Contains(verdict, r.Diagnostics.Headline()) || !strings.Contains(verdict, `href="#L`) {
		t.Errorf("verdict %s lacks the headline or a link to the first error", verdict)
	}
	list := element(t, html, "section", `class="card diagnostics-card"`)
	if got := strings.Count(list, "<li "); got != len(r.Diagnostics.Items) {
		t.Errorf("list has %d items, want %d", got, len(r.Diagnostics.Items))
	}
	if !strings.Contains(list, `data-count="errors">`+itoa(r.Diagnostics.Errors)+" error") {
		t.Errorf("list header lacks the error count")
	}
	for _, d := range r.Diagnostics.Items {
		for _, want := range []string{`href="#L` + itoa(d.Line) + `"`, ">" + d.Where() + "<", `<code class="path">` + d.Path + "</code>"} {
			if !strings.Contains(list, want) {
				t.Errorf("list lacks %s for %s", want, d.Path)
			}
		}
	}
	line := element(t, html, "div", `id="L13"`)
	for _, want := range []string{"has-error", `class="source-note error"`, "applications.web.routes.public.tls", `source-mark-error">automatc</mark>`} {
		if !strings.Contains(line, want) {
			t.Errorf("line 13 %s lacks %s", line, want)
		}
	}
	// A build argument is shown only in the source listing, as pasted.
	if n := strings.Count(html, "s3cr3t-build-arg"); n != 1 {
		t.Errorf("build argument appears %d times, want once (the source line)", n)
	}
}

func TestManifestReportViewValid(t *testing.T) {
	src := []byte(`name: shop
description: A small shop
applications:
  web:
    image: nginx:1.27
    environment:
      SECRET: "plain-secret-value"
      LEVEL: "${LOG_LEVEL:-info}"
    ports:
      http: {port: 8080}
    routes:
      public:
        domain: "${APP_DOMAIN}"
        port: http
        aliases: [www.example.com]
    scaling:
      replicas: {min: 2, max: 4}
      autoscaling: {cpu: {targetUtilization: 75}}
databases:
  data: {engine: postgres, version: 18, extensions: [citext, pgcrypto]}
buckets:
  files:
    visibility: public-read
    quotas: {storage: 5GB}
    route: {domain: files.example.com}
`)
	res := compiler.Compile(src)
	if !res.Valid() {
		t.Fatalf("fixture invalid: %v", res.Diagnostics)
	}
	r := views.NewManifestReport(src, res)
	if r.Summary == nil || r.Summary.Hash != res.Hash {
		t.Fatalf("summary %+v lacks hash %s", r.Summary, res.Hash)
	}
	html := render(t, views.ManifestReportView(r))
	summary := element(t, html, "section", `class="card summary-card"`)
	for _, want := range []string{
		"shop", "A small shop", `id="definition-hash">` + res.Hash + "<", `data-copy="definition-hash"`,
		"http 8080/http", "${APP_DOMAIN}", "www.example.com", "2–4", "CPU 75%",
		"postgres 18", "shared", "single", "citext", "pgcrypto",
		"files", "public-read", "5GB storage", "files.example.com",
		`data-value="required">APP_DOMAIN<`, `data-value="optional">LOG_LEVEL`, "&#34;info&#34;",
		// public-read is valid for validate but refused at deploy: a warning.
		"Warnings", "buckets.files.visibility",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if strings.Contains(summary, "plain-secret-value") || strings.Contains(summary, "SECRET") {
		t.Errorf("summary shows an environment value or name")
	}
	if v := element(t, html, "section", `class="verdict verdict-valid"`); !strings.Contains(v, plural(len(res.Warnings()), "warning")) {
		t.Errorf("verdict does not count the warning")
	}
}

func TestApplicationSummaryOfABuild(t *testing.T) {
	src := []byte("name: x\napplications:\n  web:\n    build: {context: ./web, target: runtime, arguments: {NPM_TOKEN: tok-123}}\n")
	res := compiler.Compile(src)
	r := views.NewManifestReport(src, res)
	if r.Summary == nil {
		t.Fatalf("fixture invalid: %v", res.Diagnostics)
	}
	html := render(t, views.ManifestSummary(*r.Summary))
	for _, want := range []string{"<code>web</code>", "<code>Dockerfile</code>", "<code>runtime</code>", "1 replica"} {
		if !strings.Contains(html, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if strings.Contains(html, "tok-123") || strings.Contains(html, "NPM_TOKEN") {
		t.Errorf("summary shows a build argument")
	}
}

func TestManifestSourceEdges(t *testing.T) {
	if s := views.NewManifestSource(nil, nil); s.Omitted || len(s.Lines) != 0 {
		t.Errorf("empty source = %+v", s)
	}
	big := bytes.Repeat([]byte("a"), compiler.MaxManifestSize+1)
	if s := views.NewManifestSource(big, nil); !s.Omitted || len(s.Lines) != 0 {
		t.Errorf("oversize source is listed")
	}
	// A diagnostic past the end of a line or of the text is kept in the
	// list but marks nothing.
	ds := []compiler.Diagnostic{{Severity: compiler.SeverityError, Line: 1, Column: 40, Message: "m"}, {Severity: compiler.SeverityError, Line: 9, Column: 1, Message: "n"}}
	s := views.NewManifestSource([]byte("a: b\r\n"), ds)
	if len(s.Lines) != 1 || s.Lines[0].Text() != "a: b" || len(s.Lines[0].Notes) != 1 {
		t.Errorf("source = %+v", s)
	}
	l := views.NewDiagnosticList([]byte("a: b\n"), ds)
	if l.Items[0].Anchor != "L1" || l.Items[1].Anchor != "" || l.Items[1].Href() != "" {
		t.Errorf("anchors = %q, %q", l.Items[0].Anchor, l.Items[1].Anchor)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// TestMarkSegmentsTOML: a TOML key is underlined up to its `=`.
func TestMarkSegmentsTOML(t *testing.T) {
	src := views.NewManifestSource([]byte(`memory_limit = "1G"`+"\n"), []compiler.Diagnostic{{Severity: compiler.SeverityError, Line: 1, Column: 1}})
	segs := src.Lines[0].Segments
	if len(segs) == 0 || segs[0].Text != "memory_limit" || segs[0].Mark != views.SeverityError {
		t.Errorf("got %+v, want memory_limit marked", segs)
	}
}

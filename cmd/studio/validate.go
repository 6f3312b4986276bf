package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/kinds"
	"github.com/skali-dev/studio/humanize"
)

const validateUsage = "usage: studio validate [--json] [--kind KIND] [--insecure-skip-verify] FILE... (use - for standard input)\n" +
	"  KIND is skali, release, release-secrets, recipe or plan; without --kind it is detected from the content and the file name.\n" +
	"  --insecure-skip-verify records that the edge agent runs with that flag, so a recipe's artifacts may omit sha256."

// validateReport is the JSON object printed per file by `studio validate --json`.
// hash and values belong to skali manifests; not_checked lists the rules of
// a release document that need the bundle's other files.
type validateReport struct {
	File        string                  `json:"file"`
	Kind        kinds.Kind              `json:"kind"`
	Valid       bool                    `json:"valid"`
	Hash        string                  `json:"hash,omitempty"`
	Diagnostics []compiler.Diagnostic   `json:"diagnostics"`
	NotChecked  []compiler.NotChecked   `json:"not_checked,omitempty"`
	Values      *compiler.ValueContract `json:"values,omitempty"`
}

// runValidate implements `studio validate [--json] FILE...`. It returns the
// exit status: 0 when every file is valid, 1 when any is invalid, 2 on a
// usage or I/O error (which wins over 1, because the answer is incomplete).
func runValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	asJSON := false
	var opts kinds.Options
	var files []string
	flagsDone := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case flagsDone || a == "-" || !strings.HasPrefix(a, "-"):
			files = append(files, a)
		case a == "--":
			flagsDone = true
		case a == "--json" || a == "-json":
			asJSON = true
		case a == "--insecure-skip-verify" || a == "-insecure-skip-verify":
			opts.InsecureSkipVerify = true
		case a == "--kind" || a == "-kind" || strings.HasPrefix(a, "--kind=") || strings.HasPrefix(a, "-kind="):
			_, v, hasValue := strings.Cut(a, "=")
			if !hasValue {
				if i+1 >= len(args) {
					fmt.Fprintf(stderr, "studio validate: --kind needs a value\n%s\n", validateUsage)
					return 2
				}
				i++
				v = args[i]
			}
			k, ok := kinds.Parse(v)
			if !ok {
				fmt.Fprintf(stderr, "studio validate: unknown kind %q\n%s\n", v, validateUsage)
				return 2
			}
			opts.Kind = k
		case a == "-h" || a == "--help" || a == "-help":
			fmt.Fprintln(stdout, validateUsage)
			return 0
		default:
			fmt.Fprintf(stderr, "studio validate: unknown flag %s\n%s\n", a, validateUsage)
			return 2
		}
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "studio validate: no manifest given\n"+validateUsage)
		return 2
	}

	status := 0
	stdinUsed := false
	var names []string
	var results []*kinds.Result
	for _, name := range files {
		src, err := readManifest(name, stdin, &stdinUsed)
		if err != nil {
			fmt.Fprintf(stderr, "studio validate: %s: %v\n", name, err)
			status = 2
			continue
		}
		names = append(names, name)
		results = append(results, kinds.Validate(name, src, opts))
	}
	// A secret schema's owner rule needs its manifest; decide it when both
	// are in this run.
	kinds.LinkSecretSchemas(names, results)

	reports := make([]validateReport, 0, len(results))
	var errCount, warnCount, invalid, unchecked int
	for i, res := range results {
		name := names[i]
		rep := validateReport{File: name, Kind: res.Kind, Valid: res.Valid(), Diagnostics: res.Diagnostics, NotChecked: res.NotChecked}
		if res.Skali != nil {
			rep.Hash = res.Skali.Hash
			rep.Values = &res.Skali.Values
		}
		if rep.Diagnostics == nil {
			rep.Diagnostics = []compiler.Diagnostic{}
		}
		reports = append(reports, rep)
		if !rep.Valid {
			invalid++
			if status == 0 {
				status = 1
			}
		}
		for _, d := range res.Diagnostics {
			if d.Severity == compiler.SeverityError {
				errCount++
			} else {
				warnCount++
			}
			if !asJSON {
				if d.Path == "" {
					fmt.Fprintf(stdout, "%s:%d:%d: %s: %s\n", name, d.Line, d.Column, d.Severity, d.Message)
				} else {
					fmt.Fprintf(stdout, "%s:%d:%d: %s: %s: %s\n", name, d.Line, d.Column, d.Severity, d.Path, d.Message)
				}
			}
		}
		unchecked += len(res.NotChecked)
		if !asJSON {
			for _, n := range res.NotChecked {
				fmt.Fprintf(stdout, "%s:%d:%d: note: %s: not checked: %s\n", name, n.Line, n.Column, n.Path, n.Message)
			}
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			fmt.Fprintf(stderr, "studio validate: %v\n", err)
			return 2
		}
		return status
	}
	summary := fmt.Sprintf("%s checked: %d valid, %d invalid; %s, %s",
		humanize.Count(len(reports), "file", "files"), len(reports)-invalid, invalid,
		humanize.Count(errCount, "error", "errors"), humanize.Count(warnCount, "warning", "warnings"))
	if unchecked > 0 {
		summary += fmt.Sprintf("; %s not checked from the file alone", humanize.Count(unchecked, "rule", "rules"))
	}
	fmt.Fprintln(stdout, summary)
	return status
}

// readManifest reads a file, or standard input for "-", refusing to read
// more than just over the compiler's limit so a huge file cannot exhaust
// memory; the compiler then reports the size.
func readManifest(name string, stdin io.Reader, stdinUsed *bool) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		if *stdinUsed {
			return nil, errors.New("standard input can be read only once")
		}
		*stdinUsed = true
		if stdin == nil {
			return nil, errors.New("no standard input")
		}
		r = stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, errors.New("is a directory")
		}
		r = f
	}
	return io.ReadAll(io.LimitReader(r, compiler.MaxManifestSize+1))
}

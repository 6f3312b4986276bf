package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/skali-dev/studio/compiler"
)

const validateUsage = "usage: studio validate [--json] FILE... (use - for standard input)"

// validateReport is the JSON object printed per file by `studio validate --json`.
type validateReport struct {
	File        string                 `json:"file"`
	Kind        string                 `json:"kind"`
	Valid       bool                   `json:"valid"`
	Hash        string                 `json:"hash,omitempty"`
	Diagnostics []compiler.Diagnostic  `json:"diagnostics"`
	Values      compiler.ValueContract `json:"values"`
}

// runValidate implements `studio validate [--json] FILE...`. It returns the
// exit status: 0 when every file is valid, 1 when any is invalid, 2 on a
// usage or I/O error (which wins over 1, because the answer is incomplete).
func runValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	asJSON := false
	var files []string
	flagsDone := false
	for _, a := range args {
		switch {
		case flagsDone || a == "-" || !strings.HasPrefix(a, "-"):
			files = append(files, a)
		case a == "--":
			flagsDone = true
		case a == "--json" || a == "-json":
			asJSON = true
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
	reports := make([]validateReport, 0, len(files))
	var errCount, warnCount, invalid int
	for _, name := range files {
		src, err := readManifest(name, stdin, &stdinUsed)
		if err != nil {
			fmt.Fprintf(stderr, "studio validate: %s: %v\n", name, err)
			status = 2
			continue
		}
		res := compiler.Compile(src)
		rep := validateReport{File: name, Kind: res.Kind, Valid: res.Valid(), Hash: res.Hash, Diagnostics: res.Diagnostics, Values: res.Values}
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
	fmt.Fprintf(stdout, "%s checked: %d valid, %d invalid; %s, %s\n",
		plural(len(reports), "file"), len(reports)-invalid, invalid,
		plural(errCount, "error"), plural(warnCount, "warning"))
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

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

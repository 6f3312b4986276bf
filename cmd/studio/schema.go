package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/skali-dev/studio/compiler"
)

const schemaUsage = "usage: studio schema [--kind skali]\n" +
	"  Prints the JSON Schema (draft 2020-12) of skali.yaml, generated from the compiler's own table of keys,\n" +
	"  for editors with a YAML language server: put `# yaml-language-server: $schema=URL` on a manifest's first line,\n" +
	"  where URL is this file or the Studio's /schema/skali.json."

// runSchema implements `studio schema [--kind KIND]`. Only skali.yaml has a
// schema: the release, recipe and plan kinds are checked by rules a schema
// would state only in part, so for them `studio validate` is the check.
func runSchema(args []string, stdout, stderr io.Writer) int {
	kind := "skali"
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-h" || a == "--help" || a == "-help":
			fmt.Fprintln(stdout, schemaUsage)
			return 0
		case a == "--kind" || a == "-kind":
			if i+1 >= len(args) {
				fmt.Fprintf(stderr, "studio schema: --kind needs a value\n%s\n", schemaUsage)
				return 2
			}
			i++
			kind = args[i]
		case strings.HasPrefix(a, "--kind=") || strings.HasPrefix(a, "-kind="):
			_, v, _ := strings.Cut(a, "=")
			kind = v
		default:
			fmt.Fprintf(stderr, "studio schema: unexpected argument %q\n%s\n", a, schemaUsage)
			return 2
		}
	}
	if kind != "skali" {
		fmt.Fprintf(stderr, "studio schema: there is a JSON Schema for skali only, not for %q; check the other kinds with studio validate --kind %s\n", kind, kind)
		return 2
	}
	if _, err := stdout.Write(compiler.Schema()); err != nil {
		fmt.Fprintf(stderr, "studio schema: %v\n", err)
		return 1
	}
	return 0
}

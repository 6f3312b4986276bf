// Command studio is Skali Studio: the web server (`studio serve`), the
// manifest validator (`studio validate`), migrations (`studio migrate`) and
// administration commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `Skali Studio: manifests, values, deploys and backups of Skali environments.

usage: studio COMMAND [flags]

commands:
  serve        run the web server (starts a private PostgreSQL when DATABASE_URL is not set)
  validate     check skali.yaml files: studio validate [--json] FILE...
  schema       print the JSON Schema of skali.yaml for editors: studio schema --kind skali
  migrate      apply database migrations and exit
  login-link   print a fresh one-time sign-in link for the local administrator
  keys         value-encryption keys: studio keys generate | studio keys rotate
  deploy       start a deploy through the API and follow it: studio deploy --url URL --project P --env E --wait
  values       import a .env file through the API: studio values import --url URL --project P --env E FILE
  status       what runs now, as the platform reports it: studio status --url URL --project P --env E
  runs         follow a run through the API: studio runs watch RUN_URL

Run 'studio COMMAND --help' for the flags of a command.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	if cmd == "validate" {
		return runValidate(rest, stdin, stdout, stderr)
	}
	if cmd == "schema" {
		return runSchema(rest, stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "deploy":
		return runDeploy(ctx, rest, stdin, stdout, stderr)
	case "values":
		return runValues(ctx, rest, stdin, stdout, stderr)
	case "runs":
		return runRuns(ctx, rest, stdin, stdout, stderr)
	case "status":
		return runStatus(ctx, rest, stdout, stderr)
	}
	var err error
	switch cmd {
	case "serve":
		err = runServe(stopWithGoRun(ctx), rest, stdout, stderr)
	case "migrate":
		err = runMigrate(ctx, rest, stdout, stderr)
	case "login-link":
		err = runLoginLink(ctx, rest, stdout, stderr)
	case "keys":
		err = runKeys(ctx, rest, stdout, stderr)
	case "volume-agent":
		err = runVolumeAgent(ctx, rest, stdin, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "studio: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "studio %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

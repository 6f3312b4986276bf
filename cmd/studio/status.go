package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"

	"github.com/skali-dev/studio/api"
)

// runStatus implements `studio status --url URL --project P --env E`:
// what the platform last reported of what the environment runs. Exit 0
// when healthy, 1 when degraded, down or unknown (nothing reported), 2
// refused or bad usage.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const usage = "usage: studio status [--json] --url URL --project P --env E\n\nPrints what the platform last reported of what the environment runs, with the\ntoken in STUDIO_TOKEN (a viewer's is enough).\nexit status: 0 healthy, 1 degraded, down or nothing reported, 2 refused or bad usage.\n"
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", envDefault("STUDIO_URL", ""), "the Studio's address (STUDIO_URL)")
	project := fs.String("project", "", "the project")
	env := fs.String("env", "", "the environment")
	asJSON := fs.Bool("json", false, "print the API's answer as it is")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitRefused
	}
	if *base == "" || *project == "" || *env == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, usage)
		return exitRefused
	}
	c, err := newAPIClient(*base)
	if err != nil {
		fmt.Fprintf(stderr, "studio status: %v\n", err)
		return exitRefused
	}
	var h api.Health
	path := "/api/v1/projects/" + url.PathEscape(*project) + "/environments/" + url.PathEscape(*env) + "/health"
	if err := c.call(ctx, "GET", path, nil, &h); err != nil {
		fmt.Fprintf(stderr, "studio status: %v\n", err)
		if refused(err) {
			return exitRefused
		}
		return exitFailed
	}
	if *asJSON {
		b, _ := json.MarshalIndent(h, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "%s/%s: %s\n", h.Project, h.Environment, h.Level)
		if h.Note != "" {
			fmt.Fprintln(stdout, h.Note)
		}
		for _, a := range h.Applications {
			line := fmt.Sprintf("  %s: %s, %d of %d ready, %d %s in the last hour", a.Name, a.State, a.Ready, a.Desired, a.Restarts, plural(a.Restarts, "restart", "restarts"))
			if a.Since != nil {
				line += ", since " + a.Since.UTC().Format("2006-01-02 15:04:05 UTC")
			}
			if a.Reason != "" {
				line += ": " + a.Reason
			}
			fmt.Fprintln(stdout, line)
		}
		for _, d := range h.Databases {
			fmt.Fprintf(stdout, "  database %s: %s\n", d.Name, d.Phase)
		}
		for _, b := range h.Buckets {
			fmt.Fprintf(stdout, "  bucket %s: %s\n", b.Name, b.Phase)
		}
	}
	if h.Level == "healthy" {
		return 0
	}
	return exitFailed
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

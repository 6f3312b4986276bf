package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/api"
	"github.com/skali-dev/studio/termsafe"
)

// Exit statuses of `studio deploy --wait` and `studio runs watch`.
const (
	exitSucceeded    = 0
	exitFailed       = 1
	exitRefused      = 2
	exitWithWarnings = 3
	// exitApprovalTimeout: the run still waited for approval when
	// --approval-timeout ran out (the run goes on waiting).
	exitApprovalTimeout = 4
)

const deployUsage = `usage: studio deploy --url URL --project P --env E [--revision N | --manifest skali.yaml | --release RUN] [--confirm NAME] [--confirm-public-value NAME] [--redeploy] [--wait] [--json]

Starts a deploy through the Studio's JSON API with the token in STUDIO_TOKEN
(a deployer's or an admin's token of the environment). With --manifest, the
file is added as the project's next revision first (nothing is added when it
compiles to the latest revision); a deployer's token may add it. With --release,
it rolls back to that earlier successful deploy (its run number): its
revision and the versions of the values it used. With --wait, it
follows the run and prints each checkpoint as it changes.

Interrupted (Ctrl-C, SIGINT or SIGTERM) while following: on a terminal it
asks whether to cancel the run; without a terminal (a CI job being
cancelled) it asks the Studio to cancel the run at once, says so and exits
1 without waiting for the run to stop.

A deploy of a protected environment waits for approval first: --wait
prints "waiting for approval (1 of 2: ...)" as approvals arrive and keeps
waiting; --approval-timeout D gives up after D (exit 4, the run waits on).

--confirm-public-value publishes, in a hostname, a value the project also
uses outside hostnames: only an admin's token of the environment may (a
deployer's token is refused, exit 2), and only once per version of the
value: later deploys of that version need nothing more.

exit status: 0 succeeded, 3 succeeded with warnings (routes deferred),
1 failed, cancelled or rejected, 2 refused or bad usage, 4 still waiting
for approval after --approval-timeout.
`

// apiClient calls the Studio's JSON API with a bearer token.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// apiError is a problem document the API answered with.
type apiError struct{ api.Problem }

func (e *apiError) Error() string {
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	// A refusal the CLI can answer with a flag names the flag.
	switch flag := map[string]string{"confirm": "--confirm", "confirm_public_value": "--confirm-public-value",
		"public_value": "--confirm-public-value, with an admin's token", "redeploy": "--redeploy",
		"revision": "--revision", "release": "--release", "manifest": "--manifest"}[e.Field]; {
	case e.Field == "":
	case flag != "":
		msg += " (flag " + flag + ")"
	default:
		msg += " (field " + e.Field + ")"
	}
	return msg
}

// refused reports whether the Studio refused the request (as opposed to
// failing or being unreachable), or answered with a redirect the CLI does
// not follow (--url is not the Studio's own address): exit status 2.
func refused(err error) bool {
	var ae *apiError
	var re *redirectError
	return errors.As(err, &re) || errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusTooManyRequests
}

func newAPIClient(base string) (*apiClient, error) {
	token := strings.TrimSpace(os.Getenv("STUDIO_TOKEN"))
	if token == "" {
		return nil, errors.New("set STUDIO_TOKEN to an API token (create one on the Studio's Tokens page)")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url must be the Studio's address, such as https://studio.example.com")
	}
	base = u.Scheme + "://" + u.Host
	return &apiClient{base: base, token: token, http: &http.Client{Timeout: 30 * time.Second, CheckRedirect: refuseRedirect(base)}}, nil
}

// redirectError is a redirect the CLI refused to follow.
type redirectError struct{ base, to string }

func (e *redirectError) Error() string {
	return fmt.Sprintf("the Studio at %s answered with a redirect to %s; refusing to follow (a redirect never carries the token)", e.base, e.to)
}

// refuseRedirect is the CheckRedirect of the CLI's client: no redirect is
// followed, so the token (and a request's body) goes to the Studio at base
// alone, never to where a redirect points. The error names where it
// pointed by scheme and host only (its path and query may carry anything).
func refuseRedirect(base string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, _ []*http.Request) error {
		return &redirectError{base: base, to: termsafe.Visible(req.URL.Scheme + "://" + req.URL.Host)}
	}
}

// serverError is an error whose text may quote what the server sent (a
// malformed answer, a transport failure): its text is made visible.
type serverError struct{ err error }

func (e serverError) Error() string { return termsafe.Visible(e.err.Error()) }
func (e serverError) Unwrap() error { return e.err }

// visibleJSON returns the JSON document data with every string in it (keys
// included) as termsafe.Visible writes it: what the CLI decodes from the
// Studio, and so everything it prints of it (checkpoint names, reasons,
// warnings, errors, addresses, in text and in --json), carries no byte a
// terminal would act on.
func visibleJSON(data []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			return termsafe.Visible(v)
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[termsafe.Visible(k)] = walk(e)
			}
			return out
		}
		return v
	}
	return json.Marshal(walk(doc))
}

// call sends body (JSON, when not nil) and decodes a 2xx answer into out.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if re := (*redirectError)(nil); errors.As(err, &re) {
			return re
		}
		return serverError{err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return serverError{err}
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// A 3xx without a Location (refuseRedirect sees the others).
		return &redirectError{base: c.base, to: "nowhere (" + termsafe.Visible(resp.Status) + ")"}
	}
	if resp.StatusCode >= 400 {
		ae := &apiError{api.Problem{Status: resp.StatusCode}}
		if v, err := visibleJSON(data); err != nil || json.Unmarshal(v, ae) != nil || ae.Status == 0 {
			ae.Status, ae.Title = resp.StatusCode, termsafe.Visible(resp.Status)
		}
		return ae
	}
	if out != nil {
		v, err := visibleJSON(data)
		if err != nil {
			return serverError{err}
		}
		return json.Unmarshal(v, out)
	}
	return nil
}

// apiRun is a run as the API answers it.
type apiRun struct{ api.Run }

// name is how the run is named to people: "#12", counted per environment
// (the id from a Studio older than the numbering).
func (r *apiRun) name() string {
	if r.Number > 0 {
		return "#" + strconv.Itoa(r.Number)
	}
	return strconv.FormatInt(r.ID, 10)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// follower prints a run's checkpoints as they change.
type follower struct {
	c        *apiClient
	out      io.Writer
	errOut   io.Writer
	stdin    io.Reader
	asJSON   bool
	terminal bool
	// interactive: Ctrl-C asks on the terminal whether to cancel the run.
	interactive bool
	// cancelOnInterrupt: without a terminal, an interrupt cancels the run
	// (the deploy this command started; `runs watch` only stops following).
	cancelOnInterrupt bool
	poll              time.Duration
	seen              map[int]string
	// approvalTimeout, when positive, is how long a run may wait for
	// approval before the command gives up (exit 4); lastApproval is the
	// approval line printed last.
	approvalTimeout time.Duration
	lastApproval    string
}

// approvalLine says what a waiting run waits for: "waiting for approval
// (1 of 2: approved by Bob; may approve: Bob, Carol)".
func approvalLine(run *apiRun) string {
	a := run.Approval
	if a == nil {
		return ""
	}
	s := fmt.Sprintf("waiting for approval (%d of %d: ", a.Approvals, a.Needed)
	if len(a.Approved) > 0 {
		s += "approved by " + strings.Join(a.Approved, ", ") + "; "
	}
	s += "may approve: " + strings.Join(a.Approvers, ", ") + ")"
	if len(a.Changed) > 0 {
		s += "; earlier approvals void: " + strings.Join(a.Changed, "; ")
	}
	return termsafe.Visible(s)
}

func (f *follower) emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(f.out, string(b))
}

func symbol(status string) string {
	switch status {
	case "succeeded":
		return "✓"
	case "failed":
		return "✗"
	case "running":
		return "…"
	case "waiting":
		return "⏸"
	case "skipped":
		return "-"
	}
	return "·"
}

// show prints what changed since the last look at run.
func (f *follower) show(run *apiRun) {
	for _, cp := range run.Checkpoints {
		if f.seen[cp.Position] == cp.Status {
			continue
		}
		if cp.Status == "pending" && f.seen[cp.Position] == "" {
			f.seen[cp.Position] = cp.Status
			continue
		}
		f.seen[cp.Position] = cp.Status
		note := cp.Warning
		if cp.Error != "" {
			note = cp.Error
		}
		switch {
		case f.asJSON:
			ev := map[string]any{"event": "checkpoint", "run": run.ID, "position": cp.Position, "name": cp.Name, "status": cp.Status}
			if cp.Warning != "" {
				ev["warning"] = cp.Warning
			}
			if cp.Error != "" {
				ev["error"] = cp.Error
			}
			f.emit(ev)
		case f.terminal:
			// One progress line per checkpoint: rewritten while it runs,
			// kept once it is done.
			line := fmt.Sprintf("\r\033[K%s %d/%d %s · %s", symbol(cp.Status), cp.Position, len(run.Checkpoints), cp.Name, cp.Status)
			if note != "" {
				line += " · " + note
			}
			if cp.Status == "running" || cp.Status == "waiting" {
				fmt.Fprint(f.out, line)
			} else {
				fmt.Fprintln(f.out, line)
			}
		default:
			line := fmt.Sprintf("checkpoint %d/%d %s: %s", cp.Position, len(run.Checkpoints), cp.Name, cp.Status)
			if note != "" {
				line += " (" + note + ")"
			}
			fmt.Fprintln(f.out, line)
		}
	}
}

// follow polls the run at apiPath until it finishes and returns the exit
// status its outcome means.
func (f *follower) follow(ctx context.Context, apiPath string) int {
	f.seen = map[int]string{}
	interrupted := ctx.Done()
	bg := context.Background()
	var waitingSince time.Time
	for {
		var run apiRun
		if err := f.c.call(bg, "GET", apiPath, nil, &run); err != nil {
			fmt.Fprintf(f.errOut, "studio: read the run: %v\n", err)
			if refused(err) {
				return exitRefused
			}
			return exitFailed
		}
		if line := approvalLine(&run); line != "" {
			if line != f.lastApproval {
				f.lastApproval = line
				if f.asJSON {
					f.emit(map[string]any{"event": "waiting_for_approval", "run": run.ID, "approvals": run.Approval.Approvals, "needed": run.Approval.Needed, "url": run.URL})
				} else {
					fmt.Fprintln(f.out, line)
				}
			}
			if waitingSince.IsZero() {
				waitingSince = time.Now()
			}
			if f.approvalTimeout > 0 && time.Since(waitingSince) >= f.approvalTimeout {
				if f.asJSON {
					f.emit(map[string]any{"event": "approval_timeout", "run": run.ID, "url": run.URL, "exit": exitApprovalTimeout})
				} else {
					fmt.Fprintf(f.out, "Still waiting for approval after %s; the run goes on waiting: %s\n", f.approvalTimeout, run.URL)
				}
				return exitApprovalTimeout
			}
		} else {
			waitingSince = time.Time{}
			if run.Status == "waiting" && strings.HasPrefix(run.Reason, "Frozen until ") && run.Reason != f.lastApproval {
				// A deploy started in a freeze window (or approved in one):
				// it starts at its end.
				f.lastApproval = run.Reason
				if f.asJSON {
					f.emit(map[string]any{"event": "frozen", "run": run.ID, "reason": run.Reason, "url": run.URL})
				} else {
					fmt.Fprintln(f.out, run.Reason+": the deploy starts then")
				}
			} else if run.Status == "waiting" && strings.HasPrefix(run.Reason, "Approved: starts at ") && run.Reason != f.lastApproval {
				// Approved, waiting for the rule's wait after approval.
				f.lastApproval = run.Reason
				if f.asJSON {
					f.emit(map[string]any{"event": "approved", "run": run.ID, "reason": run.Reason, "url": run.URL})
				} else {
					fmt.Fprintln(f.out, termsafe.Visible(run.Reason))
				}
			}
		}
		f.show(&run)
		if run.Finished {
			return f.finish(&run)
		}
		select {
		case <-time.After(f.poll):
		case <-interrupted:
			interrupted = nil
			if !f.interactive && f.cancelOnInterrupt {
				return f.cancelNow(apiPath, &run)
			}
			if !f.askCancel(bg, apiPath, &run) {
				fmt.Fprintf(f.out, "\nStopped following; the run goes on: %s\n", run.URL)
				return exitFailed
			}
		}
	}
}

// cancelNow asks the Studio to cancel the run (within 5 seconds: a CI
// runner kills a cancelled job soon after its SIGINT) and exits 1 at once.
func (f *follower) cancelNow(apiPath string, run *apiRun) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := f.c.call(ctx, "POST", apiPath+"/cancel", nil, nil)
	switch {
	case f.asJSON:
		ev := map[string]any{"event": "interrupted", "run": run.ID, "url": run.URL, "cancel_requested": err == nil}
		if err != nil {
			ev["error"] = err.Error()
		}
		f.emit(ev)
	case err != nil:
		fmt.Fprintf(f.out, "\nInterrupted. Could not cancel run %s: %v\n%s\n", run.name(), err, run.URL)
	default:
		fmt.Fprintf(f.out, "\nInterrupted: asked run %s to cancel; it stops at its next safe point.\n%s\n", run.name(), run.URL)
	}
	return exitFailed
}

// askCancel asks on the terminal whether to cancel the run, and does.
func (f *follower) askCancel(ctx context.Context, apiPath string, run *apiRun) bool {
	if !f.interactive {
		return false
	}
	fmt.Fprintf(f.out, "\nCancel run %s? It stops at its next safe point. [y/N] ", run.name())
	answer, _ := bufio.NewReader(f.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return false
	}
	if err := f.c.call(ctx, "POST", apiPath+"/cancel", nil, nil); err != nil {
		fmt.Fprintf(f.out, "Could not cancel: %v\n", err)
		return false
	}
	fmt.Fprintln(f.out, "Cancelling; following the run until it stops.")
	return true
}

func (f *follower) finish(run *apiRun) int {
	code := exitFailed
	switch run.Status {
	case "succeeded":
		code = exitSucceeded
	case "succeeded-with-warnings":
		code = exitWithWarnings
	}
	if f.asJSON {
		ev := map[string]any{"event": "finished", "run": run.ID, "number": run.Number, "status": run.Status, "url": run.URL, "exit": code}
		if run.Reason != "" {
			ev["reason"] = run.Reason
		}
		f.emit(ev)
		return code
	}
	switch code {
	case exitSucceeded:
		fmt.Fprintf(f.out, "Run %s succeeded: %s\n", run.name(), run.URL)
	case exitWithWarnings:
		fmt.Fprintf(f.out, "Run %s succeeded with warnings (%d deferred): %s\n", run.name(), run.Deferred, run.URL)
	default:
		reason := ""
		if run.Reason != "" {
			reason = ": " + run.Reason
		}
		fmt.Fprintf(f.out, "Run %s %s%s\n%s\n", run.name(), run.Status, reason, run.URL)
	}
	return code
}

// envDefault returns the environment variable name, or def when it is unset.
func envDefault(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// runDeploy implements `studio deploy`.
func runDeploy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, deployUsage); fs.PrintDefaults() }
	base := fs.String("url", envDefault("STUDIO_URL", ""), "the Studio's address (STUDIO_URL)")
	project := fs.String("project", "", "the project")
	env := fs.String("env", "", "the environment")
	revision := fs.Int("revision", 0, "the revision to deploy (default: the latest, or the one --manifest adds)")
	manifest := fs.String("manifest", "", "a skali.yaml to add as the next revision before deploying (deployers and admins)")
	confirm := fs.String("confirm", "", "the environment's name, typed, for a deploy that deletes or replaces something")
	confirmPublic := fs.String("confirm-public-value", "", "the environment's name, typed, to publish a value in a hostname: an admin's token only, once per version of the value")
	redeploy := fs.Bool("redeploy", false, "deploy the active revision again")
	release := fs.Int64("release", 0, "roll back to the release of this earlier successful deploy (its run number)")
	wait := fs.Bool("wait", false, "follow the run until it finishes; the exit status says how it ended")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	poll := fs.Duration("poll", time.Second, "how often to read the run while following it")
	approvalTimeout := fs.Duration("approval-timeout", 0, "with --wait: give up (exit 4) when the run still waits for approval after this long (0: keep waiting)")
	freezeOverride := fs.String("freeze-override", "", "installation admins: deploy during a freeze window, for this reason (audited)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitRefused
	}
	if *base == "" || *project == "" || *env == "" || fs.NArg() > 0 || (*revision != 0 && *manifest != "") || *revision < 0 ||
		*release < 0 || (*release > 0 && (*revision != 0 || *manifest != "" || *redeploy)) {
		fmt.Fprint(stderr, deployUsage)
		return exitRefused
	}
	c, err := newAPIClient(*base)
	if err != nil {
		fmt.Fprintf(stderr, "studio deploy: %v\n", err)
		return exitRefused
	}
	say := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	fail := func(what string, err error) int {
		var ae *apiError
		if errors.As(err, &ae) {
			fmt.Fprintf(stderr, "studio deploy: %s: %s\n", what, ae.Error())
			for _, d := range ae.Diagnostics {
				fmt.Fprintf(stderr, "%s:%d:%d: %s: %s: %s\n", *manifest, d.Line, d.Column, d.Severity, d.Path, d.Message)
			}
		} else {
			fmt.Fprintf(stderr, "studio deploy: %s: %v\n", what, err)
		}
		if refused(err) {
			return exitRefused
		}
		return exitFailed
	}
	projectPath := "/api/v1/projects/" + url.PathEscape(*project)
	envPath := projectPath + "/environments/" + url.PathEscape(*env)
	rev := *revision
	if *manifest != "" {
		src, err := os.ReadFile(*manifest)
		if err != nil {
			fmt.Fprintf(stderr, "studio deploy: %v\n", err)
			return exitRefused
		}
		var added api.Revision
		if err := c.call(ctx, "POST", projectPath+"/revisions", api.ManifestBody{Manifest: string(src)}, &added); err != nil {
			return fail("add the revision", err)
		}
		rev = added.Number
		if added.Unchanged {
			say("Revision %d unchanged: %s compiles to the same definition.", rev, *manifest)
		} else {
			say("Added revision %d: %s", rev, added.Summary)
		}
	}
	body := api.DeployBody{Revision: max(rev, 0), Confirm: *confirm, Redeploy: *redeploy, ConfirmPublicValue: *confirmPublic,
		Release: max(*release, 0), FreezeOverride: *freezeOverride}
	var run apiRun
	if err := c.call(ctx, "POST", envPath+"/deploys", body, &run); err != nil {
		return fail("start the deploy", err)
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"event": "started", "run": run.ID, "number": run.Number, "url": run.URL})
		fmt.Fprintln(stdout, string(b))
	} else {
		say("Deploy run %s of %s/%s started: %s", run.name(), *project, *env, run.URL)
	}
	if !*wait {
		return exitSucceeded
	}
	f := &follower{c: c, out: stdout, errOut: stderr, stdin: stdin, asJSON: *asJSON, terminal: isTerminal(stdout), interactive: isTerminal(stdin) && isTerminal(stdout), poll: *poll,
		cancelOnInterrupt: true, approvalTimeout: *approvalTimeout}
	return f.follow(ctx, envPath+"/runs/"+strconv.FormatInt(run.ID, 10))
}

// runRuns implements `studio runs watch RUN_URL`.
func runRuns(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const usage = "usage: studio runs watch [--json] RUN_URL\n       studio runs approve [--comment TEXT] RUN_URL\n\nFollows a run (its page's address), or approves the plan a run of a protected\nenvironment waits with, with the token in STUDIO_TOKEN.\nexit status: 0 succeeded (or approved), 3 succeeded with warnings, 1 failed or cancelled, 2 refused or bad usage.\n"
	if len(args) > 0 && args[0] == "approve" {
		return runApprove(ctx, args[1:], stdout, stderr, usage)
	}
	if len(args) == 0 || args[0] != "watch" {
		fmt.Fprint(stderr, usage)
		return exitRefused
	}
	fs := flag.NewFlagSet("runs watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	poll := fs.Duration("poll", time.Second, "how often to read the run")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitRefused
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, usage)
		return exitRefused
	}
	c, path, ok := runAPITarget("watch", fs.Arg(0), stderr)
	if !ok {
		return exitRefused
	}
	f := &follower{c: c, out: stdout, errOut: stderr, stdin: stdin, asJSON: *asJSON, terminal: isTerminal(stdout), interactive: isTerminal(stdin) && isTerminal(stdout), poll: *poll}
	return f.follow(ctx, path)
}

// runAPITarget reads a run's page (or API) address: the client of its
// Studio and the run's API path. A bad address is said on stderr, with the
// command's name (studio runs VERB), and ok is false.
func runAPITarget(verb, arg string, stderr io.Writer) (c *apiClient, path string, ok bool) {
	u, err := url.Parse(arg)
	if err != nil || u.Host == "" || !strings.Contains(u.Path, "/runs/") {
		fmt.Fprintf(stderr, "studio runs %s: %q is not a run's address, such as https://studio.example.com/projects/p/environments/e/runs/12\n", verb, arg)
		return nil, "", false
	}
	c, err = newAPIClient(u.Scheme + "://" + u.Host)
	if err != nil {
		fmt.Fprintf(stderr, "studio runs %s: %v\n", verb, err)
		return nil, "", false
	}
	path = strings.TrimRight(u.EscapedPath(), "/")
	if !strings.HasPrefix(path, "/api/v1/") {
		path = "/api/v1" + path
	}
	return c, path, true
}

// runApprove implements `studio runs approve RUN_URL`: the token's owner
// approves the plan the run waits with (the token's role and the rule
// decide whether they may).
func runApprove(ctx context.Context, args []string, stdout, stderr io.Writer, usage string) int {
	fs := flag.NewFlagSet("runs approve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	comment := fs.String("comment", "", "a comment kept with the approval")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitRefused
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, usage)
		return exitRefused
	}
	c, path, ok := runAPITarget("approve", fs.Arg(0), stderr)
	if !ok {
		return exitRefused
	}
	var run apiRun
	if err := c.call(ctx, "POST", path+"/approve", api.Decision{Comment: *comment}, &run); err != nil {
		fmt.Fprintf(stderr, "studio runs approve: %v\n", err)
		if refused(err) {
			return exitRefused
		}
		return exitFailed
	}
	if line := approvalLine(&run); line != "" {
		fmt.Fprintf(stdout, "Approved run %s: %s\n", run.name(), strings.TrimPrefix(line, "waiting for approval "))
	} else {
		fmt.Fprintf(stdout, "Approved run %s: it starts now. %s\n", run.name(), run.URL)
	}
	return exitSucceeded
}

// runValues implements `studio values import --url URL --project P --env E FILE`.
func runValues(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const usage = "usage: studio values import --url URL --project P --env E FILE (- for standard input)\n\nStores the values of a .env file in one transaction, with the token in STUDIO_TOKEN.\nValues are never printed: only names and versions.\n"
	if len(args) == 0 || args[0] != "import" {
		fmt.Fprint(stderr, usage)
		return exitRefused
	}
	fs := flag.NewFlagSet("values import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", envDefault("STUDIO_URL", ""), "the Studio's address (STUDIO_URL)")
	project := fs.String("project", "", "the project")
	env := fs.String("env", "", "the environment")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitRefused
	}
	if *base == "" || *project == "" || *env == "" || fs.NArg() != 1 {
		fmt.Fprint(stderr, usage)
		return exitRefused
	}
	c, err := newAPIClient(*base)
	if err != nil {
		fmt.Fprintf(stderr, "studio values import: %v\n", err)
		return exitRefused
	}
	var src []byte
	if fs.Arg(0) == "-" {
		src, err = io.ReadAll(io.LimitReader(stdin, 2<<20))
	} else {
		src, err = os.ReadFile(fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(stderr, "studio values import: %v\n", err)
		return exitRefused
	}
	var res api.Import
	path := "/api/v1/projects/" + url.PathEscape(*project) + "/environments/" + url.PathEscape(*env) + "/values/import"
	if err := c.call(ctx, "POST", path, api.ImportBody{Dotenv: string(src)}, &res); err != nil {
		fmt.Fprintf(stderr, "studio values import: %v\n", err)
		if refused(err) {
			return exitRefused
		}
		return exitFailed
	}
	for _, ch := range res.Changed {
		fmt.Fprintf(stdout, "set %s (version %d)\n", ch.Name, ch.Version)
	}
	for _, n := range res.Unchanged {
		fmt.Fprintf(stdout, "unchanged %s\n", n)
	}
	for _, n := range res.Skipped {
		fmt.Fprintf(stdout, "skipped %s: the manifest does not reference it\n", n)
	}
	return 0
}

package local

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// The steps whose output a fault file may script (Faults.Output).
const (
	OutputBuild   = "build"
	OutputRelease = "release"
	OutputRollout = "rollout"
	// OutputRuntime: what a deployed application prints while it runs
	// (its runtime log, logs.go), every third line in turn.
	OutputRuntime = "runtime"
)

// placeholder is ${NAME} or ${NAME|ENCODING} in a scripted line.
var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:\|(base64|url|json|jsonascii|quoted))?\}`)

// scripted returns the lines the fault file makes app's step print, with
// each ${NAME} replaced by the plaintext the environment's applications
// were handed (${NAME|base64}: standard base64; ${NAME|url}: URL query
// escaping; ${NAME|json}: inside a JSON string as Go writes it;
// ${NAME|jsonascii}: inside a JSON string with every byte that is not
// printable ASCII as \uXXXX, as Python's json.dumps writes it;
// ${NAME|quoted}: inside Go's %q). A name the applications were not
// handed stays as written.
func (l *Platform) scripted(env platform.Env, step, app string) []string {
	if l.Faults == nil {
		return nil
	}
	l.Faults.mu.Lock()
	lines := append([]string(nil), l.Faults.Output[step][app]...)
	l.Faults.mu.Unlock()
	if len(lines) == 0 {
		return nil
	}
	values := l.ReceivedValues(env.ID)
	defer clear(values)
	for i, line := range lines {
		lines[i] = expand(line, values)
	}
	return lines
}

// expand replaces each placeholder of line by the value it names, in its
// encoding (scripted).
func expand(line string, values map[string]string) string {
	return placeholder.ReplaceAllStringFunc(line, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		v, ok := values[sub[1]]
		if !ok {
			return m
		}
		switch sub[2] {
		case "base64":
			return base64.StdEncoding.EncodeToString([]byte(v))
		case "url":
			return url.QueryEscape(v)
		case "json":
			b, _ := json.Marshal(v)
			return string(b[1 : len(b)-1])
		case "jsonascii":
			return asciiJSON(v)
		case "quoted":
			q := strconv.Quote(v)
			return q[1 : len(q)-1]
		}
		return v
	})
}

// asciiJSON writes v inside a JSON string with every byte that is not
// printable ASCII escaped as \uXXXX (surrogate pairs past U+FFFF, an
// invalid byte as the lone surrogate U+DC80–U+DCFF of Python's
// surrogateescape).
func asciiJSON(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		r, n := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\u%04x`, 0xdc00+rune(v[i]))
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// say writes a line to out.
func say(out platform.Output, format string, args ...any) {
	out.Line(fmt.Sprintf(format, args...))
}

// part waits a share of the step's delay (1/n of it), as the simulated
// work goes on between the lines it prints.
func (l *Platform) part(ctx context.Context, n int) error {
	if l.StepDelay <= 0 || n <= 1 {
		return l.step(ctx)
	}
	return sleep(ctx, l.StepDelay/time.Duration(n))
}

// joinIPs lists addresses as a DNS answer reads.
func joinIPs(ips []net.IP) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ", ")
}

// digest is a stable, realistic image digest for a reference.
func digest(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// buildLines prints what building or importing app's image does.
func (l *Platform) buildLines(ctx context.Context, env platform.Env, app string, a *compiler.Application, ref string, out platform.Output) error {
	if a.Image != "" {
		say(out, "Resolving image %s", a.Image)
		if err := l.part(ctx, 2); err != nil {
			return err
		}
		say(out, "Pulling %s: done", a.Image)
	} else {
		dockerfile, context := "Dockerfile", "."
		if a.Build != nil {
			context = a.Build.Context
			if a.Build.Dockerfile != "" {
				dockerfile = a.Build.Dockerfile
			}
		}
		say(out, "Building %s from %s (%s)", app, context, dockerfile)
		if err := l.part(ctx, 2); err != nil {
			return err
		}
		for _, line := range l.scripted(env, OutputBuild, app) {
			out.Line(line)
		}
		say(out, "Pushing %s", ref)
	}
	// The second half of the step: a build takes StepDelay in all.
	if err := l.part(ctx, 2); err != nil {
		return err
	}
	say(out, "Image %s@%s", ref, digest(ref))
	return nil
}

// releaseCommandLine is the release command as a shell would echo it.
func releaseCommandLine(cmd *compiler.ReleaseCommand) string {
	quoted := make([]string, len(cmd.Command))
	for i, a := range cmd.Command {
		if strings.ContainsAny(a, " \t\"'$") {
			a = fmt.Sprintf("%q", a)
		}
		quoted[i] = a
	}
	return "$ " + strings.Join(quoted, " ")
}

// rolloutLines prints the replicas of app becoming ready, spread over the
// step's delay.
func (l *Platform) rolloutLines(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) error {
	replicas := max(a.Scaling.Min, 1)
	strategy := a.Deployment.Rollout.Strategy
	if strategy == "" {
		strategy = "rolling"
	}
	say(out, "Rolling out %s (%s, %d %s)", app, strategy, replicas, map[bool]string{true: "replica", false: "replicas"}[replicas == 1])
	for _, line := range l.scripted(env, OutputRollout, app) {
		out.Line(line)
	}
	for i := 1; i <= replicas; i++ {
		if err := l.part(ctx, replicas); err != nil {
			return err
		}
		say(out, "%d of %d replicas ready", i, replicas)
	}
	return nil
}

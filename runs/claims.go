package runs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
)

// A hostname belongs to one environment of the installation (a hostname
// claim, store.HostnameClaim). A deploy claims its resolved hostnames in
// the transaction that creates its run; a plan naming a hostname another
// environment holds, or one of the Studio's own (SetReservedHostnames), is
// refused. The run checks again, with the values it deploys, before any
// step acts for a hostname (certificate issuance and its probe, a rollout
// that writes routes), and the reconciler and Check now skip hostnames the
// environment does not hold. A successful deploy's activation makes the
// environment's claims exactly the hostnames it now runs; a deploy that
// fails or is cancelled keeps what it claimed, since the platform may
// already serve those hostnames.

// SetReservedHostnames names the Studio's own hostnames (the host of its
// public URL): no environment may claim them.
func (s *Service) SetReservedHostnames(names []string) {
	var out []string
	for _, n := range names {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	s.reserved = out
	s.Runner.reserved = out
}

// hostRefusal is a plan's hostname that is someone else's: another
// environment's claim (owner) or the Studio's own address.
type hostRefusal struct {
	// index is the refusal's sentence in DeployPlan.Refused.
	index                   int
	name, expression, route string
	// withheld: the hostname is built from a value the project also uses
	// outside hostnames; it is named by its expression only.
	withheld, alias bool
	studio          bool
	owner           string
}

// sentence is how the refusal reads to a reader who may see resolved
// hostnames (deployers and admins of the environment) or not, and who is
// an installation admin (and so may read which environment holds it) or not.
func (h hostRefusal) sentence(mayResolve, installAdmin bool) string {
	who := h.name
	switch {
	case len(compiler.ValueRefs(h.expression)) == 0 || mayResolve && !h.withheld:
	case h.alias:
		who = fmt.Sprintf("The alias %s of %s", h.expression, h.route)
	default:
		who = fmt.Sprintf("The hostname of %s (%s)", h.route, h.expression)
	}
	switch {
	case h.studio:
		return who + " is this Studio's own address."
	case installAdmin && h.owner != "":
		return fmt.Sprintf("%s is served by another environment of this installation (held by %s).", who, h.owner)
	}
	return who + " is served by another environment of this installation."
}

// ForReader words the plan's refusals of hostnames held elsewhere for its
// reader: resolved hostnames only to one who may see them (mayResolve: a
// deployer or admin of the environment), and which environment holds one
// only to an installation admin. Without it the refusals name a hostname
// built from values by its expression and name no holder.
func (dp *DeployPlan) ForReader(mayResolve, installAdmin bool) {
	for _, h := range dp.hostRefusals {
		dp.Refused[h.index] = h.sentence(mayResolve, installAdmin)
	}
}

// planClaims refuses the plan's hostnames that another environment holds
// or that are the Studio's own, and lists the hostnames the deploy claims.
func (s *Service) planClaims(ctx context.Context, env *store.Environment, dp *DeployPlan, withheld map[string]bool) error {
	var names []string
	for _, h := range dp.Hostnames {
		if n := dp.resolved[h.Expression].Name; n != "" {
			names = append(names, n)
		}
	}
	claims, err := s.DB.HostnameClaimsOf(ctx, names)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, h := range dp.Hostnames {
		n := strings.ToLower(dp.resolved[h.Expression].Name)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		dp.claims = append(dp.claims, n)
		hr := hostRefusal{name: n, expression: h.Expression, route: strings.TrimSuffix(h.Route, " alias "+h.Expression), alias: h.Alias,
			withheld: withheld[h.Expression]}
		if c, ok := claims[n]; ok && c.EnvironmentID != env.ID {
			hr.owner = c.Project + " / " + c.Environment
		} else if slices.Contains(s.reserved, n) {
			hr.studio = true
		} else {
			continue
		}
		hr.index = len(dp.Refused)
		dp.Refused = append(dp.Refused, hr.sentence(false, false))
		dp.hostRefusals = append(dp.hostRefusals, hr)
	}
	return nil
}

// claimRefusal turns the run's creation failing on a hostname claim (one
// claimed by a concurrent deploy of another environment) into the deploy's
// refusal, worded for actor a.
func (s *Service) claimRefusal(ctx context.Context, a store.Actor, dp *DeployPlan, cc *store.ClaimConflict) error {
	hr := hostRefusal{name: cc.Hostname, expression: cc.Hostname, owner: cc.Owner}
	for _, h := range dp.Hostnames {
		if strings.EqualFold(dp.resolved[h.Expression].Name, cc.Hostname) {
			hr.expression, hr.route, hr.alias = h.Expression, strings.TrimSuffix(h.Route, " alias "+h.Expression), h.Alias
			for _, pv := range dp.PublicValues {
				for _, ph := range pv.Hostnames {
					hr.withheld = hr.withheld || ph.Expression == h.Expression
				}
			}
			break
		}
	}
	if hr.owner == "" {
		claims, err := s.DB.HostnameClaimsOf(ctx, []string{cc.Hostname})
		if err != nil {
			return err
		}
		if c, ok := claims[cc.Hostname]; ok {
			hr.owner = c.Project + " / " + c.Environment
		}
	}
	return &DeployRefusal{Message: "This deploy is refused: " + hr.sentence(true, a.User != nil && a.User.IsAdmin)}
}

// hostnameFailure is why a run may not act for hostname: the Studio's own
// address, or a hostname the environment does not hold ("" when it holds it).
func (r *Runner) hostnameFailure(hostname string, held map[string]bool) string {
	switch {
	case slices.Contains(r.reserved, hostname):
		return hostname + " is this Studio's own address."
	case !held[hostname]:
		return hostname + " is served by another environment of this installation."
	}
	return ""
}

// releaseHostnames are the hostnames of the run's definition resolved with
// the values it deploys (its release), for the applications apps (nil:
// every hostname, bucket routes included); failure says why one of them
// is no hostname, never quoting it (values that are not a DNS name may be
// secrets).
func (r *Runner) releaseHostnames(ctx context.Context, rc *runContext, apps []string) (names []string, failure string, err error) {
	if r.Vault == nil || rc.def == nil {
		return nil, "", nil
	}
	hosts, err := r.Vault.ResolveReleaseHostnames(ctx, rc.env.ID, rc.run.ID, rc.def)
	if err != nil {
		return nil, "", err
	}
	names = []string{}
	for _, h := range HostnameExpressions(rc.def) {
		if apps != nil && (h.Application == "" || !slices.Contains(apps, h.Application)) {
			continue
		}
		rh := hosts[h.Expression]
		switch {
		case rh.NotAHostname:
			return nil, fmt.Sprintf("The values of %s (%s) do not make a hostname.", h.Route, h.Expression), nil
		case len(rh.Missing) > 0:
			return nil, fmt.Sprintf("The hostname of %s (%s) needs %s.", h.Route, h.Expression, strings.Join(rh.Missing, ", ")), nil
		}
		if !slices.Contains(names, rh.Name) {
			names = append(names, rh.Name)
		}
	}
	slices.Sort(names)
	return names, "", nil
}

// claimReleaseHostnames is the deploy's check, once its values are fixed
// and before any step acts for a hostname: every hostname it deploys is
// claimed by its environment (one nobody holds is claimed now: its values
// may have changed since the run was created). It returns why not, or "".
func (r *Runner) claimReleaseHostnames(ctx context.Context, rc *runContext) (string, error) {
	names, failure, err := r.releaseHostnames(ctx, rc, nil)
	if err != nil || failure != "" {
		return failure, err
	}
	for _, n := range names {
		if slices.Contains(r.reserved, n) {
			return n + " is this Studio's own address.", nil
		}
	}
	others, err := r.DB.ClaimHostnames(ctx, rc.env.ID, rc.run.ID, names)
	if err != nil {
		return "", err
	}
	if len(others) > 0 {
		return others[0] + " is served by another environment of this installation.", nil
	}
	return "", nil
}

// holdsHostnames checks, before a step acts for names, that the run's
// environment still holds every one of them (an installation admin may
// have moved a claim meanwhile). It returns why not, or "".
func (r *Runner) holdsHostnames(ctx context.Context, rc *runContext, names []string) (string, error) {
	if len(names) == 0 {
		return "", nil
	}
	held, err := r.DB.HeldHostnames(ctx, rc.env.ID)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if why := r.hostnameFailure(strings.ToLower(n), held); why != "" {
			return why, nil
		}
	}
	return "", nil
}

package compiler

import (
	"path"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var (
	routeFields     = fieldNames("applications.*.routes.*")
	tlsModes        = fieldValues("applications.*.routes.*.tls")
	routeStrategies = fieldValues("applications.*.routes.*.strategy")
)

// hostClaim is one hostname use, kept to check project-wide rules once every
// service has been read.
type hostClaim struct {
	host  string // expression text, literal parts lowercased, compared as is
	path  string // cleaned route path; "" for aliases and bucket routes
	node  *yaml.Node
	at    pathT
	owner string // "applications.web.routes.public", for messages
}

// hostClaims gathers route domains, aliases and bucket route domains.
type hostClaims struct {
	routes, aliases, buckets []hostClaim
}

// routes checks an application's routes.
func (c *checker) routes(n *yaml.Node, p pathT, ports map[string]*Port, hosts *hostClaims) map[string]*Route {
	fs, _ := c.entries(n, p)
	var out map[string]*Route
	for _, f := range c.keyedEntries(fs, p, "route name") {
		rp := join(p, f.key.Value)
		o, ok := c.object(f.val, rp, routeFields)
		if !ok {
			continue
		}
		r := &Route{Path: "/", TLS: "automatic", Strategy: "round-robin", Compress: true}
		valid := true
		var domainNode *yaml.Node
		if v := o.get("domain"); v == nil {
			c.missing(o, "domain", "the hostname this route serves, such as \"${APP_DOMAIN}\"")
			valid = false
		} else if s, ok := c.hostname(v, o.at("domain")); ok {
			r.Domain, domainNode = s, v
		} else {
			valid = false
		}
		pathOK := true
		if v := o.get("path"); v != nil {
			if s, ok := c.routePath(v, o.at("path")); ok {
				r.Path = s
			} else {
				valid, pathOK = false, false
			}
		}
		if v := o.get("port"); v == nil {
			c.missing(o, "port", "a named port of this application or a number")
			valid = false
		} else if s, num, ok := c.portRef(v, o.at("port"), ports); ok {
			r.Port, r.TargetPort = s, num
		} else {
			valid = false
		}
		if v := o.get("tls"); v != nil {
			if s, ok := c.enum(v, o.at("tls"), tlsModes); ok {
				r.TLS = s
			}
		}
		if v := o.get("strategy"); v != nil {
			if s, ok := c.enum(v, o.at("strategy"), routeStrategies); ok {
				r.Strategy = s
			}
		}
		if v := o.get("compress"); v != nil {
			if b, ok := c.boolean(v, o.at("compress")); ok {
				r.Compress = b
			}
		}
		if v := o.get("aliases"); v != nil {
			ap := o.at("aliases")
			for i, it := range c.stringList(v, ap) {
				ip := index(ap, indexOf(resolve(v), it, i))
				s, ok := c.hostname(it, ip)
				if !ok {
					continue
				}
				r.Aliases = append(r.Aliases, s)
				hosts.aliases = append(hosts.aliases, hostClaim{host: s, node: it, at: ip, owner: rp.String()})
			}
			sort.Strings(r.Aliases)
		}
		if domainNode != nil && pathOK {
			hosts.routes = append(hosts.routes, hostClaim{host: r.Domain, path: r.Path, node: domainNode, at: o.at("domain"), owner: rp.String()})
		}
		if valid {
			if out == nil {
				out = map[string]*Route{}
			}
			out[f.key.Value] = r
		}
	}
	return out
}

// indexOf finds the position of item in seq, so list paths stay right when
// stringList skipped an invalid element.
func indexOf(seq, item *yaml.Node, fallback int) int {
	if seq == nil {
		return fallback
	}
	// Items come in order and fallback counts only the items kept, so the
	// position is at or after fallback: scanning from there keeps long
	// lists linear.
	for i := max(fallback, 0); i < len(seq.Content); i++ {
		if resolve(seq.Content[i]) == item {
			return i
		}
	}
	return fallback
}

// hostname checks an expression-bearing hostname: a route domain, an alias
// or a bucket route domain. No scheme, path, port or wildcard; ${NAME}
// expressions are allowed, service outputs are not.
func (c *checker) hostname(n *yaml.Node, p pathT) (string, bool) {
	s, ok := c.nonEmptyStr(n, p)
	if !ok {
		return "", false
	}
	n = resolve(n)
	if !c.checkExpression(n, p, s) {
		return "", false
	}
	refs, _ := scanValueRefs(s, nil)
	literal, defaults := splitExpression(s)
	if problem := hostnameShape(literal, len(refs) == 0); problem != "" {
		c.errorf(n, p, "hostname `"+s+"` "+problem)
		return "", false
	}
	for _, d := range defaults {
		if d == "" {
			continue
		}
		if problem := hostnameChars(d); problem != "" {
			c.errorf(n, p, "inline default `"+d+"` of hostname `"+s+"` "+problem)
			return "", false
		}
	}
	return lowerLiteral(s), true
}

// lowerLiteral lowercases a hostname expression outside its ${...}
// references: hostnames are case-insensitive, so A.com and a.com compile to
// the same definition, while value names and inline defaults stay as
// written.
func lowerLiteral(s string) string {
	if !upperOutsideRefs(s) {
		return s // the usual case, without allocating
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(strings.ToLower(s))
			return b.String()
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			b.WriteString(strings.ToLower(s))
			return b.String()
		}
		b.WriteString(strings.ToLower(s[:i]))
		b.WriteString(s[i : i+end+1])
		s = s[i+end+1:]
	}
}

// upperOutsideRefs reports whether s has an uppercase ASCII letter outside
// its ${...} references.
func upperOutsideRefs(s string) bool {
	inRef := false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case inRef:
			inRef = ch != '}'
		case ch == '$' && i+1 < len(s) && s[i+1] == '{':
			inRef = true
		case ch >= 'A' && ch <= 'Z':
			return true
		}
	}
	return false
}

// splitExpression replaces each ${...} with a placeholder letter and returns
// the inline defaults, so the literal parts can be checked.
func splitExpression(s string) (string, []string) {
	var b strings.Builder
	var defaults []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), defaults
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			b.WriteString(s)
			return b.String(), defaults
		}
		b.WriteString(s[:i])
		b.WriteByte('x')
		if _, def, ok := strings.Cut(s[i+2:i+end], ":-"); ok {
			defaults = append(defaults, def)
		}
		s = s[i+end+1:]
	}
}

// hostnameShape explains what is wrong with a hostname's literal text, or
// returns "". full requires a complete DNS name (no expressions involved);
// otherwise s has a placeholder letter for each ${...} (see
// splitExpression), and only the lengths wait for the resolved name: no
// value can repair a doubled dot or a label ending in a hyphen.
func hostnameShape(s string, full bool) string {
	if problem := hostnameChars(s); problem != "" {
		return problem
	}
	if full && len(s) > 253 {
		return "has " + strconv.Itoa(len(s)) + " characters; at most 253"
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" {
			return "has an empty label; check for leading, trailing or doubled dots"
		}
		if full && len(label) > 63 {
			return "has a label of " + strconv.Itoa(len(label)) + " characters; at most 63"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "has a label that starts or ends with a hyphen"
		}
	}
	return ""
}

// hostnameChars explains what is wrong with the characters of a hostname
// or a fragment of one (an inline default), or returns "".
func hostnameChars(s string) string {
	switch {
	case strings.Contains(s, "://"):
		return "must not include a scheme; write only the hostname, such as example.com"
	case strings.ContainsAny(s, "/?#"):
		return "must not include a path; routes take the path in `path`"
	case strings.Contains(s, ":"):
		return "must not include a port; the edge serves ports 80 and 443"
	case strings.Contains(s, "*"):
		return "must not be a wildcard; declare each hostname"
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.') {
			return "contains a character not allowed in hostnames; use letters, digits, hyphens and dots"
		}
	}
	return ""
}

// Reserved edge paths: HTTP routers keep these for certificate validation
// and the installation's identity.
// As the reference writes them: the ACME prefix ends in a slash, so a
// route such as /.well-known/acme-challenges is not under it, while
// /.well-known/skali-edge is a plain prefix.
var reservedPaths = []string{"/.well-known/acme-challenge/", "/.well-known/skali-edge"}

// routePath checks a literal route path and returns it cleaned.
func (c *checker) routePath(n *yaml.Node, p pathT) (string, bool) {
	s, ok := c.str(n, p)
	if !ok {
		return "", false
	}
	n = resolve(n)
	switch {
	case !strings.HasPrefix(s, "/"):
		c.errorf(n, p, "route path `"+s+"` must start with /")
		return "", false
	case strings.Contains(s, "?"):
		c.errorf(n, p, "route path `"+s+"` must not contain a query (?); routes match path prefixes only")
		return "", false
	case strings.Contains(s, "#"):
		c.errorf(n, p, "route path `"+s+"` must not contain a fragment (#)")
		return "", false
	case hasControl(s):
		c.errorf(n, p, "route path must not contain control characters")
		return "", false
	}
	clean := path.Clean(s)
	for _, r := range reservedPaths {
		// A route is refused when every request it matches is the
		// edge's: its cleaned path (without the trailing slash) lies
		// under a reserved prefix. A shorter route such as / or
		// /.well-known only gives the reserved part up.
		if strings.HasPrefix(clean, r) || len(clean)+1 == len(r) && strings.HasPrefix(r, clean) && r[len(clean)] == '/' {
			c.errorf(n, p, "route path `"+s+"` is reserved by the edge ("+r+"); choose another path")
			return "", false
		}
	}
	return clean, true
}

// checkHosts enforces the project-wide hostname rules: each route's domain
// and path pair is unique; a hostname is either a route domain or an alias;
// aliases are unique; a bucket route domain is never an application domain
// or alias (buckets may share one among themselves).
func (c *checker) checkHosts(h *hostClaims) {
	byLine := func(cs []hostClaim) {
		sort.SliceStable(cs, func(i, j int) bool {
			if cs[i].node.Line != cs[j].node.Line {
				return cs[i].node.Line < cs[j].node.Line
			}
			return cs[i].node.Column < cs[j].node.Column
		})
	}
	byLine(h.routes)
	byLine(h.aliases)
	byLine(h.buckets)

	routeDomains := map[string]string{}
	seen := map[string]string{}
	for _, r := range h.routes {
		if _, ok := routeDomains[r.host]; !ok {
			routeDomains[r.host] = r.owner
		}
		key := r.host + "\x00" + r.path
		if prev, ok := seen[key]; ok {
			c.errorf(r.node, r.at, "domain `"+r.host+"` with path `"+r.path+"` is already served by "+prev+"; each domain and path pair must be unique across the project")
			continue
		}
		seen[key] = r.owner
	}
	bucketDomains := map[string]string{}
	for _, b := range h.buckets {
		if _, ok := bucketDomains[b.host]; !ok {
			bucketDomains[b.host] = b.owner
		}
	}
	aliases := map[string]string{}
	for _, a := range h.aliases {
		switch {
		case routeDomains[a.host] != "":
			c.errorf(a.node, a.at, "alias `"+a.host+"` is also the domain of "+routeDomains[a.host]+"; a hostname is either a route domain or an alias")
		case bucketDomains[a.host] != "":
			c.errorf(a.node, a.at, "alias `"+a.host+"` is also the route domain of "+bucketDomains[a.host]+"; a hostname is either a route domain or an alias")
		case aliases[a.host] != "":
			c.errorf(a.node, a.at, "alias `"+a.host+"` is already an alias of "+aliases[a.host]+"; aliases must be unique")
		default:
			aliases[a.host] = a.owner
		}
	}
	for _, b := range h.buckets {
		if owner := routeDomains[b.host]; owner != "" {
			c.errorf(b.node, b.at, "bucket route domain `"+b.host+"` is also the domain of "+owner+"; a bucket route cannot share a hostname with an application route")
		}
	}
}

package compiler

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler/internal/check"
	"go.yaml.in/yaml/v3"
)

var (
	bucketFields      = fieldNames("buckets.*")
	quotaFields       = fieldNames("buckets.*.quotas")
	lifecycleFields   = fieldNames("buckets.*.lifecycle")
	corsFields        = fieldNames("buckets.*.cors")
	corsMethods       = fieldValues("buckets.*.cors.allowedMethods")
	bucketRouteFields = fieldNames("buckets.*.route")
	visibilities      = fieldValues("buckets.*.visibility")
	versionings       = fieldValues("buckets.*.versioning")
)

// defaultAbortIncompleteUploadsAfter is the effective lifecycle default.
const defaultAbortIncompleteUploadsAfter = 24 * time.Hour

// refusedAtDeploy is appended to warnings about vocabulary the reference
// recognises but the deploy rejects.
const refusedAtDeploy = "; `studio validate` accepts it, but the deploy will refuse it"

// bucket checks one managed bucket.
func (c *checker) bucket(n *yaml.Node, p pathT, hosts *hostClaims) *Bucket {
	o, ok := c.object(n, p, bucketFields)
	if !ok {
		return nil
	}
	b := &Bucket{Visibility: "private", Versioning: "disabled",
		Lifecycle: BucketLifecycle{AbortIncompleteUploadsAfter: defaultAbortIncompleteUploadsAfter}}
	if v := o.get("visibility"); v != nil {
		if s, ok := c.enum(v, o.at("visibility"), visibilities); ok {
			b.Visibility = s
			if s == "public-read" {
				c.warnf(v, o.at("visibility"), "`public-read` is recognised but not deployable yet; only private buckets deploy"+refusedAtDeploy)
			}
		}
	}
	if v := o.get("quotas"); v != nil {
		if qo, ok := c.object(v, o.at("quotas"), quotaFields); ok {
			if sv := qo.get("storage"); sv != nil {
				b.Quotas.Storage, _ = c.byteSize(sv, qo.at("storage"))
			}
			if ov := qo.get("objects"); ov != nil {
				if x, ok := c.integer(ov, qo.at("objects")); ok {
					switch {
					case x < 0:
						c.errorf(ov, qo.at("objects"), strconv.FormatInt(x, 10)+" is out of range; quotas.objects is a nonnegative integer (0 means no limit)")
					case x > 0:
						b.Quotas.Objects = x
						c.warnf(ov, qo.at("objects"), "object-count quotas are recognised but not enforced yet"+refusedAtDeploy)
					}
				}
			}
			if mv := qo.get("maxObjectSize"); mv != nil {
				if x, ok := c.byteSize(mv, qo.at("maxObjectSize")); ok {
					b.Quotas.MaxObjectSize = x
					c.warnf(mv, qo.at("maxObjectSize"), "maxObjectSize is recognised but not enforced yet"+refusedAtDeploy)
				}
			}
		}
	}
	if v := o.get("versioning"); v != nil {
		if s, ok := c.enum(v, o.at("versioning"), versionings); ok {
			b.Versioning = s
			if s == "enabled" {
				c.warnf(v, o.at("versioning"), "`versioning: enabled` is recognised but not supported yet"+refusedAtDeploy)
			}
		}
	}
	if v := o.get("lifecycle"); v != nil {
		if lo, ok := c.object(v, o.at("lifecycle"), lifecycleFields); ok {
			if av := lo.get("abortIncompleteUploadsAfter"); av != nil {
				if d, ok := c.duration(av, lo.at("abortIncompleteUploadsAfter"), true); ok {
					b.Lifecycle.AbortIncompleteUploadsAfter = d
				}
			}
			if ev := lo.get("expireNoncurrentVersionsAfter"); ev != nil {
				if d, ok := c.duration(ev, lo.at("expireNoncurrentVersionsAfter"), true); ok {
					b.Lifecycle.ExpireNoncurrentVersionsAfter = d
					c.warnf(ev, lo.at("expireNoncurrentVersionsAfter"), "noncurrent-version expiry is recognised but not supported"+refusedAtDeploy)
				}
			}
		}
	}
	if v := o.get("cors"); v != nil {
		b.CORS = c.cors(v, o.at("cors"))
	}
	if v := o.get("route"); v != nil {
		if ro, ok := c.object(v, o.at("route"), bucketRouteFields); ok {
			r := &BucketRoute{TLS: "automatic"}
			if dv := ro.get("domain"); dv == nil {
				c.missing(ro, "domain", "the hostname that publishes this bucket")
			} else if s, ok := c.hostname(dv, ro.at("domain")); ok {
				r.Domain = s
				hosts.buckets = append(hosts.buckets, hostClaim{host: s, node: dv, at: ro.at("domain"), owner: p.String()})
			}
			if tv := ro.get("tls"); tv != nil {
				if s, ok := c.enum(tv, ro.at("tls"), tlsModes); ok {
					r.TLS = s
				}
			}
			b.Route = r
		}
	}
	return b
}

// cors checks a declared CORS policy.
func (c *checker) cors(n *yaml.Node, p pathT) *CORS {
	o, ok := c.object(n, p, corsFields)
	if !ok {
		return nil
	}
	cr := &CORS{}
	if v := o.get("allowedOrigins"); v == nil {
		c.missing(o, "allowedOrigins", "a nonempty list of origins such as https://app.example.com, or *")
	} else {
		op := o.at("allowedOrigins")
		items := c.stringList(v, op)
		if len(resolve(v).Content) == 0 {
			c.errorf(v, op, "allowedOrigins must list at least one origin, or *")
		}
		for i, it := range items {
			ip := index(op, indexOf(resolve(v), it, i))
			if problem := originShape(it.Value); problem != "" {
				c.errorf(it, ip, "origin `"+it.Value+"` "+problem)
				continue
			}
			cr.AllowedOrigins = append(cr.AllowedOrigins, it.Value)
		}
		cr.AllowedOrigins = sortedUnique(cr.AllowedOrigins)
	}
	// An empty list is the default too: a declared policy always allows
	// at least GET and PUT unless it names its methods.
	if v := o.get("allowedMethods"); v != nil && !emptyList(v) {
		mp := o.at("allowedMethods")
		for i, it := range c.stringList(v, mp) {
			ip := index(mp, indexOf(resolve(v), it, i))
			m := strings.ToUpper(it.Value)
			if !slices.Contains(corsMethods, m) {
				c.errorf(it, ip, "method `"+it.Value+"` is not allowed; expected "+check.QuoteList(corsMethods)+" (OPTIONS preflights are handled by the store)")
				continue
			}
			cr.AllowedMethods = append(cr.AllowedMethods, m)
		}
		cr.AllowedMethods = sortedUnique(cr.AllowedMethods)
	} else {
		cr.AllowedMethods = []string{"GET", "PUT"}
	}
	for _, k := range []string{"allowedHeaders", "exposeHeaders"} {
		v := o.get(k)
		if v == nil {
			continue
		}
		var out []string
		for _, it := range c.stringList(v, o.at(k)) {
			out = append(out, it.Value)
		}
		out = sortedUnique(out)
		if k == "allowedHeaders" {
			cr.AllowedHeaders = out
		} else {
			cr.ExposeHeaders = out
		}
	}
	if v := o.get("maxAge"); v != nil {
		if d, ok := c.duration(v, o.at("maxAge"), false); ok {
			cr.MaxAge = d.Truncate(time.Second)
		}
	}
	return cr
}

// sortedUnique sorts list and drops repeats; it is how every CORS list is
// canonicalised (order and repetition mean nothing there).
func sortedUnique(list []string) []string {
	sort.Strings(list)
	return slices.Compact(list)
}

// originShape checks a literal CORS origin: * or http(s)://host[:port].
func originShape(s string) string {
	if s == "*" {
		return ""
	}
	if strings.Contains(s, "${") || strings.Contains(s, "{{") {
		return "must be literal; CORS origins take no expressions"
	}
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(s, "http://")
	}
	if !ok {
		return "must start with http:// or https://, or be *"
	}
	if strings.ContainsAny(rest, "/?#") {
		return "must not include a path, query or fragment; write only scheme, host and optional port"
	}
	host, port, hasPort := strings.Cut(rest, ":")
	if hasPort {
		if !allDigits(port) || len(port) > 5 {
			return "has an invalid port"
		}
		if n, _ := strconv.Atoi(port); n < 1 || n > 65535 {
			return "has a port outside 1 to 65535"
		}
	}
	if problem := hostnameShape(host, true); problem != "" {
		return "has an invalid host"
	}
	return ""
}

// emptyList reports whether n is a list without items or null.
func emptyList(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.SequenceNode && len(n.Content) == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

package compiler

import (
	"sort"
	"strconv"
	"time"
	"unicode/utf8"
)

// The canonical encoder writes exactly what encoding/json would write for a
// Definition (a test holds it to that), but by hand: reflection-based
// marshalling was a tenth of the compile time, and the hash is computed on
// every compile.

// canonicalWriter appends JSON to a byte slice.
type canonicalWriter struct {
	b     []byte
	first []bool // per open object: no member written yet
}

func (w *canonicalWriter) open() {
	w.b = append(w.b, '{')
	w.first = append(w.first, true)
}

func (w *canonicalWriter) close() {
	w.b = append(w.b, '}')
	w.first = w.first[:len(w.first)-1]
}

func (w *canonicalWriter) key(k string) {
	top := len(w.first) - 1
	if !w.first[top] {
		w.b = append(w.b, ',')
	}
	w.first[top] = false
	w.str(k)
	w.b = append(w.b, ':')
}

func (w *canonicalWriter) strField(k, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	w.key(k)
	w.str(v)
}

func (w *canonicalWriter) intField(k string, v int64, omitEmpty bool) {
	if omitEmpty && v == 0 {
		return
	}
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *canonicalWriter) durField(k string, v time.Duration, omitEmpty bool) {
	w.intField(k, int64(v), omitEmpty)
}

func (w *canonicalWriter) boolField(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *canonicalWriter) strList(k string, list []string, omitEmpty bool) {
	if omitEmpty && len(list) == 0 {
		return
	}
	w.key(k)
	if list == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '[')
	for i, s := range list {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(s)
	}
	w.b = append(w.b, ']')
}

func (w *canonicalWriter) strMap(k string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	w.key(k)
	w.open()
	for _, name := range sortedStringKeys(m) {
		w.key(name)
		w.str(m[name])
	}
	w.close()
}

func sortedStringKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

const hexDigits = "0123456789abcdef"

// str writes a JSON string with encoding/json's escaping, HTML-safe.
func (w *canonicalWriter) str(s string) {
	w.b = append(w.b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			w.b = append(w.b, s[start:i]...)
			switch c {
			case '\\', '"':
				w.b = append(w.b, '\\', c)
			case '\b':
				w.b = append(w.b, '\\', 'b')
			case '\f':
				w.b = append(w.b, '\\', 'f')
			case '\n':
				w.b = append(w.b, '\\', 'n')
			case '\r':
				w.b = append(w.b, '\\', 'r')
			case '\t':
				w.b = append(w.b, '\\', 't')
			default:
				w.b = append(w.b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			w.b = append(w.b, s[start:i]...)
			w.b = append(w.b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			w.b = append(w.b, s[start:i]...)
			w.b = append(w.b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	w.b = append(w.b, s[start:]...)
	w.b = append(w.b, '"')
}

func (w *canonicalWriter) definition(d *Definition) {
	w.open()
	w.strField("name", d.Name, false)
	w.strField("description", d.Description, true)
	if len(d.Applications) > 0 {
		w.key("applications")
		w.open()
		for _, k := range sortedStringKeys(d.Applications) {
			w.key(k)
			w.application(d.Applications[k])
		}
		w.close()
	}
	if len(d.Databases) > 0 {
		w.key("databases")
		w.open()
		for _, k := range sortedStringKeys(d.Databases) {
			w.key(k)
			w.database(d.Databases[k])
		}
		w.close()
	}
	if len(d.Buckets) > 0 {
		w.key("buckets")
		w.open()
		for _, k := range sortedStringKeys(d.Buckets) {
			w.key(k)
			w.bucket(d.Buckets[k])
		}
		w.close()
	}
	w.close()
}

func (w *canonicalWriter) null() { w.b = append(w.b, "null"...) }

func (w *canonicalWriter) application(a *Application) {
	if a == nil {
		w.null()
		return
	}
	w.open()
	w.strField("image", a.Image, true)
	if a.Build != nil {
		w.key("build")
		w.open()
		w.strField("context", a.Build.Context, false)
		w.strField("dockerfile", a.Build.Dockerfile, false)
		w.strField("target", a.Build.Target, true)
		w.strMap("arguments", a.Build.Arguments)
		w.close()
	}
	w.strList("platforms", a.Platforms, true)
	w.strList("command", a.Command, true)
	w.strMap("environment", a.Environment)
	if len(a.Ports) > 0 {
		w.key("ports")
		w.open()
		for _, k := range sortedStringKeys(a.Ports) {
			w.key(k)
			p := a.Ports[k]
			if p == nil {
				w.null()
				continue
			}
			w.open()
			w.intField("port", int64(p.Port), false)
			w.strField("protocol", p.Protocol, false)
			w.close()
		}
		w.close()
	}
	if len(a.Routes) > 0 {
		w.key("routes")
		w.open()
		for _, k := range sortedStringKeys(a.Routes) {
			w.key(k)
			r := a.Routes[k]
			if r == nil {
				w.null()
				continue
			}
			w.open()
			w.strField("domain", r.Domain, false)
			w.strField("path", r.Path, false)
			w.strField("port", r.Port, false)
			w.intField("targetPort", int64(r.TargetPort), false)
			w.strField("tls", r.TLS, false)
			w.strField("strategy", r.Strategy, false)
			w.boolField("compress", r.Compress)
			w.strList("aliases", r.Aliases, true)
			w.close()
		}
		w.close()
	}
	w.key("health")
	w.open()
	w.probe("startup", a.Health.Startup)
	w.probe("readiness", a.Health.Readiness)
	w.probe("liveness", a.Health.Liveness)
	w.close()
	w.key("resources")
	w.open()
	w.amounts("requests", a.Resources.Requests)
	w.amounts("limits", a.Resources.Limits)
	w.close()
	w.key("scaling")
	w.open()
	w.intField("min", int64(a.Scaling.Min), false)
	w.intField("max", int64(a.Scaling.Max), false)
	w.intField("targetCPUUtilization", int64(a.Scaling.TargetCPUUtilization), true)
	w.close()
	w.key("placement")
	w.open()
	w.strField("across", a.Placement.Across, false)
	w.intField("minimum", int64(a.Placement.Minimum), false)
	w.strField("enforcement", a.Placement.Enforcement, false)
	w.close()
	w.key("deployment")
	w.open()
	if rc := a.Deployment.ReleaseCommand; rc != nil {
		w.key("releaseCommand")
		w.open()
		w.strList("command", rc.Command, false)
		w.durField("timeout", rc.Timeout, false)
		w.close()
	}
	w.key("rollout")
	w.open()
	ro := a.Deployment.Rollout
	w.strField("strategy", ro.Strategy, false)
	if ro.MaxUnavailable != nil {
		w.intField("maxUnavailable", int64(*ro.MaxUnavailable), false)
	}
	if ro.MaxSurge != nil {
		w.intField("maxSurge", int64(*ro.MaxSurge), false)
	}
	w.durField("timeout", ro.Timeout, false)
	w.close()
	w.close()
	w.key("shutdown")
	w.open()
	w.durField("gracePeriod", a.Shutdown.GracePeriod, false)
	w.close()
	if len(a.Volumes) > 0 {
		w.key("volumes")
		w.open()
		for _, k := range sortedStringKeys(a.Volumes) {
			w.key(k)
			v := a.Volumes[k]
			if v == nil {
				w.null()
				continue
			}
			w.open()
			w.strField("mountPath", v.MountPath, false)
			w.intField("size", int64(v.Size), false)
			w.close()
		}
		w.close()
	}
	w.close()
}

func (w *canonicalWriter) probe(k string, p *Probe) {
	if p == nil {
		return
	}
	w.key(k)
	w.open()
	w.strField("port", p.Port, false)
	w.intField("targetPort", int64(p.TargetPort), false)
	w.strField("path", p.Path, false)
	w.durField("interval", p.Interval, false)
	w.durField("timeout", p.Timeout, false)
	w.intField("failureThreshold", int64(p.FailureThreshold), false)
	w.close()
}

func (w *canonicalWriter) amounts(k string, a ResourceAmounts) {
	w.key(k)
	w.open()
	w.intField("cpu", int64(a.CPU), true)
	w.intField("memory", int64(a.Memory), true)
	w.intField("temporaryStorage", int64(a.TemporaryStorage), true)
	w.close()
}

func (w *canonicalWriter) database(d *Database) {
	if d == nil {
		w.null()
		return
	}
	w.open()
	w.strField("engine", d.Engine, false)
	w.intField("version", int64(d.Version), false)
	w.strField("isolation", d.Isolation, false)
	w.strField("availability", d.Availability, false)
	w.intField("storageSize", int64(d.StorageSize), true)
	w.strList("extensions", d.Extensions, true)
	w.durField("recoveryPointInTime", d.RecoveryPointInTime, true)
	w.close()
}

func (w *canonicalWriter) bucket(b *Bucket) {
	if b == nil {
		w.null()
		return
	}
	w.open()
	w.strField("visibility", b.Visibility, false)
	w.key("quotas")
	w.open()
	w.intField("storage", int64(b.Quotas.Storage), true)
	w.intField("objects", b.Quotas.Objects, true)
	w.intField("maxObjectSize", int64(b.Quotas.MaxObjectSize), true)
	w.close()
	w.strField("versioning", b.Versioning, false)
	w.key("lifecycle")
	w.open()
	w.durField("abortIncompleteUploadsAfter", b.Lifecycle.AbortIncompleteUploadsAfter, false)
	w.durField("expireNoncurrentVersionsAfter", b.Lifecycle.ExpireNoncurrentVersionsAfter, true)
	w.close()
	if c := b.CORS; c != nil {
		w.key("cors")
		w.open()
		w.strList("allowedOrigins", c.AllowedOrigins, false)
		w.strList("allowedMethods", c.AllowedMethods, false)
		w.strList("allowedHeaders", c.AllowedHeaders, true)
		w.strList("exposeHeaders", c.ExposeHeaders, true)
		w.durField("maxAge", c.MaxAge, false)
		w.close()
	}
	if r := b.Route; r != nil {
		w.key("route")
		w.open()
		w.strField("domain", r.Domain, false)
		w.strField("tls", r.TLS, false)
		w.close()
	}
	w.close()
}

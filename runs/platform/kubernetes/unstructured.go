package kubernetes

// The untyped-object helpers: the driver reads what the API server answers
// as plain JSON (Object), through these, rather than through typed clients.

import (
	"slices"
	"strings"
)

func str(o Object, path ...string) string {
	var v any = o
	for _, k := range path {
		m, _ := v.(Object)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

func list(o Object, path ...string) []any {
	var v any = o
	for _, k := range path {
		m, _ := v.(Object)
		v = m[k]
	}
	l, _ := v.([]any)
	return l
}

func conditionOf(o Object, typ string) (condition, bool) {
	for _, c := range conditions(o) {
		if c.typ == typ {
			return c, true
		}
	}
	return condition{}, false
}

// newest is the object created last (by name when created together).
func newest(objs []Object) Object {
	if len(objs) == 0 {
		return nil
	}
	return slices.MaxFunc(objs, func(a, b Object) int {
		if c := strings.Compare(str(a, "metadata", "creationTimestamp"), str(b, "metadata", "creationTimestamp")); c != 0 {
			return c
		}
		return strings.Compare(str(a, "metadata", "name"), str(b, "metadata", "name"))
	})
}

func num(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case int:
		return x
	case int64:
		return int(x)
	}
	return 0
}

func labelsOf(o Object) map[string]string {
	md, _ := o["metadata"].(Object)
	l, _ := md["labels"].(Object)
	out := map[string]string{}
	for k, v := range l {
		out[k], _ = v.(string)
	}
	return out
}

type condition struct{ typ, status, reason, message string }

func conditions(o Object) []condition {
	st, _ := o["status"].(Object)
	cs, _ := st["conditions"].([]any)
	var out []condition
	for _, c := range cs {
		m, _ := c.(Object)
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, condition{s("type"), s("status"), s("reason"), s("message")})
	}
	return out
}

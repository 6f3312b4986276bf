package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skali-dev/studio/humanize"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// Hand edits. A person's `kubectl scale`, `kubectl set image` or `kubectl
// edit` of an object the Studio applies makes them (the field manager
// kubectl, kubectl-edit, …) own those fields. The Studio's apply forces
// (ApplyForce): it takes back exactly the fields it sets, and says which
// it took back from whom; fields it does not set stay theirs.

// HandEdit is platform.HandEdit.
type HandEdit = platform.HandEdit

// handEditText is one line: who changed which fields of what, since when.
func handEditText(h HandEdit) string {
	return fmt.Sprintf("%s %s: %s (%s) owns %s", h.Kind, h.Name, h.Manager, sinceText(h), strings.Join(h.Fields, ", "))
}

// sinceText is "through scale, since 2026-…" as far as the cluster
// records it (a write through a subresource carries no time).
func sinceText(h HandEdit) string {
	var parts []string
	if h.Subresource != "" {
		parts = append(parts, "through "+h.Subresource)
	}
	if !h.Since.IsZero() {
		parts = append(parts, "since "+humanize.Clock(h.Since))
	}
	return strings.Join(parts, ", ")
}

// controllers are the field managers of Kubernetes' own controllers,
// whose writes are the cluster working, not a hand edit.
var controllers = []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-apiserver"}

// handEdits returns the fields managers other than the Studio (and the
// cluster's own controllers) own on o, by manager; status is not an edit.
func handEdits(k Kind, o Object) []HandEdit {
	var out []HandEdit
	md, _ := o["metadata"].(Object)
	name, _ := md["name"].(string)
	entries, _ := md["managedFields"].([]any)
	for _, e := range entries {
		m, _ := e.(Object)
		manager, _ := m["manager"].(string)
		sub, _ := m["subresource"].(string)
		if strings.HasPrefix(manager, FieldManager) || slices.Contains(controllers, manager) || sub == "status" {
			continue
		}
		fields := flattenFields(m["fieldsV1"], "")
		if len(fields) == 0 {
			continue
		}
		op, _ := m["operation"].(string)
		h := HandEdit{Kind: k.Kind, Name: name, Manager: manager, Operation: op, Subresource: sub, Fields: fields}
		if t, err := time.Parse(time.RFC3339, fmt.Sprint(m["time"])); err == nil {
			h.Since = t
		}
		out = append(out, h)
	}
	return out
}

// flattenFields turns a managedFields fieldsV1 trie into the paths of its
// leaves ("spec.replicas", "spec.template.spec.containers[name=web].image").
func flattenFields(v any, prefix string) []string {
	m, _ := v.(Object)
	var out []string
	for key, sub := range m {
		if key == "." {
			if prefix != "" {
				out = append(out, prefix)
			}
			continue
		}
		var seg string
		switch {
		case strings.HasPrefix(key, "f:"):
			seg = key[2:]
			if prefix != "" {
				seg = "." + seg
			}
		case strings.HasPrefix(key, "k:"):
			var kv map[string]any
			if json.Unmarshal([]byte(key[2:]), &kv) == nil {
				parts := make([]string, 0, len(kv))
				for k, v := range kv {
					parts = append(parts, fmt.Sprintf("%s=%v", k, v))
				}
				sort.Strings(parts)
				seg = "[" + strings.Join(parts, ",") + "]"
			} else {
				seg = "[" + key[2:] + "]"
			}
		case strings.HasPrefix(key, "v:"):
			seg = "[" + key[2:] + "]"
		case strings.HasPrefix(key, "i:"):
			seg = "[" + key[2:] + "]"
		default:
			seg = "." + key
		}
		sm, _ := sub.(Object)
		if len(sm) == 0 {
			out = append(out, prefix+seg)
			continue
		}
		out = append(out, flattenFields(sub, prefix+seg)...)
	}
	sort.Strings(out)
	return out
}

// apply applies obj; when fields it sets are owned by another manager (a
// hand edit: the API server refuses with a conflict naming each field and
// its manager), it applies again with force, taking exactly those fields
// back, and says each on out ("Took back from kubectl (through scale):
// spec.replicas of Deployment web"). No read comes first: the conflict
// names what would be taken.
func (p *Platform) apply(ctx context.Context, k Kind, obj Object, out platform.Output) (Object, error) {
	md, _ := obj["metadata"].(Object)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	applied, err := p.Client.Apply(ctx, k, obj)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusConflict || len(se.Causes) == 0 {
		return applied, err
	}
	taken := conflicts(k, name, se.Causes)
	if applied, err = p.Client.ApplyForce(ctx, k, obj); err != nil {
		return nil, err
	}
	for _, h := range taken {
		who := h.Manager
		if h.Subresource != "" {
			who += " (through " + h.Subresource + ")"
		}
		out.Line(fmt.Sprintf("Took back from %s: %s of %s %s", who, strings.Join(h.Fields, ", "), h.Kind, h.Name))
		p.Opts.Logger.Info("hand edit taken back", "namespace", ns, "kind", h.Kind, "name", h.Name, "manager", h.Manager, "fields", strings.Join(h.Fields, ", "))
	}
	return applied, nil
}

var conflictManager = regexp.MustCompile(`conflict with "([^"]+)"(?: with subresource "([^"]+)")?`)

// conflicts groups a server-side apply conflict's causes by manager:
// `conflict with "kubectl" with subresource "scale" using apps/v1` on
// field `.spec.replicas`.
func conflicts(k Kind, name string, causes []StatusCause) []HandEdit {
	var out []HandEdit
	for _, c := range causes {
		m := conflictManager.FindStringSubmatch(c.Message)
		if m == nil {
			continue
		}
		field := strings.ReplaceAll(strings.TrimPrefix(c.Field, "."), `"`, "")
		i := slices.IndexFunc(out, func(h HandEdit) bool { return h.Manager == m[1] && h.Subresource == m[2] })
		if i < 0 {
			out = append(out, HandEdit{Kind: k.Kind, Name: name, Manager: m[1], Subresource: m[2]})
			i = len(out) - 1
		}
		out[i].Fields = append(out[i].Fields, field)
	}
	return out
}

// HandEdits implements platform.HandEditReader: the fields other managers
// own on the Deployments, Services and autoscalers the
// Studio applied in the environment's namespace. A blue-green slot's
// Deployment is replaced by the next deploy (it starts the other slot,
// switches and deletes this one): its hand edits are marked Removed.
func (p *Platform) HandEdits(ctx context.Context, env platform.Env) ([]HandEdit, error) {
	ns := NamespaceName(env.Project, env.Name)
	if _, err := p.Client.Get(ctx, KindNamespace, "", ns); IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, p.apiError("reading namespace "+ns, err)
	}
	sel := LabelManagedBy + "=" + managedBy
	var out []HandEdit
	for _, k := range []Kind{KindDeployment, KindService, KindHPA} {
		items, err := p.Client.List(ctx, k, ns, sel)
		if err != nil {
			return nil, p.apiError("listing the "+k.Kind+"s of "+ns, err)
		}
		for _, o := range items {
			removed := k == KindDeployment && labelsOf(o)[LabelSlot] != ""
			for _, h := range handEdits(k, o) {
				h.Removed = removed
				out = append(out, h)
			}
		}
	}
	return out, nil
}

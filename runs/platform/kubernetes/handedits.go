package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
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
		parts = append(parts, "since "+h.Since.UTC().Format("2006-01-02 15:04:05 UTC"))
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

// takenBack is what the apply took: the fields of before's hand edits
// that after's no longer lists.
func takenBack(before, after []HandEdit) []HandEdit {
	var out []HandEdit
	for _, b := range before {
		var still []string
		for _, a := range after {
			if a.Manager == b.Manager && a.Operation == b.Operation && a.Subresource == b.Subresource {
				still = a.Fields
			}
		}
		var taken []string
		for _, f := range b.Fields {
			if !slices.Contains(still, f) {
				taken = append(taken, f)
			}
		}
		if len(taken) > 0 {
			b.Fields = taken
			out = append(out, b)
		}
	}
	return out
}

// apply applies obj with force: the fields the Studio sets are its own
// again whoever changed them by hand, and each field taken back is said on
// out ("Took back from kubectl (through scale, since …): spec.replicas of
// Deployment web").
func (p *Platform) apply(ctx context.Context, k Kind, obj Object, out platform.Output) (Object, error) {
	md, _ := obj["metadata"].(Object)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	var before []HandEdit
	if live, err := p.Client.Get(ctx, k, ns, name); err == nil {
		before = handEdits(k, live)
	}
	applied, err := p.Client.ApplyForce(ctx, k, obj)
	if err != nil {
		return nil, err
	}
	for _, h := range takenBack(before, handEdits(k, applied)) {
		line := fmt.Sprintf("Took back from %s (%s): %s of %s %s", h.Manager, sinceText(h), strings.Join(h.Fields, ", "), h.Kind, h.Name)
		out.Line(line)
		p.Opts.Logger.Info("hand edit taken back", "namespace", ns, "kind", h.Kind, "name", h.Name, "manager", h.Manager, "fields", strings.Join(h.Fields, ", "))
	}
	return applied, nil
}

// HandEdits implements platform.HandEditReader: the fields other managers
// own on the Deployments, Services, autoscalers and volume claims the
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
	for _, k := range []Kind{KindDeployment, KindService, KindHPA, KindPVC} {
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

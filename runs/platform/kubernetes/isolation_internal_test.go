package kubernetes

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/skali-dev/studio/compiler"
)

func compiled(t *testing.T, manifest string) *compiler.Definition {
	t.Helper()
	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		t.Fatalf("manifest: %v", res.Errors())
	}
	return res.Definition
}

// roundTrip is the object as the API server receives it.
func roundTrip(t *testing.T, o Object) Object {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var out Object
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func get(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := o.(Object)
			o = m[k]
		case int:
			l, _ := o.([]any)
			if k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

const isolationManifest = `name: shop
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 80
    resources:
      limits:
        cpu: 0.5
        memory: 256MB
    scaling:
      replicas:
        min: 2
        max: 4
      autoscaling:
        cpu:
          targetUtilization: 70
    deployment:
      rollout:
        strategy: rolling
      releaseCommand:
        command: ["/app/migrate"]
  worker:
    image: registry.local/worker:1
    resources:
      limits:
        cpu: 0.25
        memory: 128MB
    deployment:
      rollout:
        strategy: blue-green
`

// TestEveryPodRunsWithoutTokenEscalationOrExtraCapabilities: the pods of
// Deployments (rolling and blue-green) and of release Jobs carry no
// service account token, the runtime's seccomp profile, no privilege
// escalation and only the capabilities kept.
func TestEveryPodRunsWithoutTokenEscalationOrExtraCapabilities(t *testing.T) {
	p := New(nil, Options{})
	n := envNames{project: "shop", env: "production", namespace: "shop-production", id: 7}
	def := compiled(t, isolationManifest)
	pods := map[string]Object{}
	for app, a := range def.Applications {
		dep := roundTrip(t, deployment(n, app, a, p))
		pods["Deployment "+app] = get(dep, "spec", "template", "spec").(Object)
		if a.Deployment.ReleaseCommand != nil {
			job := roundTrip(t, releaseJob(n, app, "release", a, a.Deployment.ReleaseCommand, p, 1, 1))
			pods["release Job "+app] = get(job, "spec", "template", "spec").(Object)
		}
	}
	slot := roundTrip(t, slotDeployment(deployment(n, "worker", def.Applications["worker"], p), "worker", "blue", "h"))
	pods["blue-green slot"] = get(slot, "spec", "template", "spec").(Object)
	if len(pods) != 4 {
		t.Fatalf("%d pod templates, want 4", len(pods))
	}
	for what, spec := range pods {
		if spec["automountServiceAccountToken"] != false {
			t.Errorf("%s: automountServiceAccountToken %v, want false", what, spec["automountServiceAccountToken"])
		}
		if get(spec, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
			t.Errorf("%s: seccomp profile %v, want RuntimeDefault", what, get(spec, "securityContext"))
		}
		cs, _ := spec["containers"].([]any)
		if len(cs) == 0 {
			t.Fatalf("%s: no container", what)
		}
		for _, c := range cs {
			sc := get(c, "securityContext")
			if get(sc, "allowPrivilegeEscalation") != false {
				t.Errorf("%s: allowPrivilegeEscalation %v, want false", what, get(sc, "allowPrivilegeEscalation"))
			}
			if d := get(sc, "capabilities", "drop"); len(d.([]any)) != 1 || get(sc, "capabilities", "drop", 0) != "ALL" {
				t.Errorf("%s: capabilities dropped %v, want ALL", what, d)
			}
			var add []string
			for _, c := range get(sc, "capabilities", "add").([]any) {
				add = append(add, c.(string))
			}
			if !slices.Equal(add, []string{"CHOWN", "NET_BIND_SERVICE", "SETGID", "SETUID"}) {
				t.Errorf("%s: capabilities added %v", what, add)
			}
		}
	}
}

// TestNamespaceCarriesTheStudiosAndPodSecurityLabels: the namespace says
// whose it is (project, environment, environment id) and enforces the
// baseline Pod Security profile, warning about restricted.
func TestNamespaceCarriesTheStudiosAndPodSecurityLabels(t *testing.T) {
	p := New(nil, Options{})
	ns := roundTrip(t, namespaceObject(envNames{project: "shop", env: "production", namespace: "shop-production", id: 7}, p))
	want := map[string]string{
		"app.kubernetes.io/managed-by":       "skali-studio",
		"skali.dev/project":                  "shop",
		"skali.dev/environment":              "production",
		"skali.dev/environment-id":           "7",
		"pod-security.kubernetes.io/enforce": "baseline",
		"pod-security.kubernetes.io/warn":    "restricted",
	}
	got := labelsOf(ns)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
	if err := checkOwner(ns, envNames{project: "shop", env: "production", id: 7}); err != nil {
		t.Errorf("its own namespace refused: %v", err)
	}
	for _, other := range []envNames{{project: "shop", env: "production", id: 8}, {project: "shop", env: "staging", id: 7}, {project: "shop-x", env: "production", id: 7}} {
		if err := checkOwner(ns, other); err == nil {
			t.Errorf("%s/%s (id %d) accepted the namespace of shop/production (id 7)", other.project, other.env, other.id)
		}
	}
	// Made by someone else with the Studio's labels but no id: not adopted.
	delete(ns["metadata"].(Object)["labels"].(Object), LabelEnvironmentID)
	if err := checkOwner(ns, envNames{project: "shop", env: "production", id: 7}); err == nil {
		t.Errorf("a namespace without the environment id label was adopted")
	}
}

// TestNetworkPolicyAdmitsTheNamespaceAndTheGatewaysOnly: ingress to every
// pod of the namespace from its own pods and from the gateway's namespace;
// without a gateway from its own pods only.
func TestNetworkPolicyAdmitsTheNamespaceAndTheGatewaysOnly(t *testing.T) {
	n := envNames{project: "shop", env: "production", namespace: "shop-production", id: 7}
	np := roundTrip(t, networkPolicy(n, New(nil, Options{Gateway: "infra/edge"})))
	if get(np, "spec", "podSelector") == nil || len(get(np, "spec", "podSelector").(Object)) != 0 {
		t.Errorf("podSelector %v, want every pod", get(np, "spec", "podSelector"))
	}
	if types := get(np, "spec", "policyTypes").([]any); len(types) != 1 || types[0] != "Ingress" {
		t.Errorf("policyTypes %v, want [Ingress]", types)
	}
	rules := get(np, "spec", "ingress").([]any)
	if len(rules) != 1 {
		t.Fatalf("%d ingress rules, want 1", len(rules))
	}
	from := get(rules[0], "from").([]any)
	if len(from) != 2 || len(get(from[0], "podSelector").(Object)) != 0 || get(from[0], "namespaceSelector") != nil ||
		get(from[1], "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name") != "infra" || get(from[1], "podSelector") != nil {
		t.Errorf("ingress from %v, want the namespace's own pods and namespace infra", from)
	}
	np = roundTrip(t, networkPolicy(n, New(nil, Options{})))
	if from := get(np, "spec", "ingress", 0, "from").([]any); len(from) != 1 {
		t.Errorf("without a gateway, ingress from %v, want the namespace's own pods only", from)
	}
}

// TestResourceQuotaOnlyWhenEveryApplicationSetsLimits: the sum of each
// application's limits times the pods it may run at once (maximum
// replicas, a rollout's extra ones, its release Job), per resource every
// application limits; none otherwise.
func TestResourceQuotaOnlyWhenEveryApplicationSetsLimits(t *testing.T) {
	p := New(nil, Options{})
	n := envNames{project: "shop", env: "production", namespace: "shop-production", id: 7}
	def := compiled(t, isolationManifest)
	// web: 4 replicas + 1 surge (25% of 4) + 1 release pod = 6;
	// worker: 1 + 1 (blue-green) = 2.
	if got := quotaPods(def.Applications["web"]); got != 6 {
		t.Errorf("web may run %d pods at once, want 6", got)
	}
	if got := quotaPods(def.Applications["worker"]); got != 2 {
		t.Errorf("worker may run %d pods at once, want 2", got)
	}
	q := roundTrip(t, resourceQuota(n, def, p))
	hard := get(q, "spec", "hard").(Object)
	web, worker := def.Applications["web"].Resources.Limits, def.Applications["worker"].Resources.Limits
	wantCPU := quantityCPU(web.CPU*6 + worker.CPU*2)
	wantMem := quantityBytes(web.Memory*6 + worker.Memory*2)
	if hard["limits.cpu"] != wantCPU || hard["limits.memory"] != wantMem || len(hard) != 2 {
		t.Errorf("quota %v, want limits.cpu %s and limits.memory %s only", hard, wantCPU, wantMem)
	}

	// A limit one application does not set is not in the quota; none set
	// by all: no quota.
	noCPU := compiled(t, `name: shop
applications:
  web:
    image: registry.local/web:1
    resources:
      limits:
        memory: 256MB
  worker:
    image: registry.local/worker:1
    resources:
      limits:
        cpu: 0.25
        memory: 128MB
`)
	hard = get(roundTrip(t, resourceQuota(n, noCPU, p)), "spec", "hard").(Object)
	if _, ok := hard["limits.cpu"]; ok || hard["limits.memory"] == nil {
		t.Errorf("quota %v with one application without a cpu limit, want memory only", hard)
	}
	for name, manifest := range map[string]string{
		"an application without limits": "name: shop\napplications:\n  web:\n    image: registry.local/web:1\n    resources:\n      limits:\n        memory: 256MB\n  worker:\n    image: registry.local/worker:1\n",
		"a database":                    "name: shop\napplications:\n  web:\n    image: registry.local/web:1\n    resources:\n      limits:\n        memory: 256MB\ndatabases:\n  data:\n    engine: postgres\n    version: 17\n",
	} {
		if q := resourceQuota(n, compiled(t, manifest), p); q != nil {
			t.Errorf("with %s: quota %v, want none", name, q["spec"])
		}
	}

	// While a revision replaces another, the quota holds both's pods (web
	// alone: 1 replica + 1 surge).
	smaller := compiled(t, `name: shop
applications:
  web:
    image: registry.local/web:2
    resources:
      limits:
        cpu: 0.1
        memory: 1GB
    deployment:
      rollout:
        strategy: rolling
`)
	w := get(roundTrip(t, widerQuota(resourceQuota(n, smaller, p), resourceQuota(n, def, p))), "spec", "hard").(Object)
	if w["limits.cpu"] != wantCPU || w["limits.memory"] != quantityBytes(1_000_000_000*2) {
		t.Errorf("quota during the change %v, want the larger of each (cpu %s, memory %d)", w, wantCPU, 1_000_000_000*2)
	}
}

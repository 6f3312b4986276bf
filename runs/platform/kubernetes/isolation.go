package kubernetes

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// Pod Security admission labels of every environment namespace: the
// baseline profile is enforced (no privileged pods, host namespaces or
// host paths), the restricted one only warned about, since common images
// start as root.
const (
	LabelPodSecurityEnforce = "pod-security.kubernetes.io/enforce"
	LabelPodSecurityWarn    = "pod-security.kubernetes.io/warn"
)

// AddedCapabilities are the only Linux capabilities a pod the driver
// builds keeps (all others are dropped): binding a port below 1024, and
// what an image that starts as root and steps down to its own user needs
// (nginx, httpd, and the gosu or su-exec entrypoints of postgres, redis and
// many others chown their directories, then setuid and setgid). An image
// that runs as a non-root user has none of them in effect. Every one is in
// the baseline Pod Security profile.
var AddedCapabilities = []string{"CHOWN", "NET_BIND_SERVICE", "SETGID", "SETUID"}

// hardenPod makes a pod spec run without a service account token and
// under the runtime's default seccomp profile, and every container in it
// without privilege escalation and with only AddedCapabilities.
func hardenPod(spec Object) Object {
	spec["automountServiceAccountToken"] = false
	spec["securityContext"] = Object{"seccompProfile": Object{"type": "RuntimeDefault"}}
	cs, _ := spec["containers"].([]Object)
	for _, c := range cs {
		c["securityContext"] = Object{
			"allowPrivilegeEscalation": false,
			"capabilities":             Object{"drop": []string{"ALL"}, "add": slices.Clone(AddedCapabilities)},
		}
	}
	return spec
}

// namespaceObject is an environment's namespace: the Studio's labels for
// it, and Pod Security's.
func namespaceObject(n envNames, p *Platform) Object {
	l := p.labels(n, "")
	l[LabelEnvironmentID] = fmt.Sprint(n.id)
	l[LabelPodSecurityEnforce] = "baseline"
	l[LabelPodSecurityWarn] = "restricted"
	return Object{"metadata": Object{"name": n.namespace, "labels": l}}
}

// NetworkPolicyName is the one NetworkPolicy of an environment namespace.
const NetworkPolicyName = "skali-studio"

// networkPolicy admits ingress to the namespace's pods only from pods of
// the namespace itself and of the gateway's namespace (--gateway NS/NAME).
// Egress stays open: applications reach their databases, buckets and
// outside services.
func networkPolicy(n envNames, p *Platform) Object {
	from := []Object{{"podSelector": Object{}}}
	if gwNS, _, ok := strings.Cut(p.Opts.Gateway, "/"); ok && gwNS != "" && gwNS != n.namespace {
		from = append(from, Object{"namespaceSelector": Object{"matchLabels": Object{"kubernetes.io/metadata.name": gwNS}}})
	}
	return Object{"metadata": meta(n, NetworkPolicyName, "", p), "spec": Object{
		"podSelector": Object{},
		"policyTypes": []string{"Ingress"},
		"ingress":     []Object{{"from": from}},
	}}
}

// ResourceQuotaName is the ResourceQuota of an environment namespace,
// present only when its limits can be computed.
const ResourceQuotaName = "skali-studio"

// quotaPods is how many pods of an application may run at once: its
// maximum replicas, the extra ones of a rollout (all of them again for
// blue-green, the surge of a rolling update, 25% rounded up by default,
// none for recreate), and its release Job's pod.
func quotaPods(a *compiler.Application) int {
	replicas := max(a.Scaling.Max, a.Scaling.Min, 1)
	extra := 0
	ro := a.Deployment.Rollout
	switch ro.Strategy {
	case "blue-green":
		extra = replicas
	case "recreate":
	default:
		if ro.MaxSurge != nil {
			extra = *ro.MaxSurge
		} else {
			extra = int(math.Ceil(float64(replicas) / 4))
		}
	}
	if a.Deployment.ReleaseCommand != nil {
		extra++
	}
	return replicas + extra
}

// resourceQuota is the namespace's quota of limits: per resource every
// application limits (cpu, memory, temporary storage), the sum of its
// limit times quotaPods. Nil when no resource is limited by every
// application, when there is no application, or when the definition has
// databases (their operator's pods do not carry these limits, and a quota
// of limits refuses pods without them).
func resourceQuota(n envNames, def *compiler.Definition, p *Platform) Object {
	if def == nil || len(def.Applications) == 0 || len(def.Databases) > 0 {
		return nil
	}
	var cpu, memory, storage int64
	allCPU, allMemory, allStorage := true, true, true
	for _, a := range def.Applications {
		pods := int64(quotaPods(a))
		l := a.Resources.Limits
		allCPU = allCPU && l.CPU > 0
		allMemory = allMemory && l.Memory > 0
		allStorage = allStorage && l.TemporaryStorage > 0
		cpu += int64(l.CPU) * pods
		memory += int64(l.Memory) * pods
		storage += int64(l.TemporaryStorage) * pods
	}
	hard := Object{}
	if allCPU {
		hard["limits.cpu"] = quantityCPU(compiler.MilliCPU(cpu))
	}
	if allMemory {
		hard["limits.memory"] = quantityBytes(compiler.ByteSize(memory))
	}
	if allStorage {
		hard["limits.ephemeral-storage"] = quantityBytes(compiler.ByteSize(storage))
	}
	if len(hard) == 0 {
		return nil
	}
	return Object{"metadata": meta(n, ResourceQuotaName, "", p), "spec": Object{"hard": hard}}
}

// widerQuota is q with each limit raised to what other allows (both of
// resourceQuota), so the pods of the revision being replaced still fit
// while the new one rolls out. Nil other leaves q.
func widerQuota(q, other Object) Object {
	if q == nil || other == nil {
		return q
	}
	hard := q["spec"].(Object)["hard"].(Object)
	oh := other["spec"].(Object)["hard"].(Object)
	for k := range hard {
		o, ok := oh[k].(string)
		if !ok {
			continue
		}
		if quantityValue(o) > quantityValue(hard[k].(string)) {
			hard[k] = o
		}
	}
	return q
}

// quantityValue reads the quantities resourceQuota writes (milli-CPU
// "NNNm" or a plain number of bytes).
func quantityValue(s string) int64 {
	var v int64
	for _, r := range strings.TrimSuffix(s, "m") {
		if r < '0' || r > '9' {
			return 0
		}
		v = v*10 + int64(r-'0')
	}
	return v
}

// PrepareEnvironment implements platform.EnvironmentPreparer: the
// namespace's NetworkPolicy, and its ResourceQuota from the definition's
// limits (wide enough for the active revision's pods too while the new
// ones roll out), or none when they do not allow computing one.
func (p *Platform) PrepareEnvironment(ctx context.Context, env platform.Env, def, active *compiler.Definition) error {
	n, err := p.names(ctx, env)
	if err != nil {
		return err
	}
	if _, err := p.Client.Apply(ctx, KindNetworkPolicy, networkPolicy(n, p)); err != nil {
		return p.apiError("applying the NetworkPolicy of namespace "+n.namespace, err)
	}
	q := resourceQuota(n, def, p)
	if q != nil && active != nil {
		q = widerQuota(q, resourceQuota(n, active, p))
	}
	if q == nil {
		if err := p.Client.Delete(ctx, KindResourceQuota, n.namespace, ResourceQuotaName); err != nil {
			return p.apiError("deleting the ResourceQuota of namespace "+n.namespace, err)
		}
		return nil
	}
	if _, err := p.Client.Apply(ctx, KindResourceQuota, q); err != nil {
		return p.apiError("applying the ResourceQuota of namespace "+n.namespace, err)
	}
	return nil
}

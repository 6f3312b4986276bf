package kubernetes

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/skali-dev/studio/compiler"
)

// LabelComponent tells an application's pods from its release Job's.
const LabelComponent = "app.kubernetes.io/component"

// selector selects an application's serving pods (not its release Job's).
func selector(n envNames, app string, p *Platform) Object {
	l := p.labels(n, app)
	l[LabelComponent] = "application"
	delete(l, LabelManagedBy)
	return l
}

func meta(n envNames, name, service string, p *Platform) Object {
	return Object{"name": name, "namespace": n.namespace, "labels": p.labels(n, service)}
}

func quantityBytes(b compiler.ByteSize) string { return fmt.Sprint(int64(b)) }

func quantityCPU(m compiler.MilliCPU) string { return fmt.Sprintf("%dm", int64(m)) }

// databaseCluster is a database's CloudNativePG Cluster.
func databaseCluster(n envNames, name string, d *compiler.Database, p *Platform) Object {
	instances := 1
	switch d.Availability {
	case "asynchronous", "synchronous":
		instances = 3
	}
	storage := Object{}
	if d.StorageSize > 0 {
		storage["size"] = quantityBytes(d.StorageSize)
	} else {
		storage["size"] = "1Gi"
	}
	if p.Opts.StorageClass != "" {
		storage["storageClass"] = p.Opts.StorageClass
	}
	images := p.Opts.PostgresImages
	if images == "" {
		images = DefaultPostgresImages
	}
	spec := Object{
		"instances": instances,
		"imageName": fmt.Sprintf("%s:%d", images, d.Version),
		"storage":   storage,
	}
	if d.Availability == "synchronous" {
		spec["minSyncReplicas"], spec["maxSyncReplicas"] = 1, 1
	}
	return Object{"metadata": meta(n, dnsName(name), name, p), "spec": spec}
}

// bucketClaim is a bucket's ObjectBucketClaim.
func bucketClaim(n envNames, name string, p *Platform) Object {
	class := p.Opts.StorageClass
	if class == "" {
		class = "object-bucket"
	}
	return Object{"metadata": meta(n, dnsName(name), name, p), "spec": Object{
		"generateBucketName": dnsName(n.namespace, name),
		"storageClassName":   class,
	}}
}

func volumeClaim(n envNames, app, vol string, v *compiler.Volume, p *Platform) Object {
	spec := Object{
		"accessModes": []string{"ReadWriteOnce"},
		"resources":   Object{"requests": Object{"storage": quantityBytes(v.Size)}},
	}
	if p.Opts.StorageClass != "" {
		spec["storageClassName"] = p.Opts.StorageClass
	}
	return Object{"metadata": meta(n, dnsName(app, vol), app, p), "spec": spec}
}

func portNames(a *compiler.Application) []string {
	names := make([]string, 0, len(a.Ports))
	for k := range a.Ports {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// service is an application's Service, nil when it has no ports.
func service(n envNames, app string, a *compiler.Application, p *Platform) Object {
	if len(a.Ports) == 0 {
		return nil
	}
	var ports []Object
	for _, name := range portNames(a) {
		pt := a.Ports[name]
		proto := "TCP"
		if pt.Protocol == "udp" {
			proto = "UDP"
		}
		ports = append(ports, Object{"name": dnsName(name), "port": pt.Port, "targetPort": pt.Port, "protocol": proto})
	}
	return Object{"metadata": meta(n, dnsName(app), app, p), "spec": Object{
		"selector": selector(n, app, p),
		"ports":    ports,
	}}
}

var (
	wholeValue   = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)
	innerValue   = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	serviceValue = regexp.MustCompile(`^\{\{\s*(databases|buckets)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)\s*\}\}$`)
)

// envVars is an application's environment: values come from the values
// Secret by reference (never copied into the Deployment), database and
// bucket outputs from the Secrets and ConfigMaps their operators write.
func envVars(a *compiler.Application) []Object {
	keys := make([]string, 0, len(a.Environment))
	for k := range a.Environment {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	secretRef := func(name, key string) Object {
		return Object{"secretKeyRef": Object{"name": name, "key": key}}
	}
	var out, hidden []Object
	seen := map[string]bool{}
	for _, k := range keys {
		v := a.Environment[k]
		if m := wholeValue.FindStringSubmatch(v); m != nil {
			out = append(out, Object{"name": k, "valueFrom": secretRef(ValuesSecret, m[1])})
			continue
		}
		if m := serviceValue.FindStringSubmatch(v); m != nil {
			out = append(out, Object{"name": k, "valueFrom": serviceOutput(m[1], m[2], m[3])})
			continue
		}
		if innerValue.MatchString(v) {
			// Text around values: Kubernetes expands $(NAME) from
			// variables defined before, so each value is defined first
			// under a name of its own.
			v = innerValue.ReplaceAllStringFunc(v, func(s string) string {
				name := innerValue.FindStringSubmatch(s)[1]
				if !seen[name] {
					seen[name] = true
					hidden = append(hidden, Object{"name": "SKALI_VALUE_" + name, "valueFrom": secretRef(ValuesSecret, name)})
				}
				return "$(SKALI_VALUE_" + name + ")"
			})
		}
		out = append(out, Object{"name": k, "value": v})
	}
	return append(hidden, out...)
}

// serviceOutput maps {{databases.NAME.OUTPUT}} and {{buckets.NAME.OUTPUT}}
// to the keys CloudNativePG (Secret NAME-app) and an ObjectBucketClaim
// (Secret and ConfigMap NAME) provide.
func serviceOutput(kind, name, output string) Object {
	if kind == "databases" {
		key := map[string]string{"url": "uri", "host": "host", "port": "port", "user": "username", "username": "username",
			"password": "password", "name": "dbname", "database": "dbname"}[output]
		if key == "" {
			key = output
		}
		return Object{"secretKeyRef": Object{"name": dnsName(name) + "-app", "key": key}}
	}
	switch output {
	case "access_key":
		return Object{"secretKeyRef": Object{"name": dnsName(name), "key": "AWS_ACCESS_KEY_ID"}}
	case "secret_key":
		return Object{"secretKeyRef": Object{"name": dnsName(name), "key": "AWS_SECRET_ACCESS_KEY"}}
	}
	key := map[string]string{"endpoint": "BUCKET_HOST", "name": "BUCKET_NAME", "region": "BUCKET_REGION", "port": "BUCKET_PORT"}[output]
	if key == "" {
		key = strings.ToUpper(output)
	}
	return Object{"configMapKeyRef": Object{"name": dnsName(name), "key": key}}
}

func probe(a *compiler.Application, pr *compiler.Probe) Object {
	if pr == nil {
		return nil
	}
	port := pr.TargetPort
	if port == 0 {
		if pt := a.Ports[pr.Port]; pt != nil {
			port = pt.Port
		}
	}
	o := Object{}
	if pr.Path != "" {
		o["httpGet"] = Object{"path": pr.Path, "port": port}
	} else {
		o["tcpSocket"] = Object{"port": port}
	}
	if s := int(pr.Interval.Seconds()); s > 0 {
		o["periodSeconds"] = s
	}
	if s := int(pr.Timeout.Seconds()); s > 0 {
		o["timeoutSeconds"] = s
	}
	if pr.FailureThreshold > 0 {
		o["failureThreshold"] = pr.FailureThreshold
	}
	return o
}

func resources(a *compiler.Application) Object {
	amounts := func(r compiler.ResourceAmounts) Object {
		o := Object{}
		if r.CPU > 0 {
			o["cpu"] = quantityCPU(r.CPU)
		}
		if r.Memory > 0 {
			o["memory"] = quantityBytes(r.Memory)
		}
		if r.TemporaryStorage > 0 {
			o["ephemeral-storage"] = quantityBytes(r.TemporaryStorage)
		}
		return o
	}
	out := Object{}
	if r := amounts(a.Resources.Requests); len(r) > 0 {
		out["requests"] = r
	}
	if l := amounts(a.Resources.Limits); len(l) > 0 {
		out["limits"] = l
	}
	return out
}

func podAnnotations(p *Platform, app, kind string) Object {
	if p.Opts.PodAnnotations == nil {
		return nil
	}
	out := Object{}
	for k, v := range p.Opts.PodAnnotations(app, kind) {
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// container is the application's container, image and environment.
func container(n envNames, app string, a *compiler.Application, p *Platform) Object {
	c := Object{"name": dnsName(app), "image": p.image(n, app, a)}
	if len(a.Command) > 0 {
		c["command"] = a.Command
	}
	if env := envVars(a); len(env) > 0 {
		c["env"] = env
	}
	if r := resources(a); len(r) > 0 {
		c["resources"] = r
	}
	return c
}

// deployment is the application's Deployment: a rolling update with the
// manifest's surge and unavailability (recreate when asked), its progress
// deadline derived from the rollout timeout, and no spec.replicas when an
// autoscaler owns the count.
func deployment(n envNames, app string, a *compiler.Application, p *Platform) Object {
	c := container(n, app, a, p)
	var ports []Object
	for _, name := range portNames(a) {
		pt := a.Ports[name]
		proto := "TCP"
		if pt.Protocol == "udp" {
			proto = "UDP"
		}
		ports = append(ports, Object{"name": dnsName(name)[:min(len(dnsName(name)), 15)], "containerPort": pt.Port, "protocol": proto})
	}
	if len(ports) > 0 {
		c["ports"] = ports
	}
	if pr := probe(a, a.Health.Startup); pr != nil {
		c["startupProbe"] = pr
	}
	if pr := probe(a, a.Health.Readiness); pr != nil {
		c["readinessProbe"] = pr
	}
	if pr := probe(a, a.Health.Liveness); pr != nil {
		c["livenessProbe"] = pr
	}
	var mounts, volumes []Object
	for _, vol := range sortedVolumes(a) {
		v := a.Volumes[vol]
		mounts = append(mounts, Object{"name": dnsName(vol), "mountPath": v.MountPath})
		volumes = append(volumes, Object{"name": dnsName(vol), "persistentVolumeClaim": Object{"claimName": dnsName(app, vol)}})
	}
	if len(mounts) > 0 {
		c["volumeMounts"] = mounts
	}
	podLabels := p.labels(n, app)
	podLabels[LabelComponent] = "application"
	podMeta := Object{"labels": podLabels}
	if ann := podAnnotations(p, app, "rollout"); ann != nil {
		podMeta["annotations"] = ann
	}
	podSpec := hardenPod(Object{"containers": []Object{c}})
	if len(volumes) > 0 {
		podSpec["volumes"] = volumes
	}
	if tsc := spread(n, app, a, p); tsc != nil {
		podSpec["topologySpreadConstraints"] = tsc
	}
	if g := int(a.Shutdown.GracePeriod.Seconds()); g > 0 {
		podSpec["terminationGracePeriodSeconds"] = g
	}
	strategy := Object{"type": "RollingUpdate"}
	ro := a.Deployment.Rollout
	switch ro.Strategy {
	case "recreate":
		strategy = Object{"type": "Recreate"}
	case "blue-green":
		// With a Service, two Deployments and a switch of its selector
		// (bluegreen.go); without one (nothing to switch), a full new set
		// beside the old one, which serves until every new replica is ready.
		strategy["rollingUpdate"] = Object{"maxSurge": "100%", "maxUnavailable": 0}
	default:
		ru := Object{}
		if ro.MaxSurge != nil {
			ru["maxSurge"] = *ro.MaxSurge
		}
		if ro.MaxUnavailable != nil {
			ru["maxUnavailable"] = *ro.MaxUnavailable
		}
		if len(ru) > 0 {
			strategy["rollingUpdate"] = ru
		}
	}
	spec := Object{
		"selector":                Object{"matchLabels": selector(n, app, p)},
		"template":                Object{"metadata": podMeta, "spec": podSpec},
		"strategy":                strategy,
		"progressDeadlineSeconds": progressDeadline(ro),
		"revisionHistoryLimit":    5,
	}
	if a.Scaling.TargetCPUUtilization == 0 {
		spec["replicas"] = max(a.Scaling.Min, 1)
	}
	return Object{"metadata": meta(n, dnsName(app), app, p), "spec": spec}
}

// progressDeadline is the Deployment's progress deadline: the rollout
// timeout less a margin, so the cluster's own verdict (and its message)
// arrives before the Studio's timeout.
func progressDeadline(ro compiler.Rollout) int {
	s := int(ro.Timeout.Seconds())
	switch {
	case s <= 0:
		return 600
	case s > 20:
		return s - 5
	}
	return max(s*3/4, 1)
}

func sortedVolumes(a *compiler.Application) []string {
	out := make([]string, 0, len(a.Volumes))
	for k := range a.Volumes {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func autoscaler(n envNames, app string, a *compiler.Application, p *Platform) Object {
	return autoscalerOf(n, app, a, p, dnsName(app))
}

// autoscalerOf is the application's autoscaler of the Deployment target.
func autoscalerOf(n envNames, app string, a *compiler.Application, p *Platform, target string) Object {
	return Object{"metadata": meta(n, dnsName(app), app, p), "spec": Object{
		"scaleTargetRef": Object{"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
		"minReplicas":    max(a.Scaling.Min, 1),
		"maxReplicas":    max(a.Scaling.Max, a.Scaling.Min, 1),
		"metrics": []Object{{"type": "Resource", "resource": Object{"name": "cpu",
			"target": Object{"type": "Utilization", "averageUtilization": a.Scaling.TargetCPUUtilization}}}},
	}}
}

// releaseJob runs a release command once in the application's image and
// environment: no retry, bounded by the command's timeout.
func releaseJob(n envNames, app, name string, a *compiler.Application, cmd *compiler.ReleaseCommand, p *Platform, runID int64, position int) Object {
	c := container(n, app, a, p)
	c["command"] = cmd.Command
	labels := p.labels(n, app)
	labels["skali.dev/run"] = fmt.Sprint(runID)
	labels["skali.dev/position"] = fmt.Sprint(position)
	podLabels := p.labels(n, app)
	podLabels[LabelComponent] = "release"
	podMeta := Object{"labels": podLabels}
	if ann := podAnnotations(p, app, "release"); ann != nil {
		podMeta["annotations"] = ann
	}
	spec := Object{
		"backoffLimit":            0,
		"ttlSecondsAfterFinished": 7 * 24 * 3600,
		"template": Object{"metadata": podMeta, "spec": hardenPod(Object{
			"restartPolicy": "Never",
			"containers":    []Object{c},
		})},
	}
	if s := int(cmd.Timeout.Seconds()); s > 0 {
		spec["activeDeadlineSeconds"] = s
	}
	return Object{"metadata": Object{"name": name, "namespace": n.namespace, "labels": labels}, "spec": spec}
}

func sortedRoutes(a *compiler.Application) []string {
	out := make([]string, 0, len(a.Routes))
	for k := range a.Routes {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// httpRoutes are a route's Gateway API HTTPRoutes attached to the
// configured gateway: the domain to the application's Service, and its
// aliases redirected to the domain.
func httpRoutes(n envNames, app, rn string, a *compiler.Application, values map[string]string, p *Platform) []Object {
	r := a.Routes[rn]
	domain, _ := compiler.ExpandValues(r.Domain, values)
	if domain == "" {
		return nil
	}
	gwNS, gwName, _ := strings.Cut(p.Opts.Gateway, "/")
	parent := []Object{{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": gwNS, "name": gwName}}
	path := r.Path
	if path == "" {
		path = "/"
	}
	out := []Object{{"metadata": meta(n, dnsName(app, rn), app, p), "spec": Object{
		"parentRefs": parent,
		"hostnames":  []string{domain},
		"rules": []Object{{
			"matches":     []Object{{"path": Object{"type": "PathPrefix", "value": path}}},
			"backendRefs": []Object{{"name": dnsName(app), "port": r.TargetPort}},
		}},
	}}}
	var aliases []string
	for _, al := range r.Aliases {
		if h, _ := compiler.ExpandValues(al, values); h != "" {
			aliases = append(aliases, h)
		}
	}
	if len(aliases) > 0 {
		out = append(out, Object{"metadata": meta(n, dnsName(app, rn, "aliases"), app, p), "spec": Object{
			"parentRefs": parent,
			"hostnames":  aliases,
			"rules": []Object{{"filters": []Object{{"type": "RequestRedirect",
				"requestRedirect": Object{"hostname": domain, "statusCode": 301}}}}},
		}})
	}
	return out
}

// spread is the placement's spread of replicas across nodes or zones.
func spread(n envNames, app string, a *compiler.Application, p *Platform) []Object {
	pl := a.Placement
	if pl.Across == "" {
		return nil
	}
	key := "kubernetes.io/hostname"
	if pl.Across == "zones" {
		key = "topology.kubernetes.io/zone"
	}
	when := "ScheduleAnyway"
	if pl.Enforcement == "required" {
		when = "DoNotSchedule"
	}
	c := Object{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
		"labelSelector": Object{"matchLabels": selector(n, app, p)}}
	if pl.Minimum > 1 && when == "DoNotSchedule" {
		c["minDomains"] = pl.Minimum
	}
	return []Object{c}
}

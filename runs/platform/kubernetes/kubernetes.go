// Package kubernetes is the Studio's Kubernetes platform: it does a run's
// work on a real cluster by server-side apply (field manager skali-studio),
// one namespace per environment, and follows rollouts and release Jobs by
// watching them.
//
// What a deploy creates, per environment namespace: a Secret "values" with
// the environment's values; per application a Deployment and a Service
// (an HorizontalPodAutoscaler when it autoscales, then without
// spec.replicas, and a PersistentVolumeClaim per volume); a Job per release
// command; a CloudNativePG Cluster per database and an ObjectBucketClaim
// per bucket.
package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// Labels every object carries.
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	LabelProject     = "skali.dev/project"
	LabelEnvironment = "skali.dev/environment"
	LabelService     = "skali.dev/service"
	// LabelEnvironmentID, on a namespace, is the id of the environment it
	// was created for: a later environment of the same name never takes
	// over an earlier one's namespace.
	LabelEnvironmentID = "skali.dev/environment-id"
	managedBy          = "skali-studio"
	// ValuesSecret is the name of the environment's one Secret of values.
	ValuesSecret = "values"
)

// Options configure the platform.
type Options struct {
	// Registry prefixes the image of an application built from source:
	// REGISTRY/NAMESPACE/APP:TAG. The Studio does not build images on
	// Kubernetes; the operator's CI pushes them there.
	Registry string
	// Gateway (NAMESPACE/NAME) is where routes attach. ClusterIssuer is
	// the cert-manager ClusterIssuer of domains' Certificates; without one
	// the local platform's development CA issues them.
	Gateway       string
	ClusterIssuer string
	// IssueTimeout bounds the wait for cert-manager to issue a
	// certificate (DefaultIssueTimeout when zero).
	IssueTimeout time.Duration
	// ProvisionTimeout bounds the wait for a database's or a bucket's
	// operator (ProvisionTimeout, a minute, when zero).
	ProvisionTimeout time.Duration
	// StorageClass of volumes, databases and buckets ("" = the cluster's
	// default; buckets default to "object-bucket").
	StorageClass string
	// PostgresImages is the repository of the PostgreSQL images
	// CloudNativePG runs, tagged by major: a database of version 17 runs
	// PostgresImages:17 (DefaultPostgresImages when empty). A cluster
	// that pulls from a mirror of its own names the mirror here.
	PostgresImages string
	// HelperImage is the Studio's own image: the pods that read and
	// write a volume's files for its snapshots and restores run its
	// volume agent (studio volume-agent). Volumes are not snapshotted
	// without it.
	HelperImage string
	// PodAnnotations adds annotations to the pods of an application
	// ("release" for its release Job); tests use it to steer simulated
	// nodes.
	PodAnnotations func(app, kind string) map[string]string
	Logger         *slog.Logger
	// EnvironmentRole and CertManagerRole are the ClusterRoles the Studio
	// binds itself to in each environment namespace it creates
	// (DefaultEnvironmentRole and DefaultCertManagerRole when empty).
	EnvironmentRole, CertManagerRole string

	// Prober is the Studio's probe of where a domain points (Probe).
	Prober *platform.Prober
	// DevIssuer issues certificates when no ClusterIssuer is set (the
	// installation's development CA).
	DevIssuer Issuer
	// ReleaseValues reads the plaintext values of run runID's release (0:
	// the environment's unfinished deploy, 0 and no error when there is
	// none): read only when the values Secret a deploy wrote is found
	// missing in a later step, to write it again. Without it a missing
	// Secret fails the step.
	ReleaseValues func(ctx context.Context, envID, runID int64) (values map[string]string, fromRun int64, err error)
}

// Issuer issues a domain's certificate (the development CA's DevIssuer).
type Issuer interface {
	Issue(ctx context.Context, env platform.Env, domain string, now time.Time, out platform.Output) (*platform.IssuedCertificate, platform.Issuance, error)
}

// DefaultPostgresImages is CloudNativePG's own repository of PostgreSQL
// images.
const DefaultPostgresImages = "ghcr.io/cloudnative-pg/postgresql"

// The ClusterRoles of deploy/kubernetes the Studio binds in its
// namespaces.
const (
	DefaultEnvironmentRole = "skali-studio-environment"
	DefaultCertManagerRole = "skali-studio-cert-manager"
)

// Platform implements platform.Platform on a Kubernetes cluster. Probe
// is Options.Prober's, and Issue without a cluster issuer
// Options.DevIssuer's. It knows nothing of the Studio's database: what a
// step needs comes in its arguments (and Options.ReleaseValues).
type Platform struct {
	Client *Client
	Opts   Options

	watches  *watchHub
	identity clusterID
	// health is what the environments' watches saw (health.go).
	health healthWatch
}

var (
	_ platform.Platform            = (*Platform)(nil)
	_ platform.ValueReceiver       = (*Platform)(nil)
	_ platform.EnvironmentPreparer = (*Platform)(nil)
	_ platform.EnvironmentDeleter  = (*Platform)(nil)
)

type envNames struct {
	project, env, namespace string
	id                      int64
}

// New returns the platform.
func New(client *Client, o Options) *Platform {
	if o.Registry == "" {
		o.Registry = "registry.local"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.EnvironmentRole == "" {
		o.EnvironmentRole = DefaultEnvironmentRole
	}
	if o.CertManagerRole == "" {
		o.CertManagerRole = DefaultCertManagerRole
	}
	return &Platform{Client: client, Opts: o, watches: newWatchHub(client, o.Logger)}
}

// Kind implements platform.Platform.
func (p *Platform) Kind() string { return "kubernetes" }

// Close ends the platform's watches.
func (p *Platform) Close() { p.watches.cancel() }

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// NamespaceName is the namespace of a project's environment: a DNS-1123
// label from both names, with a hash suffix when it would be too long.
func NamespaceName(project, env string) string {
	n := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(project+"-"+env), "-"), "-")
	if len(n) <= 63 && n != "" {
		return n
	}
	sum := sha256.Sum256([]byte(project + "/" + env))
	n = strings.TrimRight(n[:min(len(n), 54)], "-")
	return n + "-" + hex.EncodeToString(sum[:])[:8]
}

// dnsName shortens a name for an object to at most 63 characters.
func dnsName(parts ...string) string {
	n := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(strings.Join(parts, "-")), "-"), "-")
	if len(n) <= 63 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return strings.TrimRight(n[:54], "-") + "-" + hex.EncodeToString(sum[:])[:8]
}

// names makes sure of the environment's namespace before the driver acts
// in it, in every step: it exists and is this environment's (created by
// the Studio for it, never adopted), and the Studio's RoleBindings in it
// come first. Nothing of this is remembered between steps: a namespace
// deleted since (kubectl delete namespace) is created again, fresh, in the
// same step.
func (p *Platform) names(ctx context.Context, env platform.Env) (envNames, error) {
	n := envNames{project: env.Project, env: env.Name, id: env.ID, namespace: NamespaceName(env.Project, env.Name)}
	created, err := p.ensureNamespace(ctx, n)
	if err != nil {
		return envNames{}, err
	}
	if err := p.bindStudio(ctx, n); err != nil {
		return envNames{}, err
	}
	if created {
		// What a deploy's first step applies (PrepareEnvironment), at
		// once for a namespace made again in a later step.
		if _, err := p.Client.Apply(ctx, KindNetworkPolicy, networkPolicy(n, p)); err != nil {
			return envNames{}, p.apiError("applying the NetworkPolicy of namespace "+n.namespace, err)
		}
	}
	return n, nil
}

// ensureNamespace creates the environment's namespace when there is none
// (true), or checks that the one there is the environment's: labelled by
// the Studio for this project, environment and environment id. A
// namespace is created, never applied: one that appeared since it was
// found missing is checked again, not taken over. One being deleted (a
// kubectl delete namespace still under way) is waited for, then made
// again.
func (p *Platform) ensureNamespace(ctx context.Context, n envNames) (bool, error) {
	deadline := time.Now().Add(namespaceGoneWait)
	for attempt := 0; ; attempt++ {
		ns, err := p.Client.Get(ctx, KindNamespace, "", n.namespace)
		switch {
		case IsNotFound(err):
			_, err := p.Client.Create(ctx, KindNamespace, namespaceObject(n, p))
			if IsAlreadyExists(err) && attempt < 3 {
				continue
			}
			if err != nil {
				return false, p.apiError("creating namespace "+n.namespace, err)
			}
			p.Opts.Logger.Info("created namespace", "namespace", n.namespace, "project", n.project, "environment", n.env)
			return true, nil
		case err != nil:
			return false, p.apiError("reading namespace "+n.namespace, err)
		}
		if err := checkOwner(ns, n); err != nil {
			return false, err
		}
		if str(ns, "metadata", "deletionTimestamp") == "" {
			return false, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("The namespace %s of %s/%s is still being deleted after %s; nothing was changed in it. Try again once it is gone.", n.namespace, n.project, n.env, namespaceGoneWait)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// namespaceGoneWait bounds the wait for a namespace being deleted before
// it is made again.
const namespaceGoneWait = 2 * time.Minute

// checkOwner refuses a namespace that is not the environment's: without the
// Studio's labels for its project, environment and environment id (one
// made for an earlier environment of the same name has another id; one
// made by someone else, none).
func checkOwner(ns Object, n envNames) error {
	l := labelsOf(ns)
	if l[LabelManagedBy] != managedBy || l[LabelProject] != labelValue(n.project) || l[LabelEnvironment] != labelValue(n.env) {
		return fmt.Errorf("The namespace %s already exists and does not belong to %s/%s; nothing was changed in it.", n.namespace, n.project, n.env)
	}
	switch id, ok := l[LabelEnvironmentID]; {
	case !ok:
		return fmt.Errorf("The namespace %s carries the labels of %s/%s but not %s=%d: the Studio did not create it for this environment (or an earlier version of the Studio did); nothing was changed in it. If it is this environment's, a cluster admin labels it: kubectl label namespace %s %s=%d.",
			n.namespace, n.project, n.env, LabelEnvironmentID, n.id, n.namespace, LabelEnvironmentID, n.id)
	case id != fmt.Sprint(n.id):
		return fmt.Errorf("The namespace %s belongs to an earlier environment named %s/%s, not to this one; nothing was changed in it. A cluster admin deletes it (kubectl delete namespace %s), then deploy again.", n.namespace, n.project, n.env, n.namespace)
	}
	return nil
}

// bindStudio creates the RoleBindings that give the Studio its rights in
// the namespace (ClusterRole skali-studio-environment, and
// skali-studio-cert-manager with a cluster issuer), bound to the identity
// it acts as; one that exists stays. A fresh binding reaches the API
// server's authorizer after a moment, waited for here.
func (p *Platform) bindStudio(ctx context.Context, n envNames) error {
	who, err := p.Client.Identity(ctx)
	if err != nil {
		return err
	}
	subject := Object{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": who}
	if rest, ok := strings.CutPrefix(who, "system:serviceaccount:"); ok {
		if sans, name, ok := strings.Cut(rest, ":"); ok {
			subject = Object{"kind": "ServiceAccount", "namespace": sans, "name": name}
		}
	}
	fresh := false
	for _, role := range p.roles() {
		_, err := p.Client.Create(ctx, KindRoleBinding, Object{
			"metadata": meta(n, role, "", p),
			"roleRef":  Object{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
			"subjects": []Object{subject},
		})
		switch {
		case err == nil:
			fresh = true
		case IsAlreadyExists(err):
		default:
			return p.apiError("binding the Studio to ClusterRole "+role+" in namespace "+n.namespace, err)
		}
	}
	if !fresh {
		return nil
	}
	// Asked, not tried: a request refused meanwhile would read as a
	// right missing.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, err := p.Client.CanI(ctx, "get", "", "secrets", n.namespace, ValuesSecret)
		if err != nil {
			return p.apiError("asking whether the Studio's RoleBinding in namespace "+n.namespace+" took effect", err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Studio's RoleBinding in namespace %s did not take effect within 15 s", n.namespace)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// roles are the ClusterRoles the Studio binds itself to in each
// environment namespace.
func (p *Platform) roles() []string {
	r := []string{p.Opts.EnvironmentRole}
	if p.Opts.ClusterIssuer != "" {
		r = append(r, p.Opts.CertManagerRole)
	}
	return r
}

// labelValue fits a name into a label value (63 characters).
func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return s[:54] + "-" + hex.EncodeToString(sum[:])[:8]
}

func (p *Platform) labels(n envNames, service string) Object {
	l := Object{LabelManagedBy: managedBy, LabelProject: labelValue(n.project), LabelEnvironment: labelValue(n.env)}
	if service != "" {
		l[LabelService] = labelValue(service)
	}
	return l
}

func (p *Platform) apiError(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// SetValues implements platform.ValueReceiver: the values the deploy's
// release fixed (for a rollback, those of the deploy rolled back to) become
// the environment's one Secret, whose data is replaced by them (a name the
// release lacks goes). The Secret in the cluster is the durable state: a
// resumed run finds it there. The plaintext goes nowhere else: an error
// names the Secret, not its content.
func (p *Platform) SetValues(ctx context.Context, env platform.Env, values map[string]string) error {
	n, err := p.names(ctx, env)
	if err != nil {
		return err
	}
	return p.writeValues(ctx, n, values)
}

func (p *Platform) writeValues(ctx context.Context, n envNames, values map[string]string) error {
	data := Object{}
	for k, v := range values {
		data[k] = []byte(v) // JSON encodes []byte as base64, as Secret data is
	}
	_, err := p.Client.Apply(ctx, KindSecret, Object{
		"metadata": Object{"name": ValuesSecret, "namespace": n.namespace, "labels": p.labels(n, "")},
		"type":     "Opaque",
		"data":     data,
	})
	clear(data)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) {
			return fmt.Errorf("the values of %s/%s could not be written to Secret %s/%s (the API server answered %d %s)", n.project, n.env, n.namespace, ValuesSecret, se.Code, se.Reason)
		}
		return fmt.Errorf("the values of %s/%s could not be written to Secret %s/%s", n.project, n.env, n.namespace, ValuesSecret)
	}
	return nil
}

// annotationValues, on a pod template, is the resourceVersion of the
// values Secret its pods start with: new values (a deploy's, a rollback's
// older ones) change the template, so the pods restart with them, and the
// same values leave it as it is.
const annotationValues = "skali.dev/values-version"

// readValues reads back the environment's values Secret (what the run's
// check-values step wrote by SetValues, also when the run resumed in
// another process): its resourceVersion ("" when there is none), and the
// values an application's route domains and aliases name (nil when none
// names a value).
func (p *Platform) readValues(ctx context.Context, n envNames, runID int64, a *compiler.Application) (string, map[string]string, error) {
	sec, err := p.Client.Get(ctx, KindSecret, n.namespace, ValuesSecret)
	if IsNotFound(err) {
		// Lost since the deploy wrote it (the namespace made again, the
		// Secret deleted): written again now from the run's release.
		if err := p.restoreValues(ctx, n, runID); err != nil {
			return "", nil, err
		}
		sec, err = p.Client.Get(ctx, KindSecret, n.namespace, ValuesSecret)
	}
	switch {
	case err != nil:
		var se *StatusError
		if errors.As(err, &se) {
			return "", nil, fmt.Errorf("the Secret %s/%s of the values could not be read (the API server answered %d %s)", n.namespace, ValuesSecret, se.Code, se.Reason)
		}
		return "", nil, p.apiError("reading the Secret "+n.namespace+"/"+ValuesSecret, err)
	}
	version := str(sec, "metadata", "resourceVersion")
	uses := false
	for _, r := range a.Routes {
		uses = uses || strings.Contains(r.Domain, "${")
		for _, al := range r.Aliases {
			uses = uses || strings.Contains(al, "${")
		}
	}
	if !uses || p.Opts.Gateway == "" {
		return version, nil, nil
	}
	values := map[string]string{}
	data, _ := sec["data"].(Object)
	for k, v := range data {
		s, _ := v.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", nil, fmt.Errorf("the value %s in Secret %s/%s is not base64", k, n.namespace, ValuesSecret)
		}
		values[k] = string(b)
	}
	return version, values, nil
}

// restoreValues writes the values Secret again with the values of the
// release of run runID (0: the environment's unfinished deploy).
func (p *Platform) restoreValues(ctx context.Context, n envNames, runID int64) error {
	missing := fmt.Sprintf("the Secret %s/%s of the values is missing", n.namespace, ValuesSecret)
	if p.Opts.ReleaseValues == nil {
		return errors.New(missing)
	}
	values, fromRun, err := p.Opts.ReleaseValues(ctx, n.id, runID)
	switch {
	case err != nil && fromRun == 0:
		return err
	case err != nil:
		return fmt.Errorf("%s, and the values of run %d could not be read to write it again", missing, fromRun)
	case fromRun == 0:
		return errors.New(missing + ", and no deploy is running to write it again")
	}
	runID = fromRun
	defer clear(values)
	p.Opts.Logger.Info("values Secret missing: written again", "namespace", n.namespace, "run", runID)
	return p.writeValues(ctx, n, values)
}

// withValuesVersion marks a Deployment's pod template with the values
// Secret's version.
func withValuesVersion(dep Object, version string) Object {
	if version == "" {
		return dep
	}
	tmd := dep["spec"].(Object)["template"].(Object)["metadata"].(Object)
	ann, _ := tmd["annotations"].(Object)
	if ann == nil {
		ann = Object{}
	}
	ann[annotationValues] = version
	tmd["annotations"] = ann
	return dep
}

// ProvisionDatabase implements platform.Platform: a CloudNativePG Cluster,
// waited for until it is Ready (provision.go).
func (p *Platform) ProvisionDatabase(ctx context.Context, env platform.Env, name string, d *compiler.Database, out platform.Output) error {
	n, err := p.names(ctx, env)
	if err != nil {
		return err
	}
	obj, err := p.Client.Apply(ctx, KindPGCluster, databaseCluster(n, name, d, p))
	if err != nil {
		return p.apiError("applying database "+name, err)
	}
	return p.waitProvisioned(ctx, KindPGCluster, n.namespace, dnsName(name), "database "+name, obj, databaseState, out)
}

// ProvisionBucket implements platform.Platform: an ObjectBucketClaim,
// waited for until it is Bound.
func (p *Platform) ProvisionBucket(ctx context.Context, env platform.Env, name string, b *compiler.Bucket, out platform.Output) error {
	n, err := p.names(ctx, env)
	if err != nil {
		return err
	}
	obj, err := p.Client.Apply(ctx, KindBucketClaim, bucketClaim(n, name, p))
	if err != nil {
		return p.apiError("applying bucket "+name, err)
	}
	return p.waitProvisioned(ctx, KindBucketClaim, n.namespace, dnsName(name), "bucket "+name, obj, bucketState, out)
}

// BucketBytes implements platform.Platform: an ObjectBucketClaim does not say
// what its bucket stores.
func (p *Platform) BucketBytes(ctx context.Context, env platform.Env, name string) (int64, error) {
	return 0, nil
}

// Build implements platform.Platform. The Studio builds no images on
// Kubernetes: an application with an image uses it, one built from source
// uses REGISTRY/NAMESPACE/APP:TAG, where the tag is derived from its build
// settings.
func (p *Platform) Build(ctx context.Context, env platform.Env, app string, a *compiler.Application, out platform.Output) (string, error) {
	n, err := p.names(ctx, env)
	if err != nil {
		return "", err
	}
	return p.image(n, app, a), nil
}

func (p *Platform) image(n envNames, app string, a *compiler.Application) string {
	if a.Image != "" {
		return a.Image
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%+v", a.Build))
	return fmt.Sprintf("%s/%s/%s:%s", p.Opts.Registry, n.namespace, dnsName(app), hex.EncodeToString(sum[:])[:12])
}

// Probe implements platform.Platform: the Studio's own probe
// (Options.Prober), as on the local platform.
func (p *Platform) Probe(ctx context.Context, domain string) platform.ProbeResult {
	return p.Opts.Prober.Probe(ctx, domain)
}

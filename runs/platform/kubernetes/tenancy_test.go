package kubernetes_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

// asStudioAccount applies deploy/kubernetes and returns a fixture whose
// driver acts as the Studio's service account.
func asStudioAccount(t *testing.T, manifest, envName string, values map[string]string) *fixture {
	t.Helper()
	cluster := clustertest.Start(t)
	applyStudioRole(t, cluster)
	return newFixtureAs(t, studioAccount, manifest, envName, values)
}

// applyStudioRole applies the Studio's account and its least-privilege
// roles from deploy/kubernetes/studio.yaml to cluster: not its Deployment
// and Service, which another test binary sharing the real-node cluster
// may run with an image of its own.
func applyStudioRole(t *testing.T, cluster *clustertest.Cluster) {
	t.Helper()
	if cluster.Kubectl == "" {
		t.Skip("no kubectl beside the cluster's kubeconfig")
	}
	shipped, err := os.ReadFile("../../../deploy/kubernetes/studio.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, doc := range strings.Split(string(shipped), "\n---\n") {
		if !strings.Contains(doc, "\nkind: Deployment\n") && !strings.Contains(doc, "\nkind: Service\n") {
			docs = append(docs, doc)
		}
	}
	// --force-conflicts: another binary's test (cmd/studio's Studio in the
	// cluster) may have applied the same file client-side first, and the API
	// server's defaults in the admission policy's matchConstraints (an
	// atomic field) then differ from the file's: the content is the same.
	cmd := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.Join(docs, "\n---\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("applying deploy/kubernetes/studio.yaml's account and roles: %v: %s", err, out)
	}
}

// waitGone waits until the API server no longer has the namespace.
func (f *fixture) waitGone(ns string) {
	f.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		_, err := f.client.Get(f.ctx, kubernetes.KindNamespace, "", ns)
		if kubernetes.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("namespace %s still there after 2 minutes (%v)", ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// executeAll runs the run until it ends.
func (f *fixture) executeAll(runID int64) {
	f.t.Helper()
	if err := <-f.execute(runID); err != nil {
		f.t.Fatalf("execute run %d: %v", runID, err)
	}
}

// TestNamespaceDeletedIsMadeAgainInTheSameStep: the Studio remembers
// nothing of a namespace between steps. Deleted between two deploys
// (kubectl delete namespace, the next deploy started while it is still
// being deleted), the next deploy makes it again, fresh, with
// the Studio's RoleBinding, NetworkPolicy and values, and succeeds; deleted
// in the middle of a deploy (the process stopped mid-rollout, the namespace
// deleted, the run resumed), the resumed rollout makes it again with the
// values Secret of the run's release, and succeeds. All as the Studio's
// service account.
func TestNamespaceDeletedIsMadeAgainInTheSameStep(t *testing.T) {
	t.Parallel()
	f := asStudioAccount(t, rollingManifest, "remade", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("first deploy %s: %s", run.Status, run.Reason)
	}
	first := str(f.get(kubernetes.KindNamespace, f.ns), "metadata", "uid")
	// Deleted, and deployed again at once: the deploy waits for the
	// namespace being deleted to go, then makes it again.
	if err := f.client.Delete(f.ctx, kubernetes.KindNamespace, "", f.ns); err != nil {
		t.Fatal(err)
	}
	if run := f.deploy(runs.DeployRequest{Redeploy: true}); run.Status != store.RunSucceeded {
		t.Fatalf("deploy after the namespace was deleted: %s: %s", run.Status, run.Reason)
	}
	ns, err := f.client.Get(f.ctx, kubernetes.KindNamespace, "", f.ns)
	if err != nil {
		t.Fatal(err)
	}
	if str(ns, "metadata", "uid") == first {
		t.Fatalf("the namespace was not made again")
	}
	check := func(when string) {
		t.Helper()
		for _, k := range []struct {
			kind kubernetes.Kind
			name string
		}{{kubernetes.KindRoleBinding, kubernetes.DefaultEnvironmentRole}, {kubernetes.KindNetworkPolicy, kubernetes.NetworkPolicyName}, {kubernetes.KindDeployment, "web"}} {
			if _, err := f.client.Get(f.ctx, k.kind, f.ns, k.name); err != nil {
				t.Errorf("%s: %s %s: %v", when, k.kind.Kind, k.name, err)
			}
		}
		if got := str(f.get(kubernetes.KindSecret, kubernetes.ValuesSecret), "data", "SESSION_SECRET"); got != base64.StdEncoding.EncodeToString([]byte(secretValue)) {
			t.Errorf("%s: the values Secret does not hold the environment's value", when)
		}
	}
	check("made again by the next deploy")

	// Mid-deploy: stopped once the new revision's pods run (the values
	// Secret written by the run's first step), the namespace deleted,
	// then resumed by a new process.
	f.svc.Runner.Lease = 2 * time.Second
	f.annotate("web", "rollout", map[string]string{"testcluster.skali.dev/never-ready": "true"})
	f.addRevision(strings.Replace(rollingManifest, "web:1", "web:2", 1))
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	go func() {
		defer cancel()
		for ctx.Err() == nil {
			pods, _ := f.client.List(ctx, kubernetes.KindPod, f.ns, kubernetes.LabelComponent+"=application")
			n := 0
			for _, p := range pods {
				if strings.HasSuffix(str(p, "spec", "containers", 0, "image"), "web:2") && str(p, "status", "phase") == "Running" {
					n++
				}
			}
			if n > 0 {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	_, _ = f.svc.Runner.Execute(ctx, run.ID)
	if r, _ := f.db.RunByID(f.ctx, run.ID); store.RunFinished(r.Status) {
		t.Fatalf("the run ended (%s: %s) before it was stopped", r.Status, r.Reason)
	}
	if err := f.client.Delete(f.ctx, kubernetes.KindNamespace, "", f.ns); err != nil {
		t.Fatal(err)
	}
	f.waitGone(f.ns)
	f.annotate("web", "rollout", nil)
	f.platform.Close()
	f.platform = kubernetes.New(f.platform.Client, f.platform.Opts)
	t.Cleanup(f.platform.Close)
	f.svc = runs.NewService(f.db, f.vault, f.platform, time.Now, slog.New(slog.NewTextHandler(f.logs, nil)))
	// Only the stopped process's lease is short (it must expire for the
	// run to be taken over); the new one keeps the default, so a loaded
	// machine's late renewal does not lose it (seen: ErrTakenOver).
	f.executeAll(run.ID)
	if r, _ := f.db.RunByID(f.ctx, run.ID); r.Status != store.RunSucceeded {
		t.Fatalf("the resumed deploy after its namespace was deleted: %s: %s", r.Status, r.Reason)
	}
	check("made again by the resumed rollout")
	if !strings.Contains(f.logs.String(), "values Secret missing: written again") {
		t.Errorf("the resumed rollout did not write the lost values Secret again itself (the log says nothing of it)")
	}
	if img := str(f.get(kubernetes.KindDeployment, "web"), "spec", "template", "spec", "containers", 0, "image"); img != "registry.local/web:2" {
		t.Errorf("after the resumed deploy web runs %s, want registry.local/web:2", img)
	}
	f.checkNoPlaintext()
}

// TestDeletingAnEnvironmentDeletesItsNamespaceFirst: the delete run (as the
// Studio's service account) deletes the namespace and waits until it is
// gone; while it cannot (a finalizer holds the namespace), the run fails
// with the reason, the environment stays deleting with every row, and no
// deploy starts; deleting again retries, and the rows go only after the
// namespace. An environment created later with the same name gets a
// fresh namespace of its own.
func TestDeletingAnEnvironmentDeletesItsNamespaceFirst(t *testing.T) {
	t.Parallel()
	f := asStudioAccount(t, rollingManifest, "deleted", map[string]string{"SESSION_SECRET": secretValue})
	cluster := clustertest.Start(t)
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	if !f.svc.DeletesAsRun() {
		t.Fatal("on Kubernetes deleting an environment is not a run")
	}
	old := f.get(kubernetes.KindNamespace, f.ns)
	hold := func(on bool) {
		t.Helper()
		patch := `{"metadata":{"finalizers":["skali.dev/test-hold"]}}`
		if !on {
			patch = `{"metadata":{"finalizers":null}}`
		}
		if out, err := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "patch", "namespace", f.ns, "--type=merge", "-p", patch).CombinedOutput(); err != nil {
			t.Fatalf("kubectl patch namespace: %v: %s", err, out)
		}
	}
	hold(true)
	f.svc.Runner.DeleteTimeout = 3 * time.Second
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.StartDelete(f.ctx, store.Actor{}, env)
	if err != nil {
		t.Fatal(err)
	}
	if env, err = f.db.EnvironmentByID(f.ctx, f.env.ID); err != nil || env.State != store.EnvironmentDeleting {
		t.Fatalf("after the delete started: %v, %v; want deleting", env, err)
	}
	var refusal *runs.DeployRefusal
	if _, err := f.svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{Redeploy: true}); !errors.As(err, &refusal) {
		t.Fatalf("a deploy while deleting: %v, want refused", err)
	}
	f.executeAll(run.ID)
	r, err := f.db.RunByID(f.ctx, run.ID)
	if err != nil {
		t.Fatalf("the failed delete run is gone: %v", err)
	}
	if r.Status != store.RunFailed || !strings.Contains(r.Reason, "was not gone within 3s") {
		t.Fatalf("the delete held by a finalizer: %s: %s, want failed, not gone within 3s", r.Status, r.Reason)
	}
	if env, err = f.db.EnvironmentByID(f.ctx, f.env.ID); err != nil || env.State != store.EnvironmentDeleting {
		t.Fatalf("after the failed delete: %v, %v; want the environment still there, deleting", env, err)
	}
	if stored, err := f.db.StoredValues(f.ctx, f.env.ID); err != nil || len(stored) != 1 {
		t.Fatalf("after the failed delete %d values stored (%v), want the environment's one", len(stored), err)
	}
	if _, err := f.svc.StartDeploy(f.ctx, store.Actor{}, env, runs.DeployRequest{Redeploy: true}); !errors.As(err, &refusal) {
		t.Fatalf("a deploy after the failed delete: %v, want refused", err)
	}

	hold(false)
	f.svc.Runner.DeleteTimeout = 0
	retry, err := f.svc.StartDelete(f.ctx, store.Actor{}, env)
	if err != nil {
		t.Fatalf("deleting again: %v", err)
	}
	f.executeAll(retry.ID)
	if _, err := f.client.Get(f.ctx, kubernetes.KindNamespace, "", f.ns); !kubernetes.IsNotFound(err) {
		t.Fatalf("after the delete run the namespace is there (%v)", err)
	}
	if _, err := f.db.EnvironmentByID(f.ctx, f.env.ID); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("after the delete run the environment: %v, want gone", err)
	}
	var runsLeft int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM runs WHERE environment_id = $1`, f.env.ID).Scan(&runsLeft); err != nil || runsLeft != 0 {
		t.Fatalf("%d runs of the deleted environment remain (%v)", runsLeft, err)
	}

	// The same name again: a new environment, a fresh namespace.
	if f.env, err = f.db.CreateEnvironment(f.ctx, store.Actor{}, f.project.ID, "deleted"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.vault.SetValue(f.ctx, store.Actor{}, f.env, "SESSION_SECRET", "another-"+secretValue); err != nil {
		t.Fatal(err)
	}
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy of the new environment of the same name: %s: %s", run.Status, run.Reason)
	}
	ns := f.get(kubernetes.KindNamespace, f.ns)
	if str(ns, "metadata", "uid") == str(old, "metadata", "uid") || str(ns, "metadata", "labels", kubernetes.LabelEnvironmentID) != fmt.Sprint(f.env.ID) {
		t.Fatalf("the new environment's namespace: uid %s (old %s), environment id label %s (want %d)", str(ns, "metadata", "uid"),
			str(old, "metadata", "uid"), str(ns, "metadata", "labels", kubernetes.LabelEnvironmentID), f.env.ID)
	}
}

const limitedManifest = `name: limited
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
        max: 2
    deployment:
      rollout:
        strategy: rolling
        maxSurge: 1
        maxUnavailable: 0
      releaseCommand:
        command: ["/app/migrate"]
`

// TestNamespaceIsolationIsAppliedAndEnforced deploys, as the Studio's
// service account, an application whose limits allow a quota: the API
// server accepted and holds the namespace's Pod Security labels, its
// NetworkPolicy (from the namespace and the gateway's only) and its
// ResourceQuota (limits × the pods that may run at once: 2 replicas, 1
// surge, 1 release pod); the running pods carry no token, no privilege
// escalation, RuntimeDefault seccomp and only the kept capabilities; and
// the baseline profile is enforced: a privileged pod is refused there. A
// later revision without limits removes the quota.
func TestNamespaceIsolationIsAppliedAndEnforced(t *testing.T) {
	t.Parallel()
	f := asStudioAccount(t, limitedManifest, "isolated", map[string]string{"SESSION_SECRET": secretValue})
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy %s: %s", run.Status, run.Reason)
	}
	ns := f.get(kubernetes.KindNamespace, f.ns)
	if str(ns, "metadata", "labels", kubernetes.LabelPodSecurityEnforce) != "baseline" || str(ns, "metadata", "labels", kubernetes.LabelPodSecurityWarn) != "restricted" {
		t.Errorf("namespace labels %v, want Pod Security baseline enforced, restricted warned", at(ns, "metadata", "labels"))
	}
	np := f.get(kubernetes.KindNetworkPolicy, kubernetes.NetworkPolicyName)
	if str(np, "spec", "ingress", 0, "from", 1, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name") != "infra" ||
		str(np, "spec", "policyTypes") != "[Ingress]" {
		t.Errorf("NetworkPolicy spec %v, want ingress from the namespace and from infra (the gateway's)", at(np, "spec"))
	}
	q := f.get(kubernetes.KindResourceQuota, kubernetes.ResourceQuotaName)
	if str(q, "spec", "hard", "limits.cpu") != "2" || str(q, "spec", "hard", "limits.memory") != "1024M" {
		t.Errorf("ResourceQuota hard %v, want limits.cpu 2 and limits.memory 1024M (4 pods of 0.5 CPU and 256MB)", at(q, "spec", "hard"))
	}
	pods, err := f.client.List(f.ctx, kubernetes.KindPod, f.ns, "")
	if err != nil || len(pods) < 3 {
		t.Fatalf("%d pods (%v), want the 2 replicas and the release Job's", len(pods), err)
	}
	for _, pod := range pods {
		name := str(pod, "metadata", "name")
		if str(pod, "spec", "automountServiceAccountToken") != "false" || str(pod, "spec", "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
			t.Errorf("pod %s: token %s, seccomp %s", name, str(pod, "spec", "automountServiceAccountToken"), str(pod, "spec", "securityContext"))
		}
		sc := at(pod, "spec", "containers", 0, "securityContext")
		if str(sc, "allowPrivilegeEscalation") != "false" || str(sc, "capabilities", "drop") != "[ALL]" ||
			str(sc, "capabilities", "add") != "[CHOWN NET_BIND_SERVICE SETGID SETUID]" {
			t.Errorf("pod %s: container securityContext %v", name, sc)
		}
		vols, _ := at(pod, "spec", "volumes").([]any)
		for _, v := range vols {
			if at(v, "projected") != nil {
				t.Errorf("pod %s mounts a projected volume (a service account token?): %v", name, v)
			}
		}
	}
	_, err = f.client.Create(f.ctx, kubernetes.KindPod, kubernetes.Object{
		"metadata": kubernetes.Object{"name": "privileged", "namespace": f.ns},
		"spec": kubernetes.Object{"containers": []kubernetes.Object{{"name": "c", "image": "registry.local/x:1",
			"securityContext": kubernetes.Object{"privileged": true}}}},
	})
	var se *kubernetes.StatusError
	if !errors.As(err, &se) || se.Code != 403 || !strings.Contains(se.Message, "violates PodSecurity") {
		t.Errorf("a privileged pod in the environment's namespace: %v, want refused by Pod Security baseline", err)
	}

	f.addRevision(strings.Replace(strings.Replace(limitedManifest, "web:1", "web:2", 1), "        cpu: 0.5\n", "", 1))
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy without a cpu limit %s: %s", run.Status, run.Reason)
	}
	q = f.get(kubernetes.KindResourceQuota, kubernetes.ResourceQuotaName)
	if _, ok := at(q, "spec", "hard").(kubernetes.Object)["limits.cpu"]; ok {
		t.Errorf("quota %v while the cpu limit was being removed: want memory only", at(q, "spec", "hard"))
	}
	f.addRevision(strings.Replace(limitedManifest, "    resources:\n      limits:\n        cpu: 0.5\n        memory: 256MB\n", "", 1))
	if run := f.deploy(); run.Status != store.RunSucceeded {
		t.Fatalf("deploy without limits %s: %s", run.Status, run.Reason)
	}
	if _, err := f.client.Get(f.ctx, kubernetes.KindResourceQuota, f.ns, kubernetes.ResourceQuotaName); !kubernetes.IsNotFound(err) {
		t.Errorf("after a deploy without limits the ResourceQuota is there (%v), want none", err)
	}
}

// TestEveryEntryPointRefusesANamespaceItDidNotCreate: a namespace someone
// else made under the environment's name, labelled as the Studio labels
// its own but without its environment id, is never adopted: every entry
// point of the driver refuses it (as the Studio's service account) and
// nothing in it changes; deleting the environment leaves it as it is.
func TestEveryEntryPointRefusesANamespaceItDidNotCreate(t *testing.T) {
	t.Parallel()
	f := asStudioAccount(t, rollingManifest, "impostor", map[string]string{"SESSION_SECRET": secretValue})
	theirs := base64.StdEncoding.EncodeToString([]byte("theirs"))
	if _, err := f.client.Create(f.ctx, kubernetes.KindNamespace, kubernetes.Object{"metadata": kubernetes.Object{"name": f.ns,
		"labels": kubernetes.Object{kubernetes.LabelManagedBy: "skali-studio", kubernetes.LabelProject: "stuck", kubernetes.LabelEnvironment: "impostor"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Create(f.ctx, kubernetes.KindSecret, kubernetes.Object{"metadata": kubernetes.Object{"name": kubernetes.ValuesSecret, "namespace": f.ns},
		"data": kubernetes.Object{"SESSION_SECRET": theirs}}); err != nil {
		t.Fatal(err)
	}
	before := f.get(kubernetes.KindNamespace, f.ns)
	res := compiler.Compile([]byte(rollingManifest))
	def := res.Definition
	web := def.Applications["web"]
	env := platform.Env{ID: f.env.ID, Project: f.project.Name, Name: f.env.Name}
	p := f.platform
	out := platform.Discard
	for name, call := range map[string]func() error{
		"SetValues":          func() error { return p.SetValues(f.ctx, env, map[string]string{"SESSION_SECRET": secretValue}) },
		"PrepareEnvironment": func() error { return p.PrepareEnvironment(f.ctx, env, def, nil) },
		"ProvisionDatabase": func() error {
			return p.ProvisionDatabase(f.ctx, env, "data", &compiler.Database{Engine: "postgres", Version: 17}, out)
		},
		"ProvisionBucket": func() error { return p.ProvisionBucket(f.ctx, env, "media", &compiler.Bucket{}, out) },
		"Build":           func() error { _, err := p.Build(f.ctx, env, "web", web, out); return err },
		"Release": func() error {
			return p.Release(f.ctx, env, "web", web, &compiler.ReleaseCommand{Command: []string{"/migrate"}, Timeout: time.Minute}, platform.ReleaseKey{RunID: 1, Position: 1}, out)
		},
		"ReleaseOutcome": func() error {
			_, err := p.ReleaseOutcome(f.ctx, env, platform.ReleaseKey{RunID: 1, Position: 1})
			return err
		},
		"Rollout": func() error { return p.Rollout(f.ctx, env, "web", web, out) },
		"Prune": func() error {
			return p.Prune(f.ctx, env, []platform.RemovedService{{Kind: "application", Name: "web"}}, out)
		},
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "the Studio did not create it for this environment") {
			t.Errorf("%s in a namespace the Studio did not create: %v, want refused", name, err)
		}
	}
	if err := p.DeleteEnvironment(f.ctx, env, out); err != nil {
		t.Errorf("deleting the environment: %v", err)
	}
	after := f.get(kubernetes.KindNamespace, f.ns)
	if str(after, "metadata", "uid") != str(before, "metadata", "uid") || str(after, "metadata", "resourceVersion") != str(before, "metadata", "resourceVersion") ||
		str(after, "metadata", "deletionTimestamp") != "<nil>" {
		t.Fatalf("the namespace the Studio did not create was changed or deleted")
	}
	if got := str(f.get(kubernetes.KindSecret, kubernetes.ValuesSecret), "data", "SESSION_SECRET"); got != theirs {
		t.Errorf("the Secret in the namespace the Studio did not create was rewritten")
	}
	for _, k := range []kubernetes.Kind{kubernetes.KindRoleBinding, kubernetes.KindNetworkPolicy, kubernetes.KindResourceQuota, kubernetes.KindDeployment,
		kubernetes.KindService, kubernetes.KindJob, kubernetes.KindPGCluster, kubernetes.KindBucketClaim} {
		if items, err := f.client.List(f.ctx, k, f.ns, ""); err != nil || len(items) != 0 {
			t.Errorf("%d %ss in the namespace the Studio did not create (%v)", len(items), k.Kind, err)
		}
	}
}

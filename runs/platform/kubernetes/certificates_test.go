package kubernetes_test

// The test cluster runs no cert-manager: these tests play it. They write
// what its controllers write, the way they write it (the CertificateRequest
// and Order carry the Certificate's labels and an owner reference; the
// Challenge only its Order's owner reference; status through the status
// subresource: the Certificate's Issuing and Ready conditions,
// lastFailureTime and failedIssuanceAttempts, the request's Ready
// condition and signed certificate, the Order's and Challenge's state and
// reason), and check what the Studio reads and writes in return.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
	"github.com/skali-dev/studio/store"
)

const certManifest = `name: certs
applications:
  web:
    image: registry.local/web:1
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: wiki.test
        port: http
        tls: automatic
    deployment:
      rollout:
        timeout: 60s
`

const studioAccount = "system:serviceaccount:skali-studio:skali-studio"

// asStudio applies deploy/kubernetes (with cert-manager.yaml) and returns the Studio's service
// account, so that the driver runs with exactly the manifest's RBAC ("" =
// as the admin, when the cluster has no kubectl).
func asStudio(t *testing.T) string {
	cluster := clustertest.Start(t)
	if cluster.Kubectl == "" {
		return ""
	}
	out, err := exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "apply", "--server-side",
		"-f", "../../../deploy/kubernetes/studio.yaml", "-f", "../../../deploy/kubernetes/cert-manager.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("applying deploy/kubernetes: %v: %s", err, out)
	}
	// The API server's authorizer learns new rules a moment later. The
	// Studio binds cert-manager's role in each namespace it creates.
	eventually(t, "the Studio's role to take effect", func() bool {
		return exec.Command(cluster.Kubectl, "--kubeconfig", cluster.Kubeconfig, "auth", "can-i", "--as", studioAccount,
			"bind", "clusterroles.rbac.authorization.k8s.io/"+kubernetes.DefaultCertManagerRole).Run() == nil
	})
	return studioAccount
}

// useClusterIssuer makes the fixture's platform request certificates
// from cert-manager's ClusterIssuer issuer.
func (f *fixture) useClusterIssuer(issuer string) {
	old := f.platform
	opts := old.Opts
	opts.ClusterIssuer = issuer
	opts.IssueTimeout = 2 * time.Minute
	f.platform = kubernetes.New(old.Client, opts)
	old.Close()
	f.t.Cleanup(f.platform.Close)
	f.svc = runs.NewService(f.db, f.vault, f.platform, time.Now, opts.Logger)
}

// recorder is an Output the test reads.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) Line(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, s)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// index is the first line containing s, or -1.
func (r *recorder) index(s string) int {
	return slices.IndexFunc(r.all(), func(l string) bool { return strings.Contains(l, s) })
}

// eventually waits (up to a minute) for cond, which the Studio reaches
// asynchronously.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// certManager plays cert-manager for one domain's Certificate.
type certManager struct {
	f    *fixture
	name string
	crt  kubernetes.Object
}

// certificate waits for the Studio's Certificate of domain.
func (f *fixture) certManager(domain string) *certManager {
	f.t.Helper()
	cm := &certManager{f: f, name: kubernetes.CertificateName(domain)}
	eventually(f.t, "the Studio's Certificate of "+domain, func() bool {
		var err error
		cm.crt, err = f.client.Get(f.ctx, kubernetes.KindCertificate, f.ns, cm.name)
		return err == nil
	})
	return cm
}

func (cm *certManager) status(k kubernetes.Kind, name string, status kubernetes.Object) {
	cm.f.t.Helper()
	patch, _ := json.Marshal(kubernetes.Object{"status": status})
	if err := cm.f.client.PatchStatus(cm.f.ctx, k, cm.f.ns, name, patch); err != nil {
		cm.f.t.Fatalf("writing the status of %s %s as cert-manager: %v", k.Kind, name, err)
	}
}

func condition(typ, status, reason, message string) kubernetes.Object {
	return kubernetes.Object{"type": typ, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

func (cm *certManager) create(k kubernetes.Kind, obj kubernetes.Object) kubernetes.Object {
	cm.f.t.Helper()
	o, err := cm.f.client.Apply(cm.f.ctx, k, obj)
	if err != nil {
		cm.f.t.Fatalf("creating %s as cert-manager: %v", k.Kind, err)
	}
	return o
}

func ownedBy(o kubernetes.Object) []any {
	return []any{kubernetes.Object{"apiVersion": o["apiVersion"], "kind": o["kind"], "name": str(o, "metadata", "name"),
		"uid": str(o, "metadata", "uid"), "controller": true, "blockOwnerDeletion": true}}
}

// request creates revision n's CertificateRequest, as the request manager
// does, and then its ACME Order and HTTP-01 Challenge.
func (cm *certManager) request(n int) (req, order, challenge kubernetes.Object) {
	issuer := kubernetes.Object{"name": "letsencrypt", "kind": "ClusterIssuer", "group": "cert-manager.io"}
	labels := at(cm.crt, "metadata", "labels")
	csr := []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
	reqName := fmt.Sprintf("%s-%d", cm.name, n)
	req = cm.create(kubernetes.KindCertificateRequest, kubernetes.Object{
		"metadata": kubernetes.Object{"name": reqName, "namespace": cm.f.ns, "labels": labels, "ownerReferences": ownedBy(cm.crt),
			"annotations": kubernetes.Object{"cert-manager.io/certificate-name": cm.name, "cert-manager.io/certificate-revision": fmt.Sprint(n)}},
		"spec": kubernetes.Object{"issuerRef": issuer, "request": csr}})
	cm.status(kubernetes.KindCertificateRequest, reqName, kubernetes.Object{"conditions": []any{
		condition("Approved", "True", "cert-manager.io", "Certificate request has been approved by cert-manager.io"),
		condition("Ready", "False", "Pending", "Waiting on certificate issuance from order "+cm.f.ns+"/"+reqName+"-1234"),
	}})
	order = cm.create(kubernetes.KindOrder, kubernetes.Object{
		"metadata": kubernetes.Object{"name": reqName + "-1234", "namespace": cm.f.ns, "labels": labels, "ownerReferences": ownedBy(req)},
		"spec":     kubernetes.Object{"issuerRef": issuer, "request": csr, "dnsNames": []any{"wiki.test"}}})
	token := fmt.Sprintf("tok%dabcdefghijklmnopqrstuvwxyz", n)
	challenge = cm.create(kubernetes.KindChallenge, kubernetes.Object{
		"metadata": kubernetes.Object{"name": reqName + "-1234-5678", "namespace": cm.f.ns, "ownerReferences": ownedBy(order)},
		"spec": kubernetes.Object{"authorizationURL": "https://acme.test/authz/1", "dnsName": "wiki.test", "issuerRef": issuer,
			"key": token + ".thumbprint", "solver": kubernetes.Object{"http01": kubernetes.Object{"gatewayHTTPRoute": kubernetes.Object{}}},
			"token": token, "type": "HTTP-01", "url": "https://acme.test/chall/1"}})
	cm.status(kubernetes.KindChallenge, str(challenge, "metadata", "name"), kubernetes.Object{"state": "pending", "presented": true, "processing": true})
	cm.status(kubernetes.KindOrder, str(order, "metadata", "name"), kubernetes.Object{"state": "pending", "url": "https://acme.test/order/1"})
	return req, order, challenge
}

// issuing sets the Certificate's Issuing condition, as the trigger
// controller does for a Certificate whose Secret does not exist.
func (cm *certManager) issuing() {
	cm.status(kubernetes.KindCertificate, cm.name, kubernetes.Object{"conditions": []any{
		condition("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist"),
		condition("Issuing", "True", "DoesNotExist", "Issuing certificate as Secret does not exist"),
	}})
}

// issue completes an issuance: the Challenge and Order valid, the request
// signed, the Certificate Ready. It returns the certificate's serial.
func (cm *certManager) issue(req, order, challenge kubernetes.Object) string {
	cm.status(kubernetes.KindChallenge, str(challenge, "metadata", "name"), kubernetes.Object{"state": "valid", "presented": false, "processing": false, "reason": "Successfully authorized domain"})
	cm.status(kubernetes.KindOrder, str(order, "metadata", "name"), kubernetes.Object{"state": "valid"})
	certPEM, serial, notBefore, notAfter := selfSigned(cm.f.t, "wiki.test")
	cm.status(kubernetes.KindCertificateRequest, str(req, "metadata", "name"), kubernetes.Object{"certificate": []byte(certPEM), "conditions": []any{
		condition("Approved", "True", "cert-manager.io", "Certificate request has been approved by cert-manager.io"),
		condition("Ready", "True", "Issued", "Certificate fetched from issuer successfully"),
	}})
	cm.status(kubernetes.KindCertificate, cm.name, kubernetes.Object{
		"notBefore": notBefore.Format(time.RFC3339), "notAfter": notAfter.Format(time.RFC3339), "revision": 1,
		"conditions": []any{condition("Ready", "True", "Ready", "Certificate is up to date and has not expired")}})
	return serial
}

// fail ends an issuance in a failed Order: the Challenge and Order
// invalid, the request failed, the Certificate's Issuing condition False.
func (cm *certManager) fail(req, order, challenge kubernetes.Object, reason string, attempts int) {
	cm.status(kubernetes.KindChallenge, str(challenge, "metadata", "name"), kubernetes.Object{"state": "invalid", "presented": false, "processing": false, "reason": reason})
	cm.status(kubernetes.KindOrder, str(order, "metadata", "name"), kubernetes.Object{"state": "invalid", "reason": ""})
	now := time.Now().UTC().Format(time.RFC3339)
	msg := "Failed to wait for order resource \"" + str(order, "metadata", "name") + "\" to become ready: order is in \"invalid\" state: "
	cm.status(kubernetes.KindCertificateRequest, str(req, "metadata", "name"), kubernetes.Object{"failureTime": now, "conditions": []any{
		condition("Approved", "True", "cert-manager.io", "Certificate request has been approved by cert-manager.io"),
		condition("Ready", "False", "Failed", msg),
	}})
	cm.status(kubernetes.KindCertificate, cm.name, kubernetes.Object{"lastFailureTime": now, "failedIssuanceAttempts": attempts, "conditions": []any{
		condition("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist"),
		condition("Issuing", "False", "Failed", "The certificate request has failed to complete and will be retried: "+msg),
	}})
}

func selfSigned(t testing.TB, domain string) (certPEM, serial string, notBefore, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sn, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 100))
	notBefore = time.Now().Add(-time.Minute).Truncate(time.Second).UTC()
	notAfter = notBefore.Add(90 * 24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: domain},
		DNSNames: []string{domain}, NotBefore: notBefore, NotAfter: notAfter}, &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: "test CA"}}, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), hex.EncodeToString(sn.Bytes()), notBefore, notAfter
}

func TestCertificateGoesThroughIssuingToReady(t *testing.T) {
	t.Parallel()
	f := newFixtureAs(t, asStudio(t), certManifest, "cert-ready", map[string]string{"SESSION_SECRET": secretValue})
	f.useClusterIssuer("letsencrypt")
	env := platform.Env{ID: f.env.ID, Project: f.project.Name, Name: f.env.Name}
	out := &recorder{}
	type result struct {
		cert *platform.IssuedCertificate
		is   platform.Issuance
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c, is, err := f.platform.Issue(f.ctx, env, "wiki.test", time.Now(), out)
		done <- result{c, is, err}
	}()

	cm := f.certManager("wiki.test")
	if str(cm.crt, "spec", "issuerRef", "name") != "letsencrypt" || str(cm.crt, "spec", "issuerRef", "kind") != "ClusterIssuer" ||
		str(cm.crt, "spec", "dnsNames", 0) != "wiki.test" || str(cm.crt, "spec", "secretName") != cm.name ||
		str(cm.crt, "metadata", "labels", kubernetes.LabelManagedBy) != "skali-studio" {
		t.Fatalf("the Certificate the Studio applied: %v", cm.crt)
	}
	cm.issuing()
	// The Studio follows the objects through separate watches: it reports
	// the states it sees, and a state the test plays and changes at once
	// may be seen late or not at all. So each state is played once the
	// Studio has reported the one before, as cert-manager's steps are
	// seconds apart.
	eventually(t, "the Certificate's Issuing condition in the output", func() bool {
		return out.index("Issuing True (DoesNotExist)") >= 0
	})
	req, order, challenge := cm.request(1)
	eventually(t, "the Order's progress in the output", func() bool {
		select {
		case r := <-done:
			t.Fatalf("Issue returned while the Order was pending: %+v", r)
		default:
		}
		return out.index("Order pending") >= 0 && out.index("Challenge pending") >= 0
	})
	serial := cm.issue(req, order, challenge)

	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("Issue did not return after the Certificate became Ready; output %q", out.all())
	}
	if r.err != nil {
		t.Fatalf("Issue: %v", r.err)
	}
	if r.cert.Serial != serial || !strings.Contains(r.cert.PEM, "BEGIN CERTIFICATE") || r.cert.NotAfter.Before(time.Now().Add(80*24*time.Hour)) {
		t.Errorf("issued %+v, want the request's certificate (serial %s)", r.cert, serial)
	}
	if r.is.CertificateRequest != str(req, "metadata", "name") || r.is.Order != str(order, "metadata", "name") ||
		r.is.ChallengeResult != "valid" || r.is.ChallengeURL != "http://wiki.test/.well-known/acme-challenge/"+str(challenge, "spec", "token") ||
		!strings.HasPrefix(r.is.Challenge, "HTTP-01 tok1") {
		t.Errorf("issuance record %+v", r.is)
	}
	// The Challenge, Order, request and Certificate become valid and Ready
	// within milliseconds here: "Challenge valid" may be seen or passed
	// over, but never after Ready.
	issuing, pending, valid, ready := out.index("Issuing True (DoesNotExist)"), out.index("Order pending"), out.index("Challenge valid"), out.index("Ready True (Ready)")
	if issuing < 0 || pending < issuing || ready < pending || (valid >= 0 && (valid < pending || valid > ready)) {
		t.Errorf("the output does not follow the issuance: %q", out.all())
	}

	// Asked again, the Ready Certificate answers at once and is not
	// rewritten.
	rv := str(f.get(kubernetes.KindCertificate, cm.name), "metadata", "resourceVersion")
	c, _, err := f.platform.Issue(f.ctx, env, "wiki.test", time.Now(), platform.Discard)
	if err != nil || c.Serial != serial {
		t.Fatalf("issuing a Ready certificate again: %v, %+v", err, c)
	}
	if again := str(f.get(kubernetes.KindCertificate, cm.name), "metadata", "resourceVersion"); again != rv {
		t.Errorf("the unchanged Certificate was rewritten (%s → %s)", rv, again)
	}
	f.checkNoPlaintext()
}

// execute runs a run to its end in the background.
func (f *fixture) execute(runID int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			res, err := f.svc.Runner.Execute(f.ctx, runID)
			if err != nil || res.Finished {
				done <- err
				return
			}
			if i > 20 {
				done <- fmt.Errorf("run %d did not finish; it waits until %v", runID, res.WaitUntil)
				return
			}
			time.Sleep(time.Until(res.WaitUntil))
		}
	}()
	return done
}

func wait(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not end")
	}
}

func TestFailedOrderGoesIntoBackoffAndCheckNowRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, certManifest, "cert-backoff", map[string]string{"SESSION_SECRET": secretValue})
	f.useClusterIssuer("letsencrypt")
	run, err := f.svc.StartDeploy(f.ctx, store.Actor{}, f.env, runs.DeployRequest{})
	if err != nil {
		t.Fatal(err)
	}
	done := f.execute(run.ID)

	cm := f.certManager("wiki.test")
	cm.issuing()
	req, order, challenge := cm.request(1)
	const reason = "Waiting for HTTP-01 challenge propagation: wrong status code '404', expected '200'"
	cm.fail(req, order, challenge, reason, 1)
	wait(t, done)

	c, err := f.db.CertificateFor(f.ctx, f.env.ID, "wiki.test")
	if err != nil {
		t.Fatal(err)
	}
	if c.State != store.CertFailed || c.Reason != reason || c.Failures != 1 || c.LastFailureAt == nil || c.NextRetryAt == nil ||
		c.NextRetryAt.Sub(*c.LastFailureAt) != time.Hour {
		t.Fatalf("after the failed Order the certificate is %+v, want failed with the Challenge's reason, retried in 1 h", c)
	}

	// Check now retries at once: the Studio asks cert-manager to issue
	// again, as `cmctl renew` does, and this time the Order succeeds.
	env, err := f.db.EnvironmentByID(f.ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	results, err := f.svc.CheckNow(f.ctx, store.Actor{}, env, "wiki.test")
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Run == nil {
		t.Fatalf("check now: %+v", results)
	}
	done = f.execute(results[0].Run.ID)
	eventually(t, "the Studio to trigger a new issuance", func() bool {
		crt, err := f.client.Get(f.ctx, kubernetes.KindCertificate, f.ns, cm.name)
		if err != nil {
			return false
		}
		cs, _ := at(crt, "status", "conditions").([]any)
		for _, c := range cs {
			if str(c, "type") == "Issuing" && str(c, "status") == "True" && str(c, "reason") == "ManuallyTriggered" {
				return true
			}
		}
		return false
	})
	req, order, challenge = cm.request(2)
	serial := cm.issue(req, order, challenge)
	wait(t, done)
	if c, err = f.db.CertificateFor(f.ctx, f.env.ID, "wiki.test"); err != nil {
		t.Fatal(err)
	}
	if c.State != store.CertIssued || c.Serial != serial || c.Attempts != 2 {
		t.Fatalf("after Check now the certificate is %+v, want issued (serial %s) at the second attempt", c, serial)
	}
}

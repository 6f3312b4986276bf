package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skali-dev/studio/runs/platform"
)

// FieldManager is the one field manager of every object the Studio applies.
const FieldManager = "skali-studio"

// Client speaks to one API server over its REST API: server-side apply,
// get, list, delete and watch of the few kinds the driver uses. It keeps
// the product free of client-go's dependency tree.
type Client struct {
	server string
	token  string
	http   *http.Client
	// Requests counts the API requests made (watches included).
	Requests atomic.Int64
	// Impersonate, when set, makes every request as that user (tests
	// check the Studio's RBAC with it).
	Impersonate string
	identity    atomic.Pointer[string]
}

// Object is a Kubernetes object as JSON.
type Object = map[string]any

// StatusError is an API server's refusal.
type StatusError struct {
	Code    int
	Reason  string
	Message string
	// retryAfter is the answer's Retry-After in seconds (0: none).
	retryAfter int
	// Causes are the answer's details.causes (a server-side apply
	// conflict names each field and the manager that owns it).
	Causes []StatusCause
}

// StatusCause is one cause of a refusal.
type StatusCause struct {
	Reason, Message, Field string
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("the API server answered %d %s", e.Code, e.Reason)
}

// IsNotFound reports whether err is the API server's 404.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// LoadClient reads a kubeconfig (its current context); with path empty it
// uses the in-cluster service account, then $KUBECONFIG.
func LoadClient(path string) (*Client, error) {
	if path == "" {
		if c, err := inCluster(); err == nil {
			return c, nil
		}
		path = os.Getenv("KUBECONFIG")
		if i := strings.IndexByte(path, os.PathListSeparator); i >= 0 {
			path = path[:i]
		}
		if path == "" {
			return nil, errors.New("no kubeconfig: not running in a cluster, and neither --kubeconfig nor $KUBECONFIG is set")
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	var kc struct {
		CurrentContext string `yaml:"current-context"`
		Clusters       []struct {
			Name    string `yaml:"name"`
			Cluster struct {
				Server                   string `yaml:"server"`
				CertificateAuthority     string `yaml:"certificate-authority"`
				CertificateAuthorityData string `yaml:"certificate-authority-data"`
				InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			Name string `yaml:"name"`
			User struct {
				Token                 string `yaml:"token"`
				TokenFile             string `yaml:"tokenFile"`
				ClientCertificate     string `yaml:"client-certificate"`
				ClientCertificateData string `yaml:"client-certificate-data"`
				ClientKey             string `yaml:"client-key"`
				ClientKeyData         string `yaml:"client-key-data"`
			} `yaml:"user"`
		} `yaml:"users"`
		Contexts []struct {
			Name    string `yaml:"name"`
			Context struct {
				Cluster string `yaml:"cluster"`
				User    string `yaml:"user"`
			} `yaml:"context"`
		} `yaml:"contexts"`
	}
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	base := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	var clusterName, userName string
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			clusterName, userName = c.Context.Cluster, c.Context.User
		}
	}
	if clusterName == "" {
		return nil, fmt.Errorf("kubeconfig %s: its current context %q is not among its contexts", path, kc.CurrentContext)
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	c := &Client{}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Name != clusterName {
			continue
		}
		found = true
		c.server = strings.TrimRight(cl.Cluster.Server, "/")
		tlsConf.InsecureSkipVerify = cl.Cluster.InsecureSkipTLSVerify
		ca, err := pemFrom(cl.Cluster.CertificateAuthorityData, rel(cl.Cluster.CertificateAuthority))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: certificate authority: %w", path, err)
		}
		if ca != nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				return nil, fmt.Errorf("kubeconfig %s: the certificate authority holds no certificate", path)
			}
			tlsConf.RootCAs = pool
		}
	}
	if !found {
		return nil, fmt.Errorf("kubeconfig %s: no cluster named %q", path, clusterName)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		c.token = u.User.Token
		if u.User.TokenFile != "" {
			b, err := os.ReadFile(rel(u.User.TokenFile))
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s: token file: %w", path, err)
			}
			c.token = strings.TrimSpace(string(b))
		}
		cert, err := pemFrom(u.User.ClientCertificateData, rel(u.User.ClientCertificate))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: client certificate: %w", path, err)
		}
		key, err := pemFrom(u.User.ClientKeyData, rel(u.User.ClientKey))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: client key: %w", path, err)
		}
		if cert != nil && key != nil {
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s: client certificate: %w", path, err)
			}
			tlsConf.Certificates = []tls.Certificate{pair}
		}
	}
	c.http = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf, MaxIdleConnsPerHost: 16, ForceAttemptHTTP2: true}}
	return c, nil
}

func pemFrom(data, file string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(data)
	}
	if file != "" {
		return os.ReadFile(file)
	}
	return nil, nil
}

func inCluster() (*Client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a cluster")
	}
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount/"
	token, err := os.ReadFile(dir + "token")
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(dir + "ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return &Client{server: "https://" + host + ":" + port, token: strings.TrimSpace(string(token)),
		http: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}}, nil
}

// Kind is where the API serves one kind.
type Kind struct {
	APIVersion, Kind, Resource string
	Namespaced                 bool
}

func (k Kind) path(namespace, name string) string {
	p := "/api/" + k.APIVersion
	if strings.Contains(k.APIVersion, "/") {
		p = "/apis/" + k.APIVersion
	}
	if k.Namespaced {
		p += "/namespaces/" + url.PathEscape(namespace)
	}
	p += "/" + k.Resource
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

// The kinds the driver applies, reads and watches.
var (
	KindNamespace   = Kind{"v1", "Namespace", "namespaces", false}
	KindSecret      = Kind{"v1", "Secret", "secrets", true}
	KindService     = Kind{"v1", "Service", "services", true}
	KindPVC         = Kind{"v1", "PersistentVolumeClaim", "persistentvolumeclaims", true}
	KindPod         = Kind{"v1", "Pod", "pods", true}
	KindDeployment  = Kind{"apps/v1", "Deployment", "deployments", true}
	KindJob         = Kind{"batch/v1", "Job", "jobs", true}
	KindHPA         = Kind{"autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true}
	KindPGCluster   = Kind{"postgresql.cnpg.io/v1", "Cluster", "clusters", true}
	KindBucketClaim = Kind{"objectbucket.io/v1alpha1", "ObjectBucketClaim", "objectbucketclaims", true}
	KindHTTPRoute   = Kind{"gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes", true}
	KindConfigMap   = Kind{"v1", "ConfigMap", "configmaps", true}
	KindEvent       = Kind{"v1", "Event", "events", true}
	KindReplicaSet  = Kind{"apps/v1", "ReplicaSet", "replicasets", true}
	// The environment namespace's own: the Studio's RoleBinding, written
	// first; its NetworkPolicy and ResourceQuota.
	KindRoleBinding   = Kind{"rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", true}
	KindNetworkPolicy = Kind{"networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", true}
	KindResourceQuota = Kind{"v1", "ResourceQuota", "resourcequotas", true}
)

// Kinds are the kinds the driver writes or causes (pods, replica sets,
// events), for reading an environment back.
func Kinds() []Kind {
	return []Kind{KindNamespace, KindSecret, KindService, KindPVC, KindPod, KindDeployment, KindJob, KindHPA,
		KindPGCluster, KindBucketClaim, KindHTTPRoute, KindConfigMap, KindEvent, KindReplicaSet,
		KindRoleBinding, KindNetworkPolicy, KindResourceQuota, KindCertificate, KindCertificateRequest, KindOrder, KindChallenge}
}

// RetryWindow is how long a request is retried while the API server
// cannot be reached or answers 5xx (a restart, an upgrade, a blink of the
// network): as long as a database write is (store.RetryWindow).
const RetryWindow = 45 * time.Second

// retryWindow is RetryWindow; tests shorten it.
var retryWindow = RetryWindow

// UnreachableError is a request that failed for RetryWindow because the
// API server could not be reached or kept answering 5xx.
type UnreachableError struct {
	Server string
	// Cause is the last failure in a few words ("connection refused",
	// "answered 503 Service Unavailable: …").
	Cause string
	Err   error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the Kubernetes API server at %s could not be reached: %s", e.Server, e.Cause)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// failure says whether err of one request is worth trying again (the API
// server could not be reached, or answered 429 or 5xx), and why in a few
// words; unreachable: not an answer of the API server's admission (429).
func failure(err error) (retry, unreachable bool, cause string) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false, false, ""
	}
	var se *StatusError
	if errors.As(err, &se) {
		switch se.Code {
		case http.StatusTooManyRequests:
			return true, false, "answered 429 Too Many Requests"
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			if se.Code == http.StatusInternalServerError && strings.Contains(se.Message, "failed to create typed patch object") {
				// A server-side apply of an object its kind's schema
				// does not take (a field it lacks): the object's
				// fault, the same answer every time.
				return false, false, ""
			}
			cause = fmt.Sprintf("answered %d %s", se.Code, http.StatusText(se.Code))
			if se.Message != "" {
				cause += ": " + se.Message
			}
			return true, true, cause
		}
		return false, false, ""
	}
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	if errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) {
		return false, false, "" // a misconfiguration, not a blink
	}
	var sys *os.SyscallError
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &sys):
		return true, true, sys.Err.Error()
	case errors.As(err, &op):
		return true, true, op.Err.Error()
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return true, true, "the connection was closed before an answer came"
	case errors.As(err, &ne) && ne.Timeout():
		return true, true, "no answer in time"
	}
	return false, false, ""
}

// warnings reads the texts of Warning headers (RFC 7234 form, which the
// API server uses: `299 - "text"`), each once.
func warnings(headers []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, h := range headers {
		for _, one := range splitWarnings(h) {
			_, rest, ok := strings.Cut(strings.TrimSpace(one), " ")
			if !ok {
				continue
			}
			_, text, ok := strings.Cut(strings.TrimSpace(rest), " ")
			if !ok {
				continue
			}
			text = strings.TrimSpace(text)
			if len(text) >= 2 && text[0] == '"' {
				if u, err := strconv.Unquote(text); err == nil {
					text = u
				} else if i := strings.LastIndexByte(text, '"'); i > 0 {
					text = text[1:i]
				}
			}
			if text != "" && !seen[text] {
				seen[text] = true
				out = append(out, text)
			}
		}
	}
	return out
}

// splitWarnings splits one header value at the commas between warnings,
// not at commas inside a quoted text.
func splitWarnings(h string) []string {
	var out []string
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case escaped:
			escaped = false
		case c == '\\' && quoted:
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, h[start:i])
			start = i + 1
		}
	}
	return append(out, h[start:])
}

// viaKubelet reports whether the API server answers path by asking a
// node's kubelet (a pod's log, exec, port-forward, a proxy).
func viaKubelet(path string) bool {
	p, _, _ := strings.Cut(path, "?")
	return strings.HasSuffix(p, "/log") || strings.HasSuffix(p, "/exec") || strings.HasSuffix(p, "/portforward") || strings.Contains(p, "/proxy")
}

// do sends one request. While the API server cannot be reached or answers
// 5xx, it is tried again with backoff for up to RetryWindow (the Waiter of
// ctx hears that it waits, and when the API server is back); an answer 429
// (the API server's priority and fairness, or a kind's storage still
// initializing after its CRD was installed) is tried again after its
// Retry-After. Every request the driver makes is idempotent (a create
// tried again finds the object made: the callers take AlreadyExists).
// After RetryWindow the error is an UnreachableError naming the server
// and the last cause.
func (c *Client) do(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	var since time.Time
	reported := false
	w := platform.WaiterFrom(ctx)
	what := "the Kubernetes API server at " + c.server
	wait := 250 * time.Millisecond
	for {
		resp, err := c.doOnce(ctx, method, path, contentType, body)
		retry, unreachable, cause := failure(err)
		var se *StatusError
		if retry && unreachable && errors.As(err, &se) && viaKubelet(path) {
			// A pod's log comes from its node's kubelet: a 5xx is the
			// kubelet's (or a node that keeps none), not the API server's.
			retry = false
		}
		if !retry || ctx.Err() != nil {
			if reported && ctx.Err() == nil {
				w.Reachable(what, since)
			}
			return resp, err
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) >= retryWindow {
			// Given up on: the caller fails with the cause (its Waiter
			// hears of the server again once a request gets an answer).
			if !unreachable {
				return nil, err
			}
			return nil, &UnreachableError{Server: c.server, Cause: cause, Err: err}
		}
		if unreachable && w != nil && !reported {
			reported = true
			w.Unreachable(what, since, cause)
		}
		next := wait
		if errors.As(err, &se) && se.retryAfter > 0 {
			next = time.Duration(se.retryAfter) * time.Second
		}
		next = min(next, 2*time.Second, retryWindow-time.Since(since))
		wait = min(wait*2, 2*time.Second)
		t := time.NewTimer(max(next, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

func (c *Client) doOnce(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, r)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.Impersonate != "" {
		req.Header.Set("Impersonate-User", c.Impersonate)
	}
	c.Requests.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if ws := resp.Header.Values("Warning"); len(ws) > 0 {
		if w, ok := platform.WaiterFrom(ctx).(platform.Warner); ok {
			for _, text := range warnings(ws) {
				w.Warn("the Kubernetes API server", text)
			}
		}
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		se := &StatusError{Code: resp.StatusCode}
		se.retryAfter, _ = strconv.Atoi(resp.Header.Get("Retry-After"))
		var st struct {
			Reason, Message string
			Details         struct{ Causes []StatusCause }
		}
		if json.Unmarshal(data, &st) == nil {
			se.Reason, se.Message, se.Causes = st.Reason, st.Message, st.Details.Causes
		}
		return nil, se
	}
	return resp, nil
}

func (c *Client) object(ctx context.Context, method, path, contentType string, body []byte) (Object, error) {
	resp, err := c.do(ctx, method, path, contentType, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var o Object
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return nil, fmt.Errorf("reading the API server's answer: %w", err)
	}
	return o, nil
}

// Apply applies obj by server-side apply with the Studio's field manager,
// without forcing: a field another manager owns is a conflict, not taken.
// An object equal to what is stored is not rewritten by the API server.
// Fields are validated strictly: a field the kind does not have (a
// misspelt key, a field a CRD's version lacks) fails the request with the
// API server's words, instead of being dropped; the server's warnings
// (a deprecated API, say) reach the step's log (platform.Warner).
func (c *Client) Apply(ctx context.Context, k Kind, obj Object) (Object, error) {
	md, _ := obj["metadata"].(Object)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	obj["apiVersion"], obj["kind"] = k.APIVersion, k.Kind
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return c.object(ctx, http.MethodPatch, k.path(ns, name)+"?fieldManager="+FieldManager+"&fieldValidation=Strict", "application/apply-patch+yaml", body)
}

// ApplyForce is Apply with force: the fields of obj another manager owns
// (a hand edit) become the Studio's again; fields obj does not set stay
// theirs.
func (c *Client) ApplyForce(ctx context.Context, k Kind, obj Object) (Object, error) {
	md, _ := obj["metadata"].(Object)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	obj["apiVersion"], obj["kind"] = k.APIVersion, k.Kind
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return c.object(ctx, http.MethodPatch, k.path(ns, name)+"?fieldManager="+FieldManager+"&fieldValidation=Strict&force=true", "application/apply-patch+yaml", body)
}

// Create creates obj, and fails with the API server's 409 when an object
// of that name exists: unlike Apply it never takes over an object someone
// else made.
func (c *Client) Create(ctx context.Context, k Kind, obj Object) (Object, error) {
	md, _ := obj["metadata"].(Object)
	ns, _ := md["namespace"].(string)
	obj["apiVersion"], obj["kind"] = k.APIVersion, k.Kind
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return c.object(ctx, http.MethodPost, k.path(ns, "")+"?fieldManager="+FieldManager+"&fieldValidation=Strict", "application/json", body)
}

// IsAlreadyExists reports whether err is the API server's 409 for a
// create of a name that exists.
func IsAlreadyExists(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusConflict && se.Reason == "AlreadyExists"
}

// Identity is the user the client acts as: the impersonated one, the
// subject of a service account token (read from the token itself), or
// else what the API server says (a SelfSubjectReview, which every
// authenticated user may make).
func (c *Client) Identity(ctx context.Context) (string, error) {
	if c.Impersonate != "" {
		return c.Impersonate, nil
	}
	if v := c.identity.Load(); v != nil {
		return *v, nil
	}
	name := tokenSubject(c.token)
	if name == "" {
		o, err := c.object(ctx, http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", "application/json",
			[]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		if err != nil {
			return "", fmt.Errorf("asking the API server who the Studio is: %w", err)
		}
		st, _ := o["status"].(Object)
		ui, _ := st["userInfo"].(Object)
		name, _ = ui["username"].(string)
		if name == "" {
			return "", errors.New("the API server did not say who the Studio is")
		}
	}
	c.identity.Store(&name)
	return name, nil
}

// CanI asks the API server whether the client may make a request (a
// SelfSubjectAccessReview, which every authenticated user may make): the
// answer of its authorizer as it stands, without making the request.
func (c *Client) CanI(ctx context.Context, verb, group, resource, namespace, name string) (bool, error) {
	body, err := json.Marshal(Object{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
		"spec": Object{"resourceAttributes": Object{"verb": verb, "group": group, "resource": resource, "namespace": namespace, "name": name}}})
	if err != nil {
		return false, err
	}
	o, err := c.object(ctx, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "application/json", body)
	if err != nil {
		return false, err
	}
	st, _ := o["status"].(Object)
	allowed, _ := st["allowed"].(bool)
	return allowed, nil
}

// tokenSubject is the subject of a service account's token (a JWT whose
// payload names system:serviceaccount:NAMESPACE:NAME), "" for any other
// token. The signature is the API server's to check, not the client's.
func tokenSubject(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil || !strings.HasPrefix(claims.Sub, "system:serviceaccount:") {
		return ""
	}
	return claims.Sub
}

// Get reads one object.
func (c *Client) Get(ctx context.Context, k Kind, namespace, name string) (Object, error) {
	return c.object(ctx, http.MethodGet, k.path(namespace, name), "", nil)
}

// List reads the objects of a kind in a namespace matching a label selector.
func (c *Client) List(ctx context.Context, k Kind, namespace, selector string) ([]Object, error) {
	o, err := c.object(ctx, http.MethodGet, k.path(namespace, "")+"?labelSelector="+url.QueryEscape(selector), "", nil)
	if err != nil {
		return nil, err
	}
	items, _ := o["items"].([]any)
	out := make([]Object, 0, len(items))
	for _, it := range items {
		if m, ok := it.(Object); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// PatchStatus merges patch (a strategic merge patch for built-in kinds, a
// merge patch for custom ones) into an object's status subresource. The
// driver writes one status only, a Certificate's Issuing condition to
// retry a failed issuance (as `cmctl renew` does); tests use it to play
// the controllers and nodes the test cluster does not run.
func (c *Client) PatchStatus(ctx context.Context, k Kind, namespace, name string, patch []byte) error {
	ct := "application/merge-patch+json"
	if !strings.Contains(k.APIVersion, ".") {
		ct = "application/strategic-merge-patch+json"
	}
	_, err := c.object(ctx, http.MethodPatch, k.path(namespace, name)+"/status", ct, patch)
	return err
}

// JSONPatch applies a JSON patch (RFC 6902) to an object under the
// Studio's field manager and returns the object as it now stands; its
// test operations make it fail rather than change an object that moved.
func (c *Client) JSONPatch(ctx context.Context, k Kind, namespace, name string, patch []byte) (Object, error) {
	return c.object(ctx, http.MethodPatch, k.path(namespace, name)+"?fieldManager="+FieldManager, "application/json-patch+json", patch)
}

// MergePatch applies a JSON merge patch (RFC 7386) to an object under the
// field manager FieldManager+suffix and returns the object as it now stands.
func (c *Client) MergePatch(ctx context.Context, k Kind, namespace, name, suffix string, patch []byte) (Object, error) {
	return c.object(ctx, http.MethodPatch, k.path(namespace, name)+"?fieldManager="+FieldManager+suffix, "application/merge-patch+json", patch)
}

// Delete deletes one object (its dependents in the background); a missing
// one is no error.
func (c *Client) Delete(ctx context.Context, k Kind, namespace, name string) error {
	return c.DeleteUID(ctx, k, namespace, name, "")
}

// DeleteUID is Delete of the object only while it is the one with that
// uid ("" for any): another object made since under the same name is
// refused with the API server's 409.
func (c *Client) DeleteUID(ctx context.Context, k Kind, namespace, name, uid string) error {
	body := []byte(`{"propagationPolicy":"Background"}`)
	if uid != "" {
		body, _ = json.Marshal(Object{"propagationPolicy": "Background", "preconditions": Object{"uid": uid}})
	}
	resp, err := c.do(ctx, http.MethodDelete, k.path(namespace, name), "application/json", body)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Scale sets a Deployment's replicas through its scale subresource, as an
// autoscaler does, under the field manager skali-studio-blue-green: the
// field stays the autoscaler's to change, and no apply of the Studio's
// ever owns it.
func (c *Client) Scale(ctx context.Context, k Kind, namespace, name string, replicas int) error {
	body := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	_, err := c.object(ctx, http.MethodPatch, k.path(namespace, name)+"/scale?fieldManager="+FieldManager+"-blue-green", "application/merge-patch+json", body)
	return err
}

// DeleteCollection deletes the objects of a kind in a namespace that match
// a label selector (their dependents in the background).
func (c *Client) DeleteCollection(ctx context.Context, k Kind, namespace, selector string) error {
	resp, err := c.do(ctx, http.MethodDelete, k.path(namespace, "")+"?labelSelector="+url.QueryEscape(selector), "application/json", []byte(`{"propagationPolicy":"Background"}`))
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// watchAll watches every object of a kind in a namespace that matches
// selector, calling seen with each version (a deleted object carries the
// key "deleted"), until the API server ends the watch. It starts with the
// objects that exist and reopens from the last version seen.
func (c *Client) watchAll(ctx context.Context, k Kind, namespace, selector string, seen func(Object)) error {
	p := k.path(namespace, "")
	rv := ""
	for {
		q := url.Values{"watch": {"1"}, "labelSelector": {selector}, "allowWatchBookmarks": {"true"}}
		if rv != "" {
			q.Set("resourceVersion", rv)
		}
		resp, err := c.do(ctx, http.MethodGet, p+"?"+q.Encode(), "", nil)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bufio.NewReader(resp.Body))
		for {
			var ev struct {
				Type   string `json:"type"`
				Object Object `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				break
			}
			if ev.Type == "ERROR" {
				rv = "" // usually 410 Gone: start again from the current state
				break
			}
			md, _ := ev.Object["metadata"].(Object)
			if v, _ := md["resourceVersion"].(string); v != "" {
				rv = v
			}
			switch ev.Type {
			case "BOOKMARK":
			case "DELETED":
				ev.Object["deleted"] = true
				seen(ev.Object)
			default:
				seen(ev.Object)
			}
		}
		resp.Body.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

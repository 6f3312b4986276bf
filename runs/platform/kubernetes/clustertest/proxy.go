package clustertest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"go.yaml.in/yaml/v3"
)

// Proxy is an HTTPS proxy in front of a cluster's API server that records
// every request made through it: what the Studio really calls, seen from
// outside the Studio (a test starts `studio serve` with the proxy's
// kubeconfig). It presents the bearer token it was given, so the Studio
// can be made to act as a service account.
type Proxy struct {
	// Kubeconfig is a kubeconfig whose server is the proxy.
	Kubeconfig string

	srv  *httptest.Server
	mu   sync.Mutex
	log  []Request
	open atomic.Int64 // requests not yet answered in full (watches last)
}

// Request is one API request as the API server's authorizer sees it: the
// verb (get, list, watch, create, patch, update, delete,
// deletecollection), the API group ("" for the core group), the resource
// (with "/subresource" when there is one), the namespace and name, and the
// answer's status code (0 while none came).
type Request struct {
	Verb, Group, Resource, Namespace, Name string
	// Created is the name of the object a create (POST) makes, from its
	// body: RBAC authorizes a create without it. RoleRef, for a create of
	// a RoleBinding, is the role it binds: the API server authorizes it as
	// bind on that role too.
	Created, RoleRef string
	// Path is set for requests that are not about a resource (discovery,
	// /version).
	Path   string
	Status int
}

func (r Request) String() string {
	if r.Path != "" {
		return fmt.Sprintf("%s %s → %d", r.Verb, r.Path, r.Status)
	}
	g := r.Group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s/%s %s/%s → %d", r.Verb, g, r.Resource, r.Namespace, r.Name, r.Status)
}

// StartProxy starts a proxy to the API server of kubeconfig (its current
// cluster) in dir. With token empty the kubeconfig's own credentials are
// used.
func StartProxy(kubeconfig, token, dir string) (*Proxy, error) {
	server, ca, adminToken, err := readKubeconfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	if token == "" {
		token = adminToken
	}
	upstream, err := url.Parse(server)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the kubeconfig's certificate authority holds no certificate")
	}
	p := &Proxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
		},
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true},
		FlushInterval: -1, // watches stream
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Recorded as it starts (a watch lasts), its status when it comes.
		i := p.begin(r)
		p.open.Add(1)
		defer p.open.Add(-1)
		rp.ServeHTTP(&statusRecorder{ResponseWriter: w, seen: func(code int) { p.status(i, code) }}, r)
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	p.Kubeconfig = filepath.Join(dir, "proxy-kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: proxy
  user:
    token: %s
contexts:
- name: proxy
  context: {cluster: proxy, user: proxy}
current-context: proxy
`, p.srv.URL, base64.StdEncoding.EncodeToString(certPEM), token)
	if err := os.WriteFile(p.Kubeconfig, []byte(kc), 0o600); err != nil {
		p.srv.Close()
		return nil, err
	}
	return p, nil
}

// Close stops the proxy (open watches end).
func (p *Proxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// Open is how many requests are being answered now: mostly watches.
func (p *Proxy) Open() int { return int(p.open.Load()) }

// Requests returns what was recorded so far, in order (a caller measuring
// a part slices it from the length it saw before).
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.log...)
}

// Verbs counts requests by verb.
func Verbs(reqs []Request) map[string]int {
	per := map[string]int{}
	for _, r := range reqs {
		per[r.Verb]++
	}
	return per
}

// Used returns "verb group/resource" of every resource request that the
// API server did not refuse (403), sorted, without repeats, as RBAC
// authorizes them: a server-side apply that created its object (201) was
// authorized as patch and as create.
func Used(reqs []Request) []string {
	seen := map[string]bool{}
	for _, r := range reqs {
		if r.Path != "" || r.Status == http.StatusForbidden {
			continue
		}
		seen[r.Verb+" "+r.Group+"/"+r.Resource] = true
		if r.Verb == "patch" && r.Status == http.StatusCreated {
			seen["create "+r.Group+"/"+r.Resource] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (p *Proxy) begin(r *http.Request) int {
	req := parse(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, req)
	return len(p.log) - 1
}

func (p *Proxy) status(i, code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < len(p.log) {
		p.log[i].Status = code
	}
}

// parse reads a request as the API server's request info does.
func parse(r *http.Request) Request {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	var req Request
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		req.Group = parts[1]
		rest = parts[3:]
	}
	if len(rest) == 0 {
		return Request{Verb: strings.ToLower(r.Method), Path: r.URL.Path}
	}
	if rest[0] == "namespaces" && len(rest) >= 3 {
		req.Namespace = rest[1]
		rest = rest[2:]
	}
	req.Resource = rest[0]
	if len(rest) >= 2 {
		req.Name = rest[1]
	}
	if len(rest) >= 3 {
		req.Resource += "/" + rest[2]
	}
	if r.Method == http.MethodPost && req.Name == "" && r.Body != nil {
		// A create names its object in the body (RBAC does not see it).
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		var o struct {
			Metadata struct{ Name string }
			RoleRef  struct{ Name string } `json:"roleRef"`
		}
		if err == nil && json.Unmarshal(body, &o) == nil {
			req.Created = o.Metadata.Name
			if req.Resource == "rolebindings" {
				req.RoleRef = o.RoleRef.Name
			}
		}
	}
	if req.Resource == "namespaces" && req.Name != "" {
		req.Namespace = req.Name
	}
	q := r.URL.Query()
	switch r.Method {
	case http.MethodGet:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			req.Verb = "watch"
		case req.Name == "":
			req.Verb = "list"
		default:
			req.Verb = "get"
		}
	case http.MethodPost:
		req.Verb = "create"
	case http.MethodPut:
		req.Verb = "update"
	case http.MethodPatch:
		req.Verb = "patch"
	case http.MethodDelete:
		req.Verb = "delete"
		if req.Name == "" {
			req.Verb = "deletecollection"
		}
	default:
		req.Verb = strings.ToLower(r.Method)
	}
	return req
}

type statusRecorder struct {
	http.ResponseWriter
	seen   func(int)
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
		s.seen(code)
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// readKubeconfig returns the server, certificate authority and token of a
// kubeconfig's current context (the test cluster's form: inline CA data and
// a token).
func readKubeconfig(path string) (server string, ca []byte, token string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, "", err
	}
	var kc struct {
		CurrentContext string `yaml:"current-context"`
		Clusters       []struct {
			Name    string
			Cluster struct {
				Server string
				CAData string `yaml:"certificate-authority-data"`
			}
		}
		Users []struct {
			Name string
			User struct{ Token string }
		}
		Contexts []struct {
			Name    string
			Context struct{ Cluster, User string }
		}
	}
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return "", nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	for _, c := range kc.Contexts {
		if c.Name != kc.CurrentContext {
			continue
		}
		for _, cl := range kc.Clusters {
			if cl.Name == c.Context.Cluster {
				server = cl.Cluster.Server
				if ca, err = base64.StdEncoding.DecodeString(cl.Cluster.CAData); err != nil {
					return "", nil, "", fmt.Errorf("kubeconfig %s: certificate authority: %w", path, err)
				}
			}
		}
		for _, u := range kc.Users {
			if u.Name == c.Context.User {
				token = u.User.Token
			}
		}
	}
	if server == "" || ca == nil {
		return "", nil, "", fmt.Errorf("kubeconfig %s: its current context names no cluster with a server and inline certificate authority", path)
	}
	return server, ca, token, nil
}

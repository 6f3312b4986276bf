package platform

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Probe verdicts: where a domain's A and AAAA records point.
const (
	PointsHere      = "here"
	PointsPartial   = "partial"
	PointsElsewhere = "elsewhere"
)

// Answers of one probed address.
const (
	AnsweredHere    = "answered as this installation"
	AnsweredOther   = "answered as another server"
	NoAnswerRefused = "no answer: connection refused"
	NoAnswerTimeout = "timeout"
	// NotAsked is an address the probe did not reach before the domain's
	// deadline: it did not answer as this installation either.
	NotAsked = "not asked: the probe's deadline passed first"
)

// AddressAnswer is one resolved address of a domain and what it answered.
type AddressAnswer struct {
	Address string `json:"address"`
	Answer  string `json:"answer"`
}

// ProbeResult is where a domain points: each resolved address and its answer.
type ProbeResult struct {
	Domain    string          `json:"domain"`
	Addresses []AddressAnswer `json:"addresses"`
	Verdict   string          `json:"verdict"`
	// DNSError says why no address was resolved.
	DNSError string `json:"dnsError,omitempty"`
	// NotAsked counts the addresses left unasked when the domain's
	// deadline passed (their answer is NotAsked).
	NotAsked int `json:"notAsked,omitempty"`
}

// Resolver looks up a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupIP(ctx context.Context, network, host string) ([]net.IP, error)
}

// NewResolver returns the system resolver, or one that asks only the DNS
// server at addr (host:port) when addr is not empty.
func NewResolver(addr string) *net.Resolver {
	if addr == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// EdgePath is where an installation's edge proves who it is.
const EdgePath = "/.well-known/skali-edge"

// ChallengePrefix is where HTTP-01 challenges are answered.
const ChallengePrefix = "/.well-known/acme-challenge/"

// Identity is this installation's secret: the edge proves itself with an
// HMAC of a probe's nonce, and answers ACME challenges with an HMAC of the
// token, so every replica answers alike without shared memory.
type Identity struct {
	Secret []byte
}

// Proof returns the edge's answer to nonce.
func (id Identity) Proof(nonce string) string { return id.mac("skali-edge\x00" + nonce) }

// KeyAuthorization returns the answer to the HTTP-01 challenge token.
func (id Identity) KeyAuthorization(token string) string {
	return token + "." + id.mac("acme-challenge\x00"+token)
}

func (id Identity) mac(s string) string {
	m := hmac.New(sha256.New, id.Secret)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil))
}

// Handler serves the edge proof and the ACME challenges of the local
// platform: GET /.well-known/skali-edge?nonce=X and
// GET /.well-known/acme-challenge/<token>.
func (id Identity) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		switch {
		case r.URL.Path == EdgePath:
			nonce := r.URL.Query().Get("nonce")
			if nonce == "" || len(nonce) > 128 {
				http.Error(w, "nonce required", http.StatusBadRequest)
				return
			}
			io.WriteString(w, id.Proof(nonce))
		case strings.HasPrefix(r.URL.Path, ChallengePrefix):
			token := strings.TrimPrefix(r.URL.Path, ChallengePrefix)
			if token == "" || len(token) > 128 || strings.Contains(token, "/") {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, id.KeyAuthorization(token))
		default:
			http.NotFound(w, r)
		}
	})
}

// DefaultProbeDeadline bounds a domain's whole probe unless
// Prober.Deadline says otherwise.
const DefaultProbeDeadline = 10 * time.Second

// Prober finds out where a domain points: it resolves the A and AAAA
// records and asks each address, on the edge port with the domain as Host,
// to prove it is this installation.
type Prober struct {
	Resolver Resolver
	EdgePort int
	Identity Identity
	// Timeout bounds each address's answer (default 3s).
	Timeout time.Duration
	// Concurrency is how many of a domain's addresses are asked at once
	// (default 8).
	Concurrency int
	// Deadline bounds a domain's whole probe, its DNS lookup included
	// (default DefaultProbeDeadline): a domain resolving to hundreds of silent addresses
	// costs that long, not hundreds of timeouts.
	Deadline time.Duration
}

// Probe checks domain now, asking up to Concurrency of its addresses at
// once. The addresses not asked before the deadline are listed as NotAsked
// and count as not answering here.
func (p *Prober) Probe(ctx context.Context, domain string) ProbeResult {
	deadline := p.Deadline
	if deadline <= 0 {
		deadline = DefaultProbeDeadline
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	res := ProbeResult{Domain: domain, Verdict: PointsElsewhere}
	ips, err := p.Resolver.LookupIP(ctx, "ip", domain)
	if err != nil {
		res.DNSError = DNSErrorText(err)
		return res
	}
	answers := make([]string, len(ips))
	concurrency := p.Concurrency
	if concurrency <= 0 {
		concurrency = 8
	}
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, ip := range ips {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			answers[i] = NotAsked
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = p.ask(ctx, domain, ip)
			<-slots
		}()
	}
	wg.Wait()
	here := 0
	for i, ip := range ips {
		switch answers[i] {
		case AnsweredHere:
			here++
		case NotAsked:
			res.NotAsked++
		}
		res.Addresses = append(res.Addresses, AddressAnswer{Address: ip.String(), Answer: answers[i]})
	}
	switch {
	case len(ips) > 0 && here == len(ips):
		res.Verdict = PointsHere
	case here > 0:
		res.Verdict = PointsPartial
	}
	return res
}

// DNSErrorText says, in a few words, why a lookup found no address.
func DNSErrorText(err error) string {
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsNotFound {
			return "no A or AAAA records"
		}
		if de.IsTimeout {
			return "DNS lookup timed out"
		}
	}
	return "DNS lookup failed"
}

func (p *Prober) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return 3 * time.Second
}

// ask sends GET /.well-known/skali-edge?nonce=X with domain as Host to ip.
func (p *Prober) ask(ctx context.Context, domain string, ip net.IP) string {
	nonce := randomToken()
	body, err := p.Fetch(ctx, ip, domain, EdgePath+"?nonce="+nonce)
	switch {
	case err == nil && hmac.Equal([]byte(strings.TrimSpace(body)), []byte(p.Identity.Proof(nonce))):
		return AnsweredHere
	case err == nil, errors.Is(err, errHTTPStatus):
		return AnsweredOther
	case errors.Is(err, syscall.ECONNREFUSED):
		return NoAnswerRefused
	default:
		return NoAnswerTimeout
	}
}

// errHTTPStatus is an answer other than 200: a server answered, but not as asked.
var errHTTPStatus = errors.New("HTTP status")

// Fetch GETs path from ip on the edge port with Host: domain.
func (p *Prober) Fetch(ctx context.Context, ip net.IP, domain, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(p.EdgePort))
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(domain, strconv.Itoa(p.EdgePort))+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(data), fmt.Errorf("%w %d", errHTTPStatus, resp.StatusCode)
	}
	return string(data), nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

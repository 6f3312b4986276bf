package local

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// DevIssuer issues certificates of the installation's development CA
// after an HTTP-01 challenge the prober fetches from the domain, as an
// ACME server would: the local platform's issuance, and the Kubernetes
// platform's when no cert-manager ClusterIssuer is set.
type DevIssuer struct {
	CA     *DevCA
	Prober *platform.Prober
	// Faults plays rate limits and failed challenges; may be nil.
	Faults *Faults
	// StepDelay is how long the simulated order takes.
	StepDelay time.Duration
}

// Issue requests a certificate of the development CA for domain: a
// certificate request, an order and an HTTP-01 challenge fetched from the
// domain through the prober's resolver and edge port.
func (l *DevIssuer) Issue(ctx context.Context, env platform.Env, domain string, now time.Time, out platform.Output) (*platform.IssuedCertificate, platform.Issuance, error) {
	var is platform.Issuance
	if w := l.Faults.get(func(f *Faults) string { return f.RateLimit[domain] }); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil {
			d = time.Hour
		}
		until := now.Add(d)
		say(out, "ACME order for %s refused: rate limited until %s", domain, until.UTC().Format(time.RFC3339))
		return nil, is, &platform.IssueError{Reason: "urn:ietf:params:acme:error:rateLimited: too many certificates already issued for this domain; retry after " + until.UTC().Format(time.RFC3339), RetryAfter: &until}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, is, err
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: domain}, DNSNames: []string{domain}}, key)
	if err != nil {
		return nil, is, err
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, is, err
	}
	is.CertificateRequest = "certificaterequest-" + randomToken()[:10]
	is.Order = "order-" + randomToken()[:10]
	token := randomToken()
	is.Challenge = "http-01 " + token[:12]
	is.ChallengeURL = fmt.Sprintf("http://%s:%d%s%s", domain, l.Prober.EdgePort, platform.ChallengePrefix, token)
	say(out, "CertificateRequest %s for %s, ACME order %s", is.CertificateRequest, domain, is.Order)
	say(out, "HTTP-01 challenge %s at %s", token[:12], is.ChallengeURL)
	if r := l.Faults.get(func(f *Faults) string { return f.Issuance[domain] }); r != "" {
		is.ChallengeResult = "invalid"
		say(out, "ACME order %s failed: %s", is.Order, r)
		return nil, is, &platform.IssueError{Reason: r}
	}
	if err := sleep(ctx, l.StepDelay); err != nil {
		return nil, is, err
	}
	ips, err := l.Prober.Resolver.LookupIP(ctx, "ip", domain)
	if err != nil || len(ips) == 0 {
		is.ChallengeResult = "invalid"
		say(out, "DNS %s: %s", domain, platform.DNSErrorText(err))
		return nil, is, &platform.IssueError{Reason: "Waiting for HTTP-01 challenge propagation: " + platform.DNSErrorText(err)}
	}
	say(out, "DNS %s: %s", domain, joinIPs(ips))
	body, err := l.Prober.Fetch(ctx, ips[0], domain, platform.ChallengePrefix+token)
	if err != nil || body != l.Prober.Identity.KeyAuthorization(token) {
		is.ChallengeResult = "invalid"
		say(out, "HTTP-01 attempt from %s: wrong status code or key authorization", ips[0])
		return nil, is, &platform.IssueError{Reason: fmt.Sprintf("Waiting for HTTP-01 challenge propagation: wrong status code or key authorization from %s", ips[0])}
	}
	is.ChallengeResult = "valid"
	say(out, "HTTP-01 attempt from %s: valid", ips[0])
	cert, err := l.CA.Sign(csr, domain, now)
	if err != nil {
		return nil, is, err
	}
	say(out, "Certificate issued for %s by the development CA", domain)
	return cert, is, nil
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

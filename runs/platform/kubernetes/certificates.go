package kubernetes

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// cert-manager's kinds: the driver writes Certificates and reads what
// cert-manager makes of them.
var (
	KindCertificate        = Kind{"cert-manager.io/v1", "Certificate", "certificates", true}
	KindCertificateRequest = Kind{"cert-manager.io/v1", "CertificateRequest", "certificaterequests", true}
	KindOrder              = Kind{"acme.cert-manager.io/v1", "Order", "orders", true}
	KindChallenge          = Kind{"acme.cert-manager.io/v1", "Challenge", "challenges", true}
)

// LabelCertificate names the Certificate a CertificateRequest or Order was
// made for (cert-manager copies a Certificate's labels to both).
const LabelCertificate = "skali.dev/certificate"

// DefaultIssueTimeout bounds the wait for cert-manager unless
// Options.IssueTimeout says otherwise.
const DefaultIssueTimeout = 5 * time.Minute

// CertificateName is the cert-manager Certificate (and its TLS Secret) of
// a domain.
func CertificateName(domain string) string {
	sum := sha256.Sum256([]byte(domain))
	return dnsName("tls", strings.ReplaceAll(domain, ".", "-")[:min(len(domain), 44)], hex.EncodeToString(sum[:])[:6])
}

func certificate(n envNames, name, domain string, p *Platform) Object {
	md := meta(n, name, "", p)
	md["labels"].(Object)[LabelCertificate] = name
	return Object{
		"metadata": md,
		"spec": Object{
			"secretName": name,
			"dnsNames":   []any{domain},
			"issuerRef":  Object{"name": p.Opts.ClusterIssuer, "kind": "ClusterIssuer", "group": "cert-manager.io"},
		},
	}
}

// Issue implements platform.Platform. With a cluster issuer it applies the
// domain's cert-manager Certificate (the runner asks only once the
// Studio's probe says the domain points here) and follows it, its
// CertificateRequest, Order and Challenge until it is Ready (issued) or its
// issuance failed (the Challenge's, Order's or Certificate's reason, which
// the runner's backoff takes over). A Certificate whose last issuance
// failed is triggered again as `cmctl renew` does, so a retry (the
// backoff's or Check now's) is a real one. Without a cluster issuer the
// installation's development CA issues (Options.DevIssuer).
func (p *Platform) Issue(ctx context.Context, env platform.Env, domain string, now time.Time, out platform.Output) (*platform.IssuedCertificate, platform.Issuance, error) {
	if p.Opts.Gateway == "" {
		// No HTTPRoute is written without a Gateway: the route is never
		// said to be issued (the plan refuses such a deploy first).
		return nil, platform.Issuance{}, fmt.Errorf("%s is not served: this Studio was started without --gateway, so no HTTPRoute was written for it", domain)
	}
	if p.Opts.ClusterIssuer == "" {
		if p.Opts.DevIssuer == nil {
			return nil, platform.Issuance{}, errors.New("no certificate issuer: set a cert-manager ClusterIssuer (--cluster-issuer)")
		}
		return p.Opts.DevIssuer.Issue(ctx, env, domain, now, out)
	}
	var is platform.Issuance
	n, err := p.names(ctx, env)
	if err != nil {
		return nil, is, err
	}
	timeout := p.Opts.IssueTimeout
	if timeout <= 0 {
		timeout = DefaultIssueTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := CertificateName(domain)
	certCh, unsubCert := p.watches.subscribe(KindCertificate, n.namespace, name)
	defer unsubCert()
	orderCh, unsubOrders := p.watches.subscribe(KindOrder, n.namespace, "")
	defer unsubOrders()

	cert, err := p.Client.Apply(wctx, KindCertificate, certificate(n, name, domain, p))
	if err != nil {
		return nil, is, p.apiError("applying the Certificate of "+domain, err)
	}
	out.Line(fmt.Sprintf("Certificate %s/%s for %s from ClusterIssuer %s", n.namespace, name, domain, p.Opts.ClusterIssuer))
	// A failure already recorded is an earlier attempt's.
	earlier := failureMark(cert)
	if c, ok := conditionOf(cert, "Issuing"); ok && c.status == "False" && c.reason == "Failed" {
		if err := p.triggerIssuance(wctx, n.namespace, name, cert); err != nil {
			return nil, is, p.apiError("asking cert-manager to issue "+domain+" again", err)
		}
		out.Line("Issuing again: the last attempt failed (" + strings.TrimSuffix(c.message, ".") + ")")
	}
	seen := map[string]bool{}
	line := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out.Line(s)
		}
	}
	for {
		st, err := p.certificateState(wctx, n.namespace, name, domain)
		if err != nil && wctx.Err() == nil {
			return nil, is, p.apiError("reading the Certificate of "+domain, err)
		}
		if err == nil {
			is = st.issuance
			for _, l := range st.lines {
				line(l)
			}
			switch {
			case st.ready:
				return st.issued(), is, nil
			case st.failed != "" && failureMark(st.cert) != earlier:
				return nil, is, &platform.IssueError{Reason: st.failed, RetryAfter: retryAfter(st.failed)}
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, is, ctx.Err()
			}
			last := "no answer from cert-manager"
			if len(st.lines) > 0 {
				last = st.lines[len(st.lines)-1]
			}
			return nil, is, &platform.IssueError{Reason: fmt.Sprintf("cert-manager did not issue the certificate within %s (Certificate %s/%s: %s)", timeout, n.namespace, name, last)}
		case <-certCh:
		case <-orderCh:
		}
	}
}

// failureMark tells one recorded issuance failure from the next.
func failureMark(cert Object) string {
	st, _ := cert["status"].(Object)
	return fmt.Sprint(st["lastFailureTime"], "/", st["failedIssuanceAttempts"])
}

// triggerIssuance sets the Certificate's Issuing condition as `cmctl
// renew` does: cert-manager then requests a certificate at once.
func (p *Platform) triggerIssuance(ctx context.Context, namespace, name string, cert Object) error {
	st, _ := cert["status"].(Object)
	cs, _ := st["conditions"].([]any)
	var keep []any
	for _, c := range cs {
		if m, _ := c.(Object); m["type"] != "Issuing" {
			keep = append(keep, c)
		}
	}
	md, _ := cert["metadata"].(Object)
	keep = append(keep, Object{"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
		"message": "Certificate re-issuance manually triggered", "observedGeneration": md["generation"],
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	patch, err := json.Marshal(Object{"status": Object{"conditions": keep}})
	if err != nil {
		return err
	}
	return p.Client.PatchStatus(ctx, KindCertificate, namespace, name, patch)
}

// certState is what cert-manager made of a Certificate so far.
type certState struct {
	cert     Object
	request  Object
	ready    bool
	failed   string
	lines    []string
	issuance platform.Issuance
}

// certificateState reads a Certificate, its newest CertificateRequest,
// Order and Challenge.
func (p *Platform) certificateState(ctx context.Context, namespace, name, domain string) (certState, error) {
	var st certState
	cert, err := p.Client.Get(ctx, KindCertificate, namespace, name)
	if err != nil {
		return st, err
	}
	st.cert = cert
	sel := LabelManagedBy + "=" + managedBy + "," + LabelCertificate + "=" + name
	reqs, err := p.Client.List(ctx, KindCertificateRequest, namespace, sel)
	if err != nil {
		return st, err
	}
	orders, err := p.Client.List(ctx, KindOrder, namespace, sel)
	if err != nil {
		return st, err
	}
	st.request = newest(reqs)
	order := newest(orders)
	var challenge Object
	if order != nil {
		chs, err := p.Client.List(ctx, KindChallenge, namespace, "")
		if err != nil {
			return st, err
		}
		uid := str(order, "metadata", "uid")
		var mine []Object
		for _, ch := range chs {
			for _, ref := range list(ch, "metadata", "ownerReferences") {
				if r, _ := ref.(Object); r["uid"] == uid {
					mine = append(mine, ch)
				}
			}
		}
		challenge = newest(mine)
	}

	if c, ok := conditionOf(cert, "Issuing"); ok {
		st.lines = append(st.lines, conditionLine("Issuing", c))
	}
	if st.request != nil {
		st.issuance.CertificateRequest = str(st.request, "metadata", "name")
		if c, ok := conditionOf(st.request, "Ready"); ok {
			st.lines = append(st.lines, "CertificateRequest "+st.issuance.CertificateRequest+": "+c.reason)
		}
	}
	orderReason := ""
	if order != nil {
		st.issuance.Order = str(order, "metadata", "name")
		state := str(order, "status", "state")
		if state == "" {
			state = "created"
		}
		orderReason = str(order, "status", "reason")
		st.lines = append(st.lines, withReason("Order "+state, orderReason))
		if state != "invalid" && state != "errored" {
			orderReason = ""
		}
	}
	challengeReason := ""
	if challenge != nil {
		token := str(challenge, "spec", "token")
		st.issuance.Challenge = strings.TrimSpace(str(challenge, "spec", "type") + " " + token[:min(len(token), 12)])
		st.issuance.ChallengeURL = "http://" + domain + platform.ChallengePrefix + token
		state := str(challenge, "status", "state")
		if state == "" {
			state = "pending"
		}
		st.issuance.ChallengeResult = state
		challengeReason = str(challenge, "status", "reason")
		st.lines = append(st.lines, withReason("Challenge "+state, challengeReason))
		if state != "invalid" && state != "errored" {
			challengeReason = ""
		}
	}

	issuing, isIssuing := conditionOf(cert, "Issuing")
	if c, ok := conditionOf(cert, "Ready"); ok && c.status == "True" && (!isIssuing || issuing.status != "True") {
		st.ready = true
		st.lines = append(st.lines, conditionLine("Ready", c))
		return st, nil
	}
	if isIssuing && issuing.status == "False" && issuing.reason == "Failed" {
		switch {
		case challengeReason != "":
			st.failed = challengeReason
		case orderReason != "":
			st.failed = orderReason
		case issuing.message != "":
			st.failed = strings.TrimSuffix(issuing.message, ".")
		default:
			st.failed = "cert-manager could not issue the certificate"
		}
	}
	return st, nil
}

// issued is the certificate cert-manager issued: the signed certificate
// its CertificateRequest carries (public; the Studio never reads the TLS
// Secret and its key), else the Certificate's validity alone.
func (st certState) issued() *platform.IssuedCertificate {
	out := &platform.IssuedCertificate{}
	if t, err := time.Parse(time.RFC3339, str(st.cert, "status", "notBefore")); err == nil {
		out.NotBefore = t
	}
	if t, err := time.Parse(time.RFC3339, str(st.cert, "status", "notAfter")); err == nil {
		out.NotAfter = t
	}
	if st.request == nil {
		return out
	}
	raw, err := base64.StdEncoding.DecodeString(str(st.request, "status", "certificate"))
	if err != nil {
		return out
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE" {
		return out
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return out
	}
	out.Serial = hex.EncodeToString(c.SerialNumber.Bytes())
	out.NotBefore, out.NotAfter = c.NotBefore, c.NotAfter
	out.PEM = string(pem.EncodeToMemory(block))
	return out
}

var retryAfterText = regexp.MustCompile(`retry after (\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:Z| UTC|[+-]\d\d:\d\d)?)`)

// retryAfter reads an ACME rate limit's retry window from a reason.
func retryAfter(reason string) *time.Time {
	if !strings.Contains(reason, "rateLimited") && !strings.Contains(reason, "rate limit") {
		return nil
	}
	m := retryAfterText.FindStringSubmatch(reason)
	if m == nil {
		return nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02 15:04:05 MST", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, m[1]); err == nil {
			return &t
		}
	}
	return nil
}

func conditionLine(name string, c condition) string {
	s := name + " " + c.status
	if c.reason != "" {
		s += " (" + c.reason + ")"
	}
	return withReason(s, strings.TrimSuffix(c.message, "."))
}

func withReason(s, reason string) string {
	if reason == "" {
		return s
	}
	return s + ": " + reason
}

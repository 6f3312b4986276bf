// Package oidcprovider is a small, real OpenID Connect provider for tests: an
// httptest server with discovery, a JSON Web Key Set, an authorization
// endpoint that signs in whoever the test names (no login form), and a token
// endpoint that checks the client secret, the redirect URI and PKCE and
// returns RS256-signed ID tokens. Codes are single-use and short-lived, as at
// a real provider. Tests can bend the next ID tokens (wrong audience, expired,
// other nonce) to check that the Studio refuses them.
package oidcprovider

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Identity is who the provider signs in.
type Identity struct {
	Subject       string
	Email         string
	Name          string
	EmailVerified bool
}

// Provider is a running test OpenID provider.
type Provider struct {
	// URL is the issuer URL (no trailing slash).
	URL          string
	ClientID     string
	ClientSecret string

	srv    *httptest.Server
	key    *rsa.PrivateKey
	signer jose.Signer

	mu    sync.Mutex
	codes map[string]*grant
	// tweak changes the claims of every ID token issued while it is set.
	tweak func(claims map[string]any)
	// authError, when set, makes the authorization endpoint answer with it.
	authError string
	down      bool
	// fallback is who signs in when the authorization URL names nobody
	// (a browser following the Studio's redirect).
	fallback Identity
}

type grant struct {
	clientID, redirectURI, nonce, challenge string
	who                                     Identity
	issued                                  time.Time
}

// CodeTTL is how long an authorization code may be exchanged.
const CodeTTL = time.Minute

// signingKey is the RSA key of every provider in the process: generated
// once (about 0.15 CPU-seconds, more under the race detector), as every test
// server starts a provider of its own. A provider's tokens are still its own:
// each has its own issuer URL, which the Studio checks with the signature.
var signingKey = sync.OnceValue(func() *rsa.PrivateKey {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic("oidcprovider: generate key: " + err.Error())
	}
	return key
})

// Start runs a provider for the client id and secret. Close it when done.
func Start(clientID, clientSecret string) *Provider {
	key := signingKey()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "test-key"))
	if err != nil {
		panic("oidcprovider: signer: " + err.Error())
	}
	p := &Provider{ClientID: clientID, ClientSecret: clientSecret, key: key, signer: signer, codes: map[string]*grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			// A provider that is down: the connection is dropped.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	p.URL = p.srv.URL
	return p
}

// Close stops the provider.
func (p *Provider) Close() { p.srv.Close() }

// SetDown makes the provider drop every connection (true) or answer again.
func (p *Provider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// Tweak makes the provider pass the claims of every ID token it issues
// through fn (nil restores normal tokens).
func (p *Provider) Tweak(fn func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tweak = fn
}

// SetDefaultIdentity sets who signs in when the authorization request does
// not name anybody, as in a browser test following the Studio's redirect.
func (p *Provider) SetDefaultIdentity(who Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fallback = who
}

// FailAuthorization makes the authorization endpoint redirect back with the
// OAuth error code (for example "access_denied"); "" restores normal answers.
func (p *Provider) FailAuthorization(code string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.authError = code
}

func (p *Provider) discovery(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.URL,
		"authorization_endpoint":                p.URL + "/authorize",
		"token_endpoint":                        p.URL + "/token",
		"jwks_uri":                              p.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "email", "profile"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: &p.key.PublicKey, KeyID: "test-key", Algorithm: string(jose.RS256), Use: "sig",
	}}})
}

// Query parameters the test client may add to the authorization URL to say
// who signs in (the provider has no login form).
const (
	ParamEmail    = "test_email"
	ParamName     = "test_name"
	ParamSubject  = "test_subject"
	ParamVerified = "test_email_verified"
)

// AuthorizeURLFor adds the identity to an authorization URL the Studio
// redirected to.
func AuthorizeURLFor(authorizeURL string, who Identity) (string, error) {
	u, err := url.Parse(authorizeURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set(ParamEmail, who.Email)
	q.Set(ParamName, who.Name)
	q.Set(ParamSubject, who.Subject)
	if !who.EmailVerified {
		q.Set(ParamVerified, "false")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	switch {
	case q.Get("client_id") != p.ClientID:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code":
		http.Error(w, "response_type must be code", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE with S256 is required", http.StatusBadRequest)
		return
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	p.mu.Lock()
	authError := p.authError
	p.mu.Unlock()
	if authError != "" {
		back.Set("error", authError)
		back.Set("error_description", "The test provider was told to refuse.")
		redirect.RawQuery = back.Encode()
		http.Redirect(w, r, redirect.String(), http.StatusFound)
		return
	}
	who := Identity{Subject: q.Get(ParamSubject), Email: q.Get(ParamEmail), Name: q.Get(ParamName), EmailVerified: q.Get(ParamVerified) != "false"}
	if who.Email == "" {
		p.mu.Lock()
		who = p.fallback
		p.mu.Unlock()
	}
	if who.Email == "" {
		who = Identity{Email: "someone@example.test", Name: "Someone", EmailVerified: true}
	}
	if who.Subject == "" {
		who.Subject = "sub-" + who.Email
	}
	code := randomString()
	p.mu.Lock()
	p.codes[code] = &grant{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"), nonce: q.Get("nonce"),
		challenge: q.Get("code_challenge"), who: who, issued: time.Now()}
	p.mu.Unlock()
	back.Set("code", code)
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(p.ClientSecret)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		tokenError(w, "unsupported_grant_type")
		return
	}
	code := r.PostForm.Get("code")
	p.mu.Lock()
	g := p.codes[code]
	delete(p.codes, code) // single use, even when the exchange fails below
	tweak := p.tweak
	p.mu.Unlock()
	if g == nil || time.Since(g.issued) > CodeTTL || g.clientID != id || g.redirectURI != r.PostForm.Get("redirect_uri") {
		tokenError(w, "invalid_grant")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		tokenError(w, "invalid_grant")
		return
	}
	now := time.Now()
	claims := map[string]any{
		"iss":            p.URL,
		"sub":            g.who.Subject,
		"aud":            p.ClientID,
		"iat":            now.Unix(),
		"exp":            now.Add(5 * time.Minute).Unix(),
		"nonce":          g.nonce,
		"email":          g.who.Email,
		"email_verified": g.who.EmailVerified,
		"name":           g.who.Name,
	}
	if tweak != nil {
		tweak(claims)
	}
	idToken, err := jwt.Signed(p.signer).Claims(claims).Serialize()
	if err != nil {
		http.Error(w, "sign", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": randomString(),
		"token_type":   "Bearer",
		"expires_in":   300,
		"id_token":     idToken,
	})
}

func tokenError(w http.ResponseWriter, code string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

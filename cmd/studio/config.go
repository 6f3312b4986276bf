package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/runs/platforms"
)

// Config is every setting of `studio serve`. Each flag has an environment
// variable; a flag given on the command line wins over the variable.
type Config struct {
	Addr        string
	DatabaseURL string
	DataDir     string
	PublicURL   string
	// addressGiven: --addr or --public-url (or their variables) was set,
	// rather than left to its default.
	addressGiven       bool
	OIDCIssuer         string
	OIDCClientID       string
	OIDCClientSecret   string
	SecretKey          string
	Admins             string
	AllowLocalLogin    bool
	SessionIdleTimeout time.Duration
	SessionLifetime    time.Duration
	LogFormat          string
	LocalStepDelay     time.Duration
	DNSServer          string
	EdgePort           int
	ReconcileInterval  time.Duration
	ValueRetention     time.Duration
	LocalFaults        string
	RunRescueAfter     time.Duration
	RunLease           time.Duration
	ShutdownTimeout    time.Duration
	MetricsAddr        string
	TrustedProxies     string
	PublicAddresses    string
	Platform           string
	Kubeconfig         string
	Gateway            string
	ClusterIssuer      string
	PostgresImages     string
	HelperImage        string
	ProvisionTimeout   time.Duration
	WebhookAllow       string

	// publicAddresses is PublicAddresses read as addresses.
	publicAddresses []netip.Addr
	// trustedProxies is TrustedProxies read as address ranges.
	trustedProxies []netip.Prefix
	// webhookAllow is WebhookAllow read as address ranges.
	webhookAllow []netip.Prefix
}

type setting struct {
	flag, env, usage string
	target           any
	def              string
}

func (c *Config) settings() []setting {
	return []setting{
		{"addr", "STUDIO_ADDR", "address to listen on", &c.Addr, "127.0.0.1:8080"},
		{"database-url", "DATABASE_URL", "PostgreSQL connection string; when empty the Studio starts its own private PostgreSQL in the data directory", &c.DatabaseURL, ""},
		{"data-dir", "STUDIO_DATA_DIR", "directory for the private PostgreSQL and the value-encryption key file", &c.DataDir, ".studio"},
		{"public-url", "STUDIO_PUBLIC_URL", "the URL people use to reach the Studio (default http://ADDR); https makes cookies Secure", &c.PublicURL, ""},
		{"oidc-issuer", "STUDIO_OIDC_ISSUER", "OpenID Connect issuer URL; when set, people sign in with that provider", &c.OIDCIssuer, ""},
		{"oidc-client-id", "STUDIO_OIDC_CLIENT_ID", "OpenID Connect client id", &c.OIDCClientID, ""},
		{"oidc-client-secret", "STUDIO_OIDC_CLIENT_SECRET", "OpenID Connect client secret", &c.OIDCClientSecret, ""},
		{"secret-key", "STUDIO_SECRET_KEY", "base64 of the 32-byte key that encrypts values; default: a key file generated in the data directory", &c.SecretKey, ""},
		{"admins", "STUDIO_ADMINS", "comma-separated emails or subjects of installation admins", &c.Admins, ""},
		{"allow-local-login", "STUDIO_ALLOW_LOCAL_LOGIN", "keep the one-time local sign-in link when OIDC is configured", &c.AllowLocalLogin, "false"},
		{"session-idle-timeout", "STUDIO_SESSION_IDLE_TIMEOUT", "sign out after this long without a request", &c.SessionIdleTimeout, "12h"},
		{"session-lifetime", "STUDIO_SESSION_LIFETIME", "sign out this long after sign-in, however active", &c.SessionLifetime, "168h"},
		{"log-format", "STUDIO_LOG_FORMAT", "log format: text or json", &c.LogFormat, "text"},
		{"local-step-delay", "STUDIO_LOCAL_STEP_DELAY", "how long each simulated step of the local platform takes", &c.LocalStepDelay, "1s"},
		{"dns-server", "STUDIO_DNS_SERVER", "host:port of the DNS server that resolves route domains (default: the system resolver)", &c.DNSServer, ""},
		{"edge-port", "STUDIO_EDGE_PORT", "port on which probes and ACME challenges reach a domain's addresses", &c.EdgePort, "80"},
		{"public-addresses", "STUDIO_PUBLIC_ADDRESSES", "comma-separated IP addresses this installation's edge answers on: the A/AAAA records a DNS-pending domain is asked to point at (empty: pages say to set this)", &c.PublicAddresses, ""},
		{"reconcile-interval", "STUDIO_RECONCILE_INTERVAL", "how often deferred and failed domains are probed again", &c.ReconcileInterval, "1m"},
		{"value-retention", "STUDIO_VALUE_RETENTION", "how long an earlier version of a value is kept (encrypted, for rollbacks and restores) after a newer one replaced it; the last 5 earlier versions of each name are kept whatever their age", &c.ValueRetention, "720h"},
		{"local-faults", "STUDIO_LOCAL_FAULTS", "JSON file of faults the local platform injects (demos)", &c.LocalFaults, ""},
		{"run-rescue-after", "STUDIO_RUN_RESCUE_AFTER", "last resort for a job River itself lost: how long it may look running before another process resumes it", &c.RunRescueAfter, "15m"},
		{"run-lease", "STUDIO_RUN_LEASE", "how long a run's executor may go without renewing its lease before the run shows \"executor lost\" and a live process takes it over", &c.RunLease, "20s"},
		{"shutdown-timeout", "STUDIO_SHUTDOWN_TIMEOUT", "on SIGTERM, how long running steps may take to reach a safe point before they are stopped (they resume in the next process)", &c.ShutdownTimeout, "30s"},
		{"metrics-addr", "STUDIO_METRICS_ADDR", "address to serve Prometheus metrics on, at /metrics (empty: off)", &c.MetricsAddr, ""},
		{"trusted-proxies", "STUDIO_TRUSTED_PROXIES", "comma-separated addresses or CIDR ranges of reverse proxies whose X-Forwarded-For tells who the client is (empty: none, the header is ignored)", &c.TrustedProxies, ""},
		{"platform", "STUDIO_PLATFORM", "where deploys run: local (simulated, the default) or kubernetes", &c.Platform, "local"},
		{"kubeconfig", "STUDIO_KUBECONFIG", "kubeconfig of the cluster for --platform kubernetes (default: the in-cluster service account, then $KUBECONFIG)", &c.Kubeconfig, ""},
		{"gateway", "STUDIO_GATEWAY", "NAMESPACE/NAME of the Gateway API gateway routes attach to (--platform kubernetes)", &c.Gateway, ""},
		{"cluster-issuer", "STUDIO_CLUSTER_ISSUER", "cert-manager ClusterIssuer of route certificates (--platform kubernetes)", &c.ClusterIssuer, ""},
		{"postgres-images", "STUDIO_POSTGRES_IMAGES", "repository of the PostgreSQL images CloudNativePG runs, tagged by major (--platform kubernetes; a mirror of ghcr.io/cloudnative-pg/postgresql)", &c.PostgresImages, ""},
		{"helper-image", "STUDIO_HELPER_IMAGE", "the Studio's own image, whose volume agent reads and writes volumes for backups (--platform kubernetes; without it volumes are not snapshotted)", &c.HelperImage, ""},
		{"provision-timeout", "STUDIO_PROVISION_TIMEOUT", "how long a deploy waits for the operator to make a database or bucket accept connections before it fails with what the operator last said (--platform kubernetes; the reference's minute: raise it where volumes are slow to provision)", &c.ProvisionTimeout, "1m"},
		{"webhook-allow-networks", "STUDIO_WEBHOOK_ALLOW_NETWORKS", "comma-separated addresses or CIDR ranges webhook deliveries may reach although they are refused by default (loopback, link-local, private such as 10.0.0.0/8; never the Studio's own listeners or database)", &c.WebhookAllow, ""},
	}
}

// secretSettings are the variables whose values --help must never print:
// flag shows a value taken from the environment as the flag's default.
var secretSettings = map[string]bool{"DATABASE_URL": true, "STUDIO_OIDC_CLIENT_SECRET": true, "STUDIO_SECRET_KEY": true}

// parseFlags fills c from the environment, then from args.
func (c *Config) parseFlags(name string, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, s := range c.settings() {
		def := s.def
		if v, ok := os.LookupEnv(s.env); ok {
			def = v
		}
		usage := s.usage + " (" + s.env + ")"
		switch t := s.target.(type) {
		case *string:
			fs.StringVar(t, s.flag, def, usage)
			if secretSettings[s.env] {
				fs.Lookup(s.flag).DefValue = s.def
			}
		case *bool:
			b, err := strconv.ParseBool(orDefault(def, "false"))
			if err != nil {
				return fmt.Errorf("%s=%q is not true or false", s.env, def)
			}
			fs.BoolVar(t, s.flag, b, usage)
		case *int:
			n, err := strconv.Atoi(def)
			if err != nil {
				return fmt.Errorf("%s=%q is not a number", s.env, def)
			}
			fs.IntVar(t, s.flag, n, usage)
		case *time.Duration:
			d, err := time.ParseDuration(def)
			if err != nil {
				return fmt.Errorf("%s=%q is not a duration such as 12h", s.env, def)
			}
			fs.DurationVar(t, s.flag, d, usage)
		}
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: studio %s [flags]\n\nEvery flag can also be set by the environment variable in brackets.\n\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, c.addressGiven = os.LookupEnv("STUDIO_ADDR")
	if _, ok := os.LookupEnv("STUDIO_PUBLIC_URL"); ok {
		c.addressGiven = true
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "addr" || f.Name == "public-url" {
			c.addressGiven = true
		}
	})
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Addr
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat)
	}
	if !slices.Contains(platforms.Names, c.Platform) {
		return fmt.Errorf("--platform must be %s, not %q", strings.Join(platforms.Names, " or "), c.Platform)
	}
	if c.Gateway != "" {
		if ns, name, ok := strings.Cut(c.Gateway, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--gateway must be NAMESPACE/NAME, not %q", c.Gateway)
		}
	}
	if c.PostgresImages != "" {
		last := c.PostgresImages[strings.LastIndex(c.PostgresImages, "/")+1:]
		if strings.ContainsAny(last, ":@") || strings.ContainsAny(c.PostgresImages, " \t") || last == "" {
			return fmt.Errorf("--postgres-images must be a repository without a tag or digest (the major is its tag), not %q", c.PostgresImages)
		}
	}
	if c.ProvisionTimeout <= 0 {
		return fmt.Errorf("--provision-timeout must be longer than 0, not %s", c.ProvisionTimeout)
	}
	proxies, err := parseNetworks("--trusted-proxies", c.TrustedProxies)
	if err != nil {
		return err
	}
	c.trustedProxies = proxies
	if c.webhookAllow, err = parseNetworks("--webhook-allow-networks", c.WebhookAllow); err != nil {
		return err
	}
	if c.publicAddresses, err = parsePublicAddresses(c.PublicAddresses); err != nil {
		return err
	}
	return nil
}

// maxPublicAddresses bounds --public-addresses: an edge answers on a few.
const maxPublicAddresses = 16

// parsePublicAddresses reads a comma-separated list of IP addresses
// ("203.0.113.7, 2001:db8::7"), without duplicates.
func parsePublicAddresses(list string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("--public-addresses: %q is not an IP address such as 203.0.113.7 or 2001:db8::7", item)
		}
		a = a.Unmap()
		if a.IsUnspecified() || a.IsMulticast() {
			return nil, fmt.Errorf("--public-addresses: %s cannot be a DNS record's address", a)
		}
		if slices.Contains(out, a) {
			continue
		}
		if len(out) == maxPublicAddresses {
			return nil, fmt.Errorf("--public-addresses: at most %d addresses", maxPublicAddresses)
		}
		out = append(out, a)
	}
	return out, nil
}

// parseNetworks reads setting's comma-separated list of addresses and CIDR
// ranges ("10.0.0.0/8, 192.0.2.7, 2001:db8::/32").
func parseNetworks(setting, list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				// Peers are compared unmapped: ::ffff:10.0.0.0/104 is 10.0.0.0/8.
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(item); err == nil && a.Zone() == "" {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		return nil, fmt.Errorf("%s: %q is neither an address nor a CIDR range such as 10.0.0.0/8", setting, item)
	}
	return out, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

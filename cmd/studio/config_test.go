package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// TestHelpNeverPrintsSecrets: --help lists every setting, but a secret set
// through the environment must not appear as a flag's default.
func TestHelpNeverPrintsSecrets(t *testing.T) {
	// Serial: t.Setenv puts the secrets in the process's environment, which parseFlags reads.
	secrets := map[string]string{
		"DATABASE_URL":              "postgres://studio:db-password-1@db.internal/studio",
		"STUDIO_OIDC_CLIENT_SECRET": "oidc-client-secret-2",
		"STUDIO_SECRET_KEY":         "c2VjcmV0LWtleS0z",
	}
	for env, v := range secrets {
		t.Setenv(env, v)
	}
	var cfg Config
	var help strings.Builder
	if err := cfg.parseFlags("serve", []string{"--help"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseFlags(--help) = %v, want flag.ErrHelp", err)
	}
	for env, v := range secrets {
		if !strings.Contains(help.String(), env) {
			t.Errorf("--help does not list %s", env)
		}
		if strings.Contains(help.String(), v) {
			t.Errorf("--help prints the value of %s", env)
		}
	}

	// The values still reach the configuration.
	cfg = Config{}
	if err := cfg.parseFlags("serve", nil, &help); err != nil {
		t.Fatal(err)
	}
	if cfg.DatabaseURL != secrets["DATABASE_URL"] || cfg.OIDCClientSecret != secrets["STUDIO_OIDC_CLIENT_SECRET"] || cfg.SecretKey != secrets["STUDIO_SECRET_KEY"] {
		t.Error("secret settings from the environment did not reach the configuration")
	}
}

// TestPlatformFlags: the platform is local unless kubernetes is asked for;
// a misspelt platform or gateway stops serve with a sentence naming it.
func TestPlatformFlags(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	var cfg Config
	if err := cfg.parseFlags("serve", nil, &out); err != nil || cfg.Platform != "local" || cfg.ProvisionTimeout != time.Minute {
		t.Fatalf("default platform %q, provision timeout %s (%v), want local and the reference's minute", cfg.Platform, cfg.ProvisionTimeout, err)
	}
	cfg = Config{}
	if err := cfg.parseFlags("serve", []string{"--platform", "kubernetes", "--kubeconfig", "/tmp/kc", "--gateway", "infra/edge", "--cluster-issuer", "letsencrypt",
		"--postgres-images", "mirror.example:5000/cnpg/postgresql", "--provision-timeout", "4m"}, &out); err != nil {
		t.Fatal(err)
	}
	if cfg.Platform != "kubernetes" || cfg.Kubeconfig != "/tmp/kc" || cfg.Gateway != "infra/edge" || cfg.ClusterIssuer != "letsencrypt" ||
		cfg.PostgresImages != "mirror.example:5000/cnpg/postgresql" || cfg.ProvisionTimeout != 4*time.Minute {
		t.Fatalf("config %+v", cfg)
	}
	for _, args := range [][]string{{"--platform", "k8s"}, {"--gateway", "edge"}, {"--gateway", "infra/"},
		{"--postgres-images", "ghcr.io/cloudnative-pg/postgresql:17"}, {"--postgres-images", "mirror/postgresql@sha256:00"}, {"--provision-timeout", "0s"}} {
		cfg = Config{}
		err := cfg.parseFlags("serve", args, &out)
		if err == nil || !strings.Contains(err.Error(), args[1]) {
			t.Errorf("%v: %v, want an error naming %q", args, err, args[1])
		}
	}
}

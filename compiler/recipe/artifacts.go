package recipe

// [[artifacts]]: what the agent downloads and verifies, with an optional
// [artifacts.delta] patch.

import (
	"net/url"
	"regexp"
	"slices"
)

// sha256RE is a sha256 digest in hexadecimal.
var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

var artifactKeys = []string{"uri", "sha256", "sig_uri", "cert_uri", "unpack", "github_token", "headers", "delta"}

// deltaFormats are the patch encodings the agent knows.
var deltaFormats = []string{"bsdiff+zstd"}

func (r *recipeChecker) artifact(v *value, p string) {
	t, _ := r.table(v, p, tableKeys["artifacts"], "artifacts")
	if n := t.get("uri"); n == nil {
		r.missing(t, "uri", "where to download the artifact from")
	} else {
		r.nonEmpty(n, t.at("uri"))
	}
	if n := t.get("sha256"); n == nil {
		if r.opts.InsecureSkipVerify {
			r.warnAt(t.v.keyPos, t.at("sha256"), "no `sha256`: the artifact is not verified (--insecure-skip-verify)")
		} else {
			r.missing(t, "sha256", "the artifact's digest; it may be omitted only with --insecure-skip-verify")
		}
	} else {
		r.sha256(n, t.at("sha256"))
	}
	for _, k := range []string{"sig_uri", "cert_uri", "github_token"} {
		if n := t.get(k); n != nil {
			r.nonEmpty(n, t.at(k))
		}
	}
	unpack := false
	if n := t.get("unpack"); n != nil {
		unpack, _ = r.boolean(n, t.at("unpack"))
	}
	if n := t.get("headers"); n != nil {
		r.stringTable(n, t.at("headers"))
	}
	if n := t.get("delta"); n != nil {
		dp := t.at("delta")
		d, ok := r.table(n, dp, tableKeys["artifacts.delta"], "artifacts.delta")
		if !ok {
			return
		}
		// Reference: "Requires unpack = true."
		if !unpack {
			r.errorAt(n.keyPos, dp, "`delta` requires `unpack = true` on the artifact: a patch applies to the extracted archive")
		}
		if s := d.get("server"); s == nil {
			r.missing(d, "server", "the base URL of the delta server")
		} else if u, ok := r.nonEmpty(s, d.at("server")); ok {
			if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				r.errorAt(s.pos, d.at("server"), "`"+u+"` is not an http:// or https:// URL")
			}
		}
		if s := d.get("sha256"); s == nil {
			r.missing(d, "sha256", "the digest of the uncompressed archive after patching, which the result is verified against")
		} else {
			r.sha256(s, d.at("sha256"))
		}
		if f := d.get("format"); f != nil {
			if s, ok := r.str(f, d.at("format")); ok && !slices.Contains(deltaFormats, s) {
				r.warnAt(f.pos, d.at("format"), "patch format `"+s+"` is not one the agent knows (`bsdiff+zstd`); it will log it and download the whole artifact")
			}
		}
	}
}

func (r *recipeChecker) sha256(v *value, p string) {
	if s, ok := r.nonEmpty(v, p); ok && !sha256RE.MatchString(s) {
		r.errorAt(v.pos, p, "a sha256 digest is 64 hexadecimal digits")
	}
}

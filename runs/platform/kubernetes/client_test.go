package kubernetes_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skali-dev/studio/runs/platform/kubernetes"
)

// A kubeconfig the Studio cannot use is refused at start with a sentence
// saying what is wrong in which file.
func TestKubeconfigMistakesAreNamed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ name, text, want string }{
		{"no-context", "apiVersion: v1\nkind: Config\ncurrent-context: prod\ncontexts: []\n", `its current context "prod" is not among its contexts`},
		{"no-cluster", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n", `no cluster named "c"`},
		{"bad-ca", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', certificate-authority-data: bm90IGEgY2VydA==}\n", "the certificate authority holds no certificate"},
		{"missing-token-file", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {tokenFile: nowhere}\n", "token file"},
	} {
		p := write(c.name, c.text)
		_, err := kubernetes.LoadClient(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming %s and %q", c.name, err, p, c.want)
		}
	}
	if _, err := kubernetes.LoadClient(filepath.Join(dir, "absent")); err == nil {
		t.Error("a missing kubeconfig was accepted")
	}
	ok := write("ok", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {token: abc}\n")
	if _, err := kubernetes.LoadClient(ok); err != nil {
		t.Errorf("a valid kubeconfig: %v", err)
	}
}

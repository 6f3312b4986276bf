package kubernetes

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/kubernetes/clustertest"
)

// warningWaiter is a platform.Waiter and Warner that keeps the warnings.
type warningWaiter struct {
	recordingWaiter
	mu       sync.Mutex
	warnings []string
}

func (w *warningWaiter) Warn(who, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, who+": "+text)
}

// TestAMisspeltFieldFailsTheApplyAndWarningsReachTheStep applies to the
// test cluster's API server: an object with a field its kind does not have
// is refused with the server's words (not silently dropped, as a plain
// apply would), and a warning the server gives with a successful apply
// (a deprecated node label) reaches the step's Warner.
func TestAMisspeltFieldFailsTheApplyAndWarningsReachTheStep(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	c, err := LoadClient(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := "strict-fields"
	if _, err := c.Apply(ctx, KindNamespace, Object{"metadata": Object{"name": ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), KindNamespace, "", ns) })

	_, err = c.Apply(ctx, KindSecret, Object{"metadata": Object{"name": "values", "namespace": ns},
		"type": "Opaque", "stringDate": Object{"A": "b"}})
	// Server-side apply answers 500 "field not declared in schema": the
	// object's fault, not a server that blinks, so not tried again.
	var se *StatusError
	var ue *UnreachableError
	if !errors.As(err, &se) || errors.As(err, &ue) || !strings.Contains(err.Error(), ".stringDate: field not declared in schema") {
		t.Fatalf("apply of a Secret with a misspelt field: %v; want the API server's refusal naming the field, at once", err)
	}
	if _, err := c.Get(ctx, KindSecret, ns, "values"); !IsNotFound(err) {
		t.Errorf("the refused Secret was written anyway (get: %v)", err)
	}
	_, err = c.Create(ctx, KindConfigMap, Object{"metadata": Object{"name": "c", "namespace": ns}, "dta": Object{"a": "b"}})
	if err == nil || !strings.Contains(err.Error(), `unknown field "dta"`) {
		t.Errorf("create of a ConfigMap with a misspelt field: %v; want the refusal naming the field", err)
	}

	w := &warningWaiter{}
	deployment := Object{"metadata": Object{"name": "web", "namespace": ns}, "spec": Object{
		"replicas": 0, "selector": Object{"matchLabels": Object{"app": "web"}},
		"template": Object{"metadata": Object{"labels": Object{"app": "web"}}, "spec": Object{
			"nodeSelector": Object{"beta.kubernetes.io/os": "linux"},
			"containers":   []any{Object{"name": "web", "image": "registry.local/web:1"}}}}}}
	if _, err := c.Apply(platform.WithWaiter(ctx, w), KindDeployment, deployment); err != nil {
		t.Fatalf("apply of a Deployment with a deprecated node label: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.warnings) == 0 || !strings.Contains(strings.Join(w.warnings, "\n"), `beta.kubernetes.io/os`) {
		t.Fatalf("warnings heard: %q; want the API server's warning that beta.kubernetes.io/os is deprecated", w.warnings)
	}
	if !strings.HasPrefix(w.warnings[0], "the Kubernetes API server: ") {
		t.Errorf("warning %q does not say who gave it", w.warnings[0])
	}
}

func TestWarningHeadersAreReadOnceEach(t *testing.T) {
	got := warnings([]string{`299 - "first, with a comma", 299 - "second \"quoted\""`, `299 - "first, with a comma"`, `garbage`})
	want := []string{"first, with a comma", `second "quoted"`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("warnings = %q, want %q", got, want)
	}
}

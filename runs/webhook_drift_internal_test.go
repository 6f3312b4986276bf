package runs

import (
	"testing"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// TestDriftDetectedChatLineSaysWhatChanged: the chat line of
// drift.detected says each change in words, never a variable's value.
func TestDriftDetectedChatLineSaysWhatChanged(t *testing.T) {
	t.Parallel()
	d := &store.WebhookDelivery{Event: store.WebhookDriftDetected, Data: store.WebhookData{Project: "wiki", Environment: "production",
		Drift: []platform.Drift{
			{App: "web", Kind: platform.DriftReplicas, Object: "Deployment web", Field: "replicas", Now: "0", Applied: "3"},
			{App: "web", Kind: platform.DriftEnv, Object: "Deployment web", Field: "env API_KEY", Now: "changed", Applied: "set"},
		}}}
	got := slackText(d, "https://studio.example.test/projects/wiki/environments/production")
	want := "🟡 Drift detected: wiki/production. web scaled to 0 outside the Studio; API_KEY of web changed outside the Studio <https://studio.example.test/projects/wiki/environments/production|Open in the Studio>"
	if got != want {
		t.Errorf("chat line\n got %q\nwant %q", got, want)
	}
}

package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/runs/platform"
)

// TestABuildTakesTheWholeStepDelay: demos and browser tests count on each
// simulated step taking StepDelay, builds as well as the others. A build
// given three quarters of it does not finish.
func TestABuildTakesTheWholeStepDelay(t *testing.T) {
	const delay = 2 * time.Second
	l := &Platform{StepDelay: delay}
	for _, a := range []*compiler.Application{{Image: "nginx:1.27"}, {}} {
		ctx, cancel := context.WithTimeout(context.Background(), delay*3/4)
		err := l.buildLines(ctx, platform.Env{}, "web", a, "registry.local/web:1", platform.Discard)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a build (image %q) finished within three quarters of the step delay (%v), want it to take the whole delay", a.Image, err)
		}
	}
}

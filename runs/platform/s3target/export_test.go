package s3target

import "github.com/skali-dev/studio/runs/platform"

// WaitForParts waits until the part a writer has in flight is stored:
// what a killed process had sent before it died.
func WaitForParts(w platform.TargetWriter) error { return w.(*writer).wait() }

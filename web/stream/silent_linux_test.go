package stream_test

import (
	"testing"

	"github.com/skali-dev/studio/web/stream"
)

// TestEventStreamOneSilentWatcherAmongManyReadersWithoutIOURing is the
// silent watcher among readers on the path a kernel without io_uring (or
// a container that refuses it) takes: one non-blocking send per stream.
func TestEventStreamOneSilentWatcherAmongManyReadersWithoutIOURing(t *testing.T) {
	restore := stream.SendRingsOffForTest()
	defer restore()
	silentWatcherAmongReaders(t)
}

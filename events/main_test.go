package events_test

import (
	"testing"

	"github.com/skali-dev/studio/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

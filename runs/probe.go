package runs

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// The probe's vocabulary, as run records, views and handlers name it: the
// probe itself is package platform's, which every platform shares.
type (
	ProbeResult   = platform.ProbeResult
	AddressAnswer = platform.AddressAnswer
	Issuance      = platform.Issuance
)

// Probe verdicts and answers (see package platform).
const (
	PointsHere           = platform.PointsHere
	PointsPartial        = platform.PointsPartial
	PointsElsewhere      = platform.PointsElsewhere
	AnsweredHere         = platform.AnsweredHere
	AnsweredOther        = platform.AnsweredOther
	NoAnswerRefused      = platform.NoAnswerRefused
	NoAnswerTimeout      = platform.NoAnswerTimeout
	NotAsked             = platform.NotAsked
	DefaultProbeDeadline = platform.DefaultProbeDeadline
)

// platformEnv is what a platform is told of env.
func platformEnv(env *store.Environment) platform.Env {
	return platform.Env{ID: env.ID, Project: env.Project, Name: env.Name}
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

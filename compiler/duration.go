package compiler

import (
	"errors"
	"time"
)

// ParseDuration reads a duration as the manifest writes it: one number and
// one of ms, s, m, h, d (24h) or w (7d), such as 30s, 36h or 2w. Backup
// retention uses it so that a schedule reads like a manifest.
func ParseDuration(s string) (time.Duration, error) {
	d, problem := parseDuration(s)
	if problem != "" {
		return 0, errors.New(problem)
	}
	return d, nil
}

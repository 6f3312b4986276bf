package runs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// BackupClaimAfter is when the backup fires are next claimed after t (with
// the default one-minute interval).
func BackupClaimAfter(t time.Time) time.Time { return minuteStarts{}.Next(t) }

// MaxChainedWindows is how many windows FrozenAt follows past the first.
const MaxChainedWindows = maxChained

// ResumeRunJobs resumes River's default queue, where the jobs of runs
// wait, in every process: a test that paused it (river_queue.paused_at)
// says with it when replicas may take them.
func (s *Service) ResumeRunJobs(ctx context.Context) error {
	return s.river.QueueResume(ctx, river.QueueDefault, nil)
}

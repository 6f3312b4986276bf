package runs

import "time"

// BackupClaimAfter is when the backup fires are next claimed after t (with
// the default one-minute interval).
func BackupClaimAfter(t time.Time) time.Time { return minuteStarts{}.Next(t) }

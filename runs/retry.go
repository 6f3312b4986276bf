package runs

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Transient reports whether err means the database could not be reached
// for a moment (a restart, a failover, a dropped connection), so the same
// statement may succeed a few seconds later.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		}
		return len(pe.Code) == 5 && pe.Code[:2] == "08" // connection exceptions
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// retryWindow is how long a write of a run's progress is retried while the
// database cannot be reached: a restart of PostgreSQL takes seconds, and
// the step's work is done already.
const retryWindow = 45 * time.Second

// withRetry calls write until it succeeds, fails for a reason other than
// the database being out of reach, or retryWindow has passed. The writes
// go on after ctx is cancelled (a shutdown records what finished): only
// the window bounds them. attempt is 0 for the first call, so a write can
// tell a retry, whose earlier attempt may have committed, from a first try.
func withRetry(ctx context.Context, write func(ctx context.Context, attempt int) error) error {
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(retryWindow)
	wait := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := write(wctx, attempt)
		cancel()
		if !Transient(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
	}
}

package runs

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skali-dev/studio/store"
)

// transient reports whether err means the database could not be reached
// for a moment (a restart, a failover, a dropped connection), so the same
// statement may succeed a few seconds later: what store.Unreachable says,
// and, since withRetry only ever talks to the database, a connection that
// broke under a statement.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if store.Unreachable(err) || pgconn.SafeToRetry(err) {
		return true
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return false // the server answered: not an outage
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
		if !transient(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
	}
}

package store

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
// statement may succeed a few seconds later: what Unreachable says,
// and, since WithRetry is only for statements to this database, a
// connection that broke under a statement.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if Unreachable(err) || pgconn.SafeToRetry(err) {
		return true
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return false // the server answered: not an outage
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// RetryWindow is how long a write (a run's progress, a release command's
// start and end) is retried while the database cannot be reached: a
// restart of PostgreSQL takes seconds, and the step's work is done already.
const RetryWindow = 45 * time.Second

// WithRetry calls write until it succeeds, fails for a reason other than
// the database being out of reach, or RetryWindow has passed. The writes
// go on after ctx is cancelled (a shutdown records what finished): only
// the window bounds them. attempt is 0 for the first call, so a write can
// tell a retry, whose earlier attempt may have committed, from a first try.
func WithRetry(ctx context.Context, write func(ctx context.Context, attempt int) error) error {
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(RetryWindow)
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

package local

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

// withRetry calls write until it succeeds, fails for a reason other than
// the database being out of reach, or 45 s have passed, as the runner
// retries its own writes (runs/retry.go): a release command's start and
// end are kept through a restart of PostgreSQL. The writes go on after ctx
// is cancelled; only the window bounds them.
func withRetry(ctx context.Context, write func(ctx context.Context, attempt int) error) error {
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(45 * time.Second)
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

// transient reports whether err means the database could not be reached
// for a moment (what runs/retry.go's transient says).
func transient(err error) bool {
	if err == nil {
		return false
	}
	if store.Unreachable(err) || pgconn.SafeToRetry(err) {
		return true
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

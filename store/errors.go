package store

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// isUniqueViolation reports whether err is PostgreSQL refusing a row that
// would repeat a unique key (unique_violation).
func isUniqueViolation(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == "23505"
}

// Unreachable reports whether err says that the database could not be
// reached, as the driver tells it: no connection could be made (refused,
// timed out, or the server not accepting connections), the server ended the
// connection or is starting or shutting down (SQLSTATE class 08, 57P01,
// 57P02, 57P03), or a deadline passed inside the driver. A network error or
// EOF alone is not enough: other parts of the Studio talk to other servers,
// so the web layer asks the database itself before it calls such an error
// an outage.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			return true
		}
		return false
	}
	// A deadline that passed inside the driver: waiting for a connection
	// or for the server's answer.
	return pgconn.Timeout(err) && errors.Is(err, context.DeadlineExceeded)
}

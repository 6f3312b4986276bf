// Package apperr is the Studio's application error: a code that the web
// layer maps to an HTTP status in one place, and a sentence meant for the
// person acting. The store, the runs and the handlers all return it; it
// imports nothing of theirs.
package apperr

import (
	"errors"
	"fmt"
)

// Code classifies an application error so that the web layer can choose a
// status code in one place and decide whether the message may be shown.
type Code string

// The error codes of the Studio. Only Internal errors hide their message from
// the user; every other code carries a sentence meant for the person acting.
const (
	Invalid      Code = "invalid"
	NotFound     Code = "not_found"
	Conflict     Code = "conflict"
	Unauthorized Code = "unauthorized"
	Forbidden    Code = "forbidden"
	// Unavailable is the Studio's database not answering now: the same
	// request may work a little later. Its page says so in one sentence
	// of its own (503 with Retry-After), whatever the error's message.
	Unavailable Code = "unavailable"
	Internal    Code = "internal"
)

// Error is an application error with a code and a message a person can read.
type Error struct {
	Code    Code
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain, or Internal.
// Text PostgreSQL cannot store (a NUL byte, invalid UTF-8) came from the
// sender, so it is Invalid too, wherever it reached a query.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if unstorableText(err) {
		return Invalid
	}
	return Internal
}

// Message returns the user-facing message of err: the message of an
// *Error, or a calm generic sentence for anything else (the detail is logged,
// never shown).
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != Internal {
		return e.Message
	}
	if unstorableText(err) {
		return "The request contains characters that cannot be stored: a NUL byte or text that is not UTF-8."
	}
	return "Something went wrong on our side. The problem has been logged; please try again."
}

// sqlStateError is what a PostgreSQL error offers (pgconn.PgError has it),
// so this package need not import the driver.
type sqlStateError interface {
	error
	SQLState() string
}

// unstorableText reports whether err is PostgreSQL refusing text for its
// bytes: character_not_in_repertoire or untranslatable_character.
func unstorableText(err error) bool {
	pe, ok := errors.AsType[sqlStateError](err)
	return ok && (pe.SQLState() == "22021" || pe.SQLState() == "22P05")
}

package swacache

import (
	"errors"
	"fmt"
)

// Code is a status code of the C API (swa_status_t). The values are pinned by
// the header and follow absl::StatusCode; the binding maps codes and never
// parses messages.
type Code uint32

// The status codes of include/swacache.h, with the same values.
const (
	CodeOK                 Code = 0  // SWA_OK: success.
	CodeCancelled          Code = 1  // SWA_CANCELLED: the operation was cancelled.
	CodeUnknown            Code = 2  // SWA_UNKNOWN: an error with no better code.
	CodeInvalidArgument    Code = 3  // SWA_INVALID_ARGUMENT: malformed argument.
	CodeDeadlineExceeded   Code = 4  // SWA_DEADLINE_EXCEEDED: a store call ran out of time.
	CodeNotFound           Code = 5  // SWA_NOT_FOUND: no such key, slot or entry.
	CodeAlreadyExists      Code = 6  // SWA_ALREADY_EXISTS: the entry exists already.
	CodePermissionDenied   Code = 7  // SWA_PERMISSION_DENIED: the caller may not do this.
	CodeResourceExhausted  Code = 8  // SWA_RESOURCE_EXHAUSTED: out of slots, memory or budget.
	CodeFailedPrecondition Code = 9  // SWA_FAILED_PRECONDITION: the state does not allow the call.
	CodeAborted            Code = 10 // SWA_ABORTED: a concurrent change aborted the call.
	CodeOutOfRange         Code = 11 // SWA_OUT_OF_RANGE: an index past the valid range.
	CodeUnimplemented      Code = 12 // SWA_UNIMPLEMENTED: not supported by this build or backend.
	CodeInternal           Code = 13 // SWA_INTERNAL: a broken invariant (or a panic in a Go store).
	CodeUnavailable        Code = 14 // SWA_UNAVAILABLE: a transient failure (store, device).
	CodeDataLoss           Code = 15 // SWA_DATA_LOSS: corrupt or truncated data.
	CodeUnauthenticated    Code = 16 // SWA_UNAUTHENTICATED: missing credentials (store).
)

// String returns the fixed name of the code from swa_status_string()
// ("INVALID_ARGUMENT", ...; "UNRECOGNIZED_STATUS" for unknown values).
// Thread-safe.
func (c Code) String() string { return statusString(c) }

// Error is a failed call: the library's status code and its message (for
// errors raised in Go, such as a length check or a closed handle, a message
// written by the binding). Compare with errors.Is against the sentinels
// (ErrInvalidArgument, ErrNotFound, ...), which match on Code alone.
type Error struct {
	Code    Code   // The status code; never CodeOK.
	Message string // What failed and why; may be empty for a sentinel.

	closed bool // Set on errors for a closed handle: they also match ErrClosed.
}

// Error formats the error as "swacache: CODE: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return "swacache: " + e.Code.String()
	}
	return "swacache: " + e.Code.String() + ": " + e.Message
}

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, swacache.ErrNotFound) holds for every NOT_FOUND error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	if t.closed {
		return e.closed
	}
	return t.Code == e.Code
}

// Sentinels, one per status code, for errors.Is. They carry no message.
var (
	ErrCancelled          = &Error{Code: CodeCancelled}          // Matches every CANCELLED error.
	ErrUnknown            = &Error{Code: CodeUnknown}            // Matches every UNKNOWN error.
	ErrInvalidArgument    = &Error{Code: CodeInvalidArgument}    // Matches every INVALID_ARGUMENT error.
	ErrDeadlineExceeded   = &Error{Code: CodeDeadlineExceeded}   // Matches every DEADLINE_EXCEEDED error.
	ErrNotFound           = &Error{Code: CodeNotFound}           // Matches every NOT_FOUND error.
	ErrAlreadyExists      = &Error{Code: CodeAlreadyExists}      // Matches every ALREADY_EXISTS error.
	ErrPermissionDenied   = &Error{Code: CodePermissionDenied}   // Matches every PERMISSION_DENIED error.
	ErrResourceExhausted  = &Error{Code: CodeResourceExhausted}  // Matches every RESOURCE_EXHAUSTED error.
	ErrFailedPrecondition = &Error{Code: CodeFailedPrecondition} // Matches every FAILED_PRECONDITION error.
	ErrAborted            = &Error{Code: CodeAborted}            // Matches every ABORTED error.
	ErrOutOfRange         = &Error{Code: CodeOutOfRange}         // Matches every OUT_OF_RANGE error.
	ErrUnimplemented      = &Error{Code: CodeUnimplemented}      // Matches every UNIMPLEMENTED error.
	ErrInternal           = &Error{Code: CodeInternal}           // Matches every INTERNAL error.
	ErrUnavailable        = &Error{Code: CodeUnavailable}        // Matches every UNAVAILABLE error.
	ErrDataLoss           = &Error{Code: CodeDataLoss}           // Matches every DATA_LOSS error.
	ErrUnauthenticated    = &Error{Code: CodeUnauthenticated}    // Matches every UNAUTHENTICATED error.
)

// ErrClosed is returned by every method of a Cache, Plan or BuiltinStore
// after Close (or, for a BuiltinStore, after a cache took it over). It is a
// FAILED_PRECONDITION error, so errors.Is(err, ErrFailedPrecondition) holds too.
var ErrClosed = &Error{Code: CodeFailedPrecondition, Message: "handle is closed", closed: true}

func newError(code Code, msg string) error {
	if code == CodeOK {
		code = CodeUnknown
	}
	return &Error{Code: code, Message: msg}
}

func errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// closedError is a FAILED_PRECONDITION error that also matches ErrClosed.
func closedError(what string) error {
	return &Error{Code: CodeFailedPrecondition, Message: what + " is closed", closed: true}
}

// nilHandleError is what Close (and the calls that check for it) return on a
// nil pointer or a zero value: an INVALID_ARGUMENT naming the type and the
// constructor whose error was probably ignored.
func nilHandleError(typ, constructor string) error {
	return errorf(CodeInvalidArgument, "%s: nil or zero value (did %s fail? its error says why)",
		typ, constructor)
}

// codeOf maps any error returned by a Go store to a status code: an *Error
// keeps its code, an error matching a sentinel gets that code, and anything
// else is UNKNOWN.
func codeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		if e.Code == CodeOK {
			return CodeUnknown
		}
		return e.Code
	}
	return CodeUnknown
}

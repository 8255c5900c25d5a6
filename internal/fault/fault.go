// Package fault is the one error type that crosses from Kassa's domain packages to the wire.
//
// A domain package returns a *fault.Error when a request cannot be carried out for a reason the
// client must hear about: a bad field, a missing resource, a state that forbids the operation. Each
// API face (the gateway API's {"error","message","field"} body, later the v1 payments API) maps it to
// its own JSON shape at the edge. Any other error is an internal failure: it is logged and answered
// with a 500 that says nothing about its cause.
package fault

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error is a client-visible failure: an HTTP status, a snake_case code, a human sentence and, when one
// field of the request is at fault, that field's name.
type Error struct {
	Status  int    // HTTP status code
	Code    string // snake_case machine code, e.g. "invalid_request"
	Message string // one human sentence
	Field   string // the request field at fault, or ""
	// Limit is the velocity limit that refused the request (a 429), or nil. The response reports it
	// in its rate-limit headers (httpapi.WriteRateLimit).
	Limit *RateLimit
	// RetryAfter, when not zero, says that the refusal passes: what the request waits on is still in
	// progress, and the request may be sent again after this long (the Retry-After header). Such an
	// answer is not the request's own, and is never replayed for its Idempotency-Key.
	RetryAfter time.Duration
}

// RateLimit is the state of one velocity limit for one subject (a card, a credential, a payment
// intent): what the RateLimit-Policy, RateLimit and Retry-After headers of a response report. It
// rides on a 429 in Error.Limit, and on a decline that a limit made without asking the processor.
type RateLimit struct {
	Policy    string        // the limit's name, e.g. "card-declines"
	Quota     int           // what the subject may use per window
	Window    time.Duration // the window, whole seconds
	Remaining int           // what is left of the quota in the current window
	Reset     time.Duration // until the current window ends, or a request-rate token comes back
}

// ResetSeconds is Reset in whole seconds, rounded up: what the headers and messages say.
func (l *RateLimit) ResetSeconds() int64 {
	return int64((l.Reset + time.Second - 1) / time.Second)
}

// RateLimited is a 429 rate_limited: limit refused the request.
func RateLimited(limit *RateLimit, format string, args ...any) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: fmt.Sprintf(format, args...), Limit: limit}
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return e.Code + ": " + e.Message
}

// Invalid is a 400 naming the field at fault.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: fmt.Sprintf(format, args...), Field: field}
}

// BadRequest is a 400 with a specific code and no single field at fault.
func BadRequest(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404. Foreign resources are reported exactly like missing ones.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

// Conflict is a 409: the resource's current state forbids the operation.
func Conflict(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Busy is a 409 that passes: an operation the request waits on is still in progress (an attempt under
// the same idempotency key awaiting the processor, another operation on the same payment intent, a
// change made while the request ran). The client is told to retry after a second.
func Busy(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Message: fmt.Sprintf(format, args...), RetryAfter: time.Second}
}

// New builds an Error with any status.
func New(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentence writes a refusal's message as a sentence a page shows: a capital first letter and a full
// stop.
func Sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

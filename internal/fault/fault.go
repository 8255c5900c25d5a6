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
)

// Error is a client-visible failure: an HTTP status, a snake_case code, a human sentence and, when one
// field of the request is at fault, that field's name.
type Error struct {
	Status  int    // HTTP status code
	Code    string // snake_case machine code, e.g. "invalid_request"
	Message string // one human sentence
	Field   string // the request field at fault, or ""
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

// New builds an Error with any status.
func New(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/fault"
)

// MaxBody is the largest request body Kassa reads: 1 MiB. A larger one is a 413.
const MaxBody = 1 << 20

// WriteJSON writes v as the JSON body of a response with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a programming error gets here: every response type marshals.
		slog.Error("encode response", "err", err) // no request context here; the default logger it is
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal_error","message":"The response could not be encoded."}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// errorBody is the gateway API's error shape (wire-contract.md, General rules).
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// StatusClientClosedRequest is the status recorded for a request whose client hung up before its
// answer (nginx's 499): nobody reads it, and it is not the server's failure.
const StatusClientClosedRequest = 499

// WriteError answers with err. A *fault.Error becomes {"error","message","field"} with its status,
// and the rate-limit headers of the velocity limit it carries (WriteRateLimit); anything else is
// logged with the request id and answered with a 500 that reveals nothing — but for the error of a
// request whose client hung up (its context canceled), which is logged as such and recorded as a 499,
// so that the access log and the metrics do not count it among the server's errors. (A payment cut
// off so is settled by recovery, as after a crash: its attempt was recorded before the processor was
// called.)
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var f *fault.Error
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		Logger(r.Context()).InfoContext(r.Context(), "client closed the request", "method", r.Method, "route", r.Pattern)
		f = fault.New(StatusClientClosedRequest, "client_closed_request", "The client closed the connection before the answer.")
	} else if !errors.As(err, &f) {
		Logger(r.Context()).ErrorContext(r.Context(), "internal error", "method", r.Method, "route", r.Pattern, "err", err)
		f = fault.New(http.StatusInternalServerError, "internal_error",
			"Something went wrong on our side; the request id identifies it in our logs.")
	}
	switch f.Status {
	case http.StatusUnauthorized:
		if w.Header().Get("WWW-Authenticate") == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kassa"`)
		}
	}
	if f.Limit != nil {
		WriteRateLimit(w.Header(), f.Limit)
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((f.RetryAfter+time.Second-1)/time.Second), 10))
	}
	WriteJSON(w, f.Status, errorBody{Error: f.Code, Message: f.Message, Field: f.Field})
}

// DecodeJSON reads the request body (at most MaxBody bytes) into v. An empty body decodes as {}.
// Malformed JSON, a value of the wrong type and trailing data are 400s that name the problem; an
// oversized body is a 413.
func DecodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return BodyError(err)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return decodeError(err)
	}
	return nil
}

// BodyError maps an error from reading a request body: too large is a 413, anything else a 400.
func BodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fault.New(http.StatusRequestEntityTooLarge, "request_too_large", "The request body is larger than %d bytes.", MaxBody)
	}
	return fault.BadRequest("invalid_request", "The request body could not be read: %v.", err)
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var f *fault.Error
	switch {
	case errors.As(err, &f):
		return f // a field's own UnmarshalJSON said what is wrong
	case errors.As(err, &syn):
		return fault.BadRequest("invalid_json", "The request body is not valid JSON: %s (at byte %d).", syn.Error(), syn.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		return fault.Invalid(typ.Field, "%s must be %s, not a JSON %s.", typ.Field, article(typ.Type.Kind().String()), typ.Value)
	case errors.As(err, &typ):
		return fault.BadRequest("invalid_json", "The request body must be a JSON object, not a JSON %s.", typ.Value)
	default:
		return fault.BadRequest("invalid_json", "The request body is not valid JSON: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
}

func article(kind string) string {
	switch kind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	default:
		return "a " + kind
	}
}

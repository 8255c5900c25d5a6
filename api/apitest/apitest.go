// Package apitest holds the responses of tests' servers to api/openapi.yaml: a middleware, put
// outermost around the handler of every server a test starts in-process, validates each response
// against the description with github.com/pb33f/libopenapi-validator and fails the test on a mismatch.
//
// What is covered: every response to a request whose method and path are an
// operation of openapi.yaml — its status must be documented, its body must match the schema of its
// status and content type, and the headers documented for it must match theirs. A request the server
// routes to one of its registered routes that openapi.yaml does not describe fails too, unless the
// route is left out on purpose (Undescribed). Requests that match no route (the JSON 404 and 405 of
// an unknown path or method) are not checked. A 500, which the description documents once for every
// operation, must be the JSON error internal_error (or an error page where the operation serves HTML).
package apitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/kassapay/kassa/api"
	"github.com/kassapay/kassa/internal/httpapi"
)

// Undescribed reports whether openapi.yaml leaves route out on purpose: the dashboard's pages are
// HTML for browsers, not part of the JSON APIs that openapi.yaml describes; GET / only sends browsers
// there, and is the JSON 404 of an unknown route to everyone else.
func Undescribed(route httpapi.Route) bool {
	return strings.HasPrefix(route.Pattern, "/dashboard") || route.Pattern == "/{$}"
}

// description is openapi.yaml's model and validators over it.
type description struct {
	model       *v3.Document
	v           validator.Validator
	schemas     schema_validation.SchemaValidator
	errorSchema *base.Schema // components/schemas/Error
}

// load builds the validator once per test binary: parsing the description and compiling its schemas
// takes about a second of CPU.
var load = sync.OnceValues(func() (*description, error) {
	doc, err := libopenapi.NewDocument(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	errorSchema := m.Model.Components.Schemas.GetOrZero("Error")
	if errorSchema == nil {
		return nil, errors.New("api/openapi.yaml: no components/schemas/Error")
	}
	return &description{model: &m.Model, v: validator.NewValidatorFromV3Model(&m.Model), schemas: schema_validation.NewSchemaValidator(),
		errorSchema: errorSchema.Schema()}, nil
})

// Middleware returns a wrapper of a server's handler, for server.Config.Wrap: routes are the routes
// the handler serves, each of which must be described unless Undescribed.
func Middleware(t testing.TB) func(h http.Handler, routes []httpapi.Route) http.Handler {
	return func(h http.Handler, routes []httpapi.Route) http.Handler { return Handler(t, h, routes) }
}

// Handler wraps h so that each of its responses is checked against openapi.yaml; a mismatch fails t
// with the method, path, status and the validator's messages. routes are the routes h serves.
func Handler(t testing.TB, h http.Handler, routes []httpapi.Route) http.Handler {
	d, err := load()
	if err != nil {
		t.Fatal(err)
	}
	served := http.NewServeMux()
	for _, r := range routes {
		if !Undescribed(r) {
			served.Handle(r.Method+" "+r.Pattern, http.NotFoundHandler())
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := described(r)
		_, route := served.Handler(req)
		if !d.documented(req) {
			h.ServeHTTP(w, r)
			if route != "" {
				t.Errorf("%s %s: the server serves the route %q, which api/openapi.yaml does not describe", req.Method, req.URL.Path, route)
			}
			return
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		d.check(t, req, rec.status(), w.Header(), rec.body.Bytes())
	})
}

// Check validates a response that a test received from a server it did not start in-process (a
// `kassa serve` child process); body is the response body as read. A request whose operation is
// not in openapi.yaml is not checked.
func Check(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	d, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if req = described(req); d.documented(req) {
		d.check(t, req, status, header, body)
	}
}

// described returns a copy of r, for the validator, without the trailing slash that "is optional on
// any path" (wire-contract.md, General rules) but that the description's paths do not have.
func described(r *http.Request) *http.Request {
	c := r.Clone(r.Context())
	c.Body = http.NoBody
	if p := c.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		c.URL.Path, c.URL.RawPath = strings.TrimSuffix(p, "/"), strings.TrimSuffix(c.URL.RawPath, "/")
	}
	return c
}

// documented reports whether openapi.yaml has an operation for r's method and path.
func (d *description) documented(r *http.Request) bool {
	item, errs, _ := paths.FindPath(r, d.model, nil)
	return item != nil && len(errs) == 0
}

// serves reports whether req's operation documents a response of the media type.
func (d *description) serves(req *http.Request, mediaType string) bool {
	item, _, _ := paths.FindPath(req, d.model, nil)
	op := helpers.ExtractOperation(req, item)
	if op == nil || op.Responses == nil {
		return false
	}
	for r := range op.Responses.Codes.ValuesFromOldest() {
		if r.Content.GetOrZero(mediaType) != nil {
			return true
		}
	}
	return false
}

// check fails t unless the response matches the operation of req in openapi.yaml.
func (d *description) check(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	var errs []*liberrors.ValidationError
	switch {
	case status == http.StatusInternalServerError:
		errs = d.documentedOnce(req, header, body, status, "internal_error")
	case status == http.StatusServiceUnavailable && errorCode(body) == "storage_unavailable":
		errs = d.documentedOnce(req, header, body, status, "storage_unavailable")
	default:
		resp := &http.Response{StatusCode: status, Header: header.Clone(), Body: io.NopCloser(bytes.NewReader(body)), Request: req}
		_, errs = d.v.ValidateHttpResponse(req, resp)
	}
	if len(errs) == 0 {
		return
	}
	var msgs []string
	for _, e := range errs {
		m := e.Message
		if e.Reason != "" {
			m += ": " + e.Reason
		}
		for _, f := range e.SchemaValidationErrors {
			m += "\n      " + f.Error()
		}
		msgs = append(msgs, m)
	}
	// A JSON body is shown, shortened; any other only by its type and size.
	shown := fmt.Sprintf("%d bytes of %q", len(body), header.Get("Content-Type"))
	if strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		const most = 600
		if shown = string(body); len(body) > most {
			shown = string(body[:most]) + "…"
		}
	}
	t.Errorf("%s %s → %d does not match api/openapi.yaml:\n  %s\n  body: %s", req.Method, req.URL.Path, status,
		strings.Join(msgs, "\n  "), shown)
}

// documentedOnce checks an answer that openapi.yaml documents once, in its introduction, rather than
// on every operation: "Any operation may answer 500 … the JSON error internal_error, or an error page
// where the operation serves HTML", and 503 storage_unavailable when a write fails for want of
// storage. Neither is the answer to anything a client sent ("Never a 500 for anything a client
// sent", wire-contract.md), so only tests that break the database or its disk on purpose see one.
func (d *description) documentedOnce(req *http.Request, header http.Header, body []byte, status int, code string) []*liberrors.ValidationError {
	ct := header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/html") && d.serves(req, "text/html") {
		return nil // an error page of a page for browsers
	}
	if !strings.HasPrefix(ct, "application/json") {
		return []*liberrors.ValidationError{{Message: fmt.Sprintf("a %d is sent as %s, not application/json", status, ct)}}
	}
	if _, errs := d.schemas.ValidateSchemaBytes(d.errorSchema, body); len(errs) > 0 {
		return errs
	}
	if got := errorCode(body); got != code {
		return []*liberrors.ValidationError{{Message: fmt.Sprintf("a %d's error is %q, not %s", status, got, code)}}
	}
	return nil
}

// errorCode is the error of a JSON error body, or "".
func errorCode(body []byte) string {
	var e struct{ Error string }
	json.Unmarshal(body, &e)
	return e.Error
}

// recorder passes a response through and keeps its status and a copy of its body.
type recorder struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// status is the status sent: 200 when the handler wrote nothing.
func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

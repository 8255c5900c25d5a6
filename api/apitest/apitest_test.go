package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kassapay/kassa/api/apitest"
	"github.com/kassapay/kassa/internal/httpapi"
)

// recorded stands in for a test: it keeps the failures the middleware reports instead of failing.
type recorded struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorded) Helper() {}

func (r *recorded) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// serve sends GET path to h wrapped by the middleware, with routes registered, and returns what the
// middleware reported. The client receives h's response untouched.
func serve(t *testing.T, h http.HandlerFunc, routes []httpapi.Route, path string) []string {
	t.Helper()
	rt := &recorded{TB: t}
	srv := httptest.NewServer(apitest.Handler(rt, h, routes))
	defer srv.Close()
	want := httptest.NewRecorder()
	h(want, httptest.NewRequest("GET", path, nil))
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want.Code || string(body) != want.Body.String() {
		t.Fatalf("the middleware changed the response: %d %q, want %d %q", resp.StatusCode, body, want.Code, want.Body)
	}
	srv.Close() // the handler has returned, and the middleware has checked, before Close returns
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.failures
}

func jsonHandler(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// A response that matches its schema passes; one of the wrong shape, an undocumented status or an
// undocumented content type fails, naming the method, path, status and what is wrong. A 500, which
// any operation may answer, must be the JSON error internal_error.
func TestMiddlewareCatchesAMismatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, path string
		h          http.HandlerFunc
		want       []string // in the one failure; none when empty
	}{
		{"matches", "/healthz", jsonHandler(200, `{"status":"ok"}`), nil},
		{"trailing slash is the same path", "/healthz/", jsonHandler(200, `{"status":"ok"}`), nil},
		{"wrong type", "/healthz", jsonHandler(200, `{"status":5}`), []string{"GET /healthz → 200", "status", "string"}},
		{"required field missing", "/readyz", jsonHandler(503, `{"error":"not_ready"}`), []string{"GET /readyz → 503", "message"}},
		{"undocumented status", "/healthz", jsonHandler(418, `{"status":"ok"}`), []string{"GET /healthz → 418", "418"}},
		{"undocumented content type", "/healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "ok")
		}, []string{"GET /healthz → 200", "text/plain"}},
		{"internal error", "/healthz", jsonHandler(500, `{"error":"internal_error","message":"Something went wrong."}`), nil},
		{"internal error of another shape", "/healthz", jsonHandler(500, `{"error":"oops"}`), []string{"GET /healthz → 500", "message"}},
		{"internal error with another code", "/healthz", jsonHandler(500, `{"error":"oops","message":"m"}`), []string{"GET /healthz → 500", "internal_error"}},
		{"internal error page of a page", "/oauth/authorize", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(500)
			io.WriteString(w, "<!doctype html><title>Something went wrong</title>")
		}, nil},
		{"internal error page of JSON", "/healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(500)
		}, []string{"GET /healthz → 500", "text/html"}},
		{"internal error in plain text", "/healthz", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "oops", 500)
		}, []string{"GET /healthz → 500", "text/plain"}},
		{"wrong shape on a path with a parameter", "/v1/payment-intents/pi_1", jsonHandler(200, `{"id":"pi_1"}`),
			[]string{"GET /v1/payment-intents/pi_1 → 200", "missing"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := serve(t, c.h, nil, c.path)
			if len(c.want) == 0 {
				if len(got) > 0 {
					t.Fatalf("a matching response was reported:\n%s", strings.Join(got, "\n"))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("want one failure, got %d:\n%s", len(got), strings.Join(got, "\n"))
			}
			for _, w := range c.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("the failure does not mention %q:\n%s", w, got[0])
				}
			}
		})
	}
}

// A route the server registers but openapi.yaml does not describe fails whatever it answers, unless
// it is one left out on purpose (the dashboard); a path no route serves is not checked.
func TestMiddlewareReportsUndescribedRoutes(t *testing.T) {
	t.Parallel()
	routes := []httpapi.Route{{Method: "GET", Pattern: "/v1/secret-things/{id}"}, {Method: "GET", Pattern: "/dashboard/payments"},
		{Method: "GET", Pattern: "/healthz"}}
	ok := jsonHandler(200, `{"status":"ok"}`)
	if got := serve(t, ok, routes, "/v1/secret-things/x1"); len(got) != 1 ||
		!strings.Contains(got[0], `"GET /v1/secret-things/{id}"`) || !strings.Contains(got[0], "does not describe") {
		t.Errorf("an undescribed route: %q", got)
	}
	for _, path := range []string{"/dashboard/payments", "/nowhere", "/healthz"} {
		if got := serve(t, ok, routes, path); len(got) > 0 {
			t.Errorf("GET %s was reported: %q", path, got)
		}
	}
}

// Check holds a response received from a server in another process to the description.
func TestCheck(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest("GET", "http://127.0.0.1:1/healthz", nil)
	hdr := http.Header{"Content-Type": {"application/json"}}
	rt := &recorded{TB: t}
	apitest.Check(rt, req, 200, hdr, []byte(`{"status":"ok"}`))
	apitest.Check(rt, httptest.NewRequest("GET", "http://127.0.0.1:1/nowhere", nil), 200, hdr, []byte(`[]`))
	if len(rt.failures) > 0 {
		t.Fatalf("matching or undescribed responses were reported: %q", rt.failures)
	}
	apitest.Check(rt, req, 200, hdr, []byte(`{}`))
	if len(rt.failures) != 1 || !strings.Contains(rt.failures[0], "GET /healthz → 200") {
		t.Fatalf("a body without its required field: %q", rt.failures)
	}
}

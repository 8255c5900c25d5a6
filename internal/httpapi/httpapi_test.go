package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
)

type payload struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func newServer(t *testing.T) (*httptest.Server, *cardtest.Buffer) {
	t.Helper()
	logs := &cardtest.Buffer{}
	log := slog.New(httpapi.LogHandler(slog.NewJSONHandler(logs, nil)))
	r := httpapi.NewRouter()
	r.HandleFunc("POST", "/things", func(w http.ResponseWriter, r *http.Request) {
		var p payload
		if err := httpapi.DecodeJSON(r, &p); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusCreated, p)
	})
	r.HandleFunc("GET", "/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "missing" {
			httpapi.WriteError(w, r, fault.NotFound("no thing %s", r.PathValue("id")))
			return
		}
		httpapi.Logger(r.Context()).InfoContext(r.Context(), "looked up")
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id")})
	})
	r.HandleFunc("GET", "/panic", func(w http.ResponseWriter, r *http.Request) { panic("handler bug") })
	r.HandleFunc("GET", "/oops", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, io.ErrUnexpectedEOF)
	})
	r.HandleFunc("GET", "/wait", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the client hangs up
		httpapi.WriteError(w, r, fmt.Errorf("charge: %w", r.Context().Err()))
	})
	r.HandleFunc("GET", "/canceled", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, context.Canceled) // something of the server's own was canceled
	})
	srv := httptest.NewServer(httpapi.Middleware(log, nil, r))
	t.Cleanup(srv.Close)
	return srv, logs
}

func do(t *testing.T, method, url, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v", method, url, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, url, ct)
	}
	return resp, out
}

func TestRouting(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"match", "GET", "/things/7", "", 200, "", ""},
		{"trailing slash", "GET", "/things/7/", "", 200, "", ""},
		{"trailing slash on POST", "POST", "/things/", `{"name":"a"}`, 201, "", ""},
		{"unknown route", "GET", "/nothing/here", "", 404, "not_found", ""},
		{"root", "GET", "/", "", 404, "not_found", ""},
		{"handler's own 404", "GET", "/things/missing", "", 404, "not_found", ""},
		{"wrong method", "DELETE", "/things", "", 405, "method_not_allowed", ""},
		{"malformed JSON", "POST", "/things", `{"name":`, 400, "invalid_json", ""},
		{"not an object", "POST", "/things", `[1,2]`, 400, "invalid_json", ""},
		{"wrong type names the field", "POST", "/things", `{"count":"many"}`, 400, "invalid_request", "count"},
		{"trailing data", "POST", "/things", `{"name":"a"} {}`, 400, "invalid_json", ""},
		{"empty body is an empty object", "POST", "/things", ``, 201, "", ""},
		{"body over 1 MiB", "POST", "/things", `{"name":"` + strings.Repeat("x", httpapi.MaxBody) + `"}`, 413, "request_too_large", ""},
		{"panic", "GET", "/panic", "", 500, "internal_error", ""},
		{"internal error", "GET", "/oops", "", 500, "internal_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := do(t, tc.method, srv.URL+tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tc.status, out)
			}
			if resp.Header.Get("Request-Id") == "" {
				t.Fatal("no Request-Id header")
			}
			if tc.code == "" {
				return
			}
			if out["error"] != tc.code || out["message"] == "" {
				t.Fatalf("body %v, want error %s with a message", out, tc.code)
			}
			if f, _ := out["field"].(string); f != tc.field {
				t.Fatalf("field %q, want %q", f, tc.field)
			}
			if tc.status == 405 && resp.Header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
			if tc.status == 500 && strings.Contains(out["message"].(string), "handler bug") {
				t.Fatal("500 reveals the panic")
			}
		})
	}
	// The process survived the panic and serves the next request.
	if resp, _ := do(t, "GET", srv.URL+"/things/8", ""); resp.StatusCode != 200 {
		t.Fatalf("after the panic: %d", resp.StatusCode)
	}
}

func TestLogsCarryRequestIDAndNoQueryString(t *testing.T) {
	t.Parallel()
	srv, logs := newServer(t)
	resp, _ := do(t, "GET", srv.URL+"/things/9?client_secret=s3cr3t", "")
	id := resp.Header.Get("Request-Id")
	do(t, "GET", srv.URL+"/panic", "")
	var lookedUp, access, panicked bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if strings.Contains(line, "s3cr3t") {
			t.Fatalf("log line contains the query string: %s", line)
		}
		switch {
		case rec["msg"] == "looked up" && rec["request_id"] == id:
			lookedUp = true
		case rec["msg"] == "request" && rec["request_id"] == id && rec["route"] == "GET /things/{id}" && rec["status"] == float64(200):
			access = true
		case rec["msg"] == "panic in handler" && rec["stack"] != nil:
			panicked = true
		}
	}
	if !lookedUp || !access || !panicked {
		t.Fatalf("handler log %v, access log %v, panic log %v in:\n%s", lookedUp, access, panicked, logs.String())
	}
}

func TestRoutesAreListed(t *testing.T) {
	t.Parallel()
	r := httpapi.NewRouter()
	r.HandleFunc("POST", "/b", nil)
	r.HandleFunc("GET", "/b", nil)
	r.HandleFunc("GET", "/a/{id}", nil)
	got := r.Routes()
	want := []httpapi.Route{{"GET", "/a/{id}"}, {"GET", "/b"}, {"POST", "/b"}}
	if len(got) != len(want) {
		t.Fatalf("Routes() = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Routes() = %v, want %v", got, want)
		}
	}
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add(`{"name":"a","count":3}`)
	f.Add(`{"count":1e400}`)
	f.Add(`nul`)
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, httpapi.MaxBody)
		var p payload
		err := httpapi.DecodeJSON(r, &p)
		if err == nil {
			return
		}
		var fe *fault.Error
		if !errors.As(err, &fe) || (fe.Status != 400 && fe.Status != 413) {
			t.Fatalf("DecodeJSON(%q) error %v is not a 400 or 413 fault", body, err)
		}
	})
}

// A request whose client hangs up is recorded as a 499, logged as what it is, not as an internal
// error; a cancellation of the server's own while the client waits is still a 500.
func TestClientThatHangsUpIsNotAnInternalError(t *testing.T) {
	t.Parallel()
	srv, logs := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/wait", nil)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request was answered")
	}
	if resp, body := do(t, "GET", srv.URL+"/canceled", ""); resp.StatusCode != 500 || body["error"] != "internal_error" {
		t.Fatalf("a cancellation of the server's own: %d %v", resp.StatusCode, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), `"route":"GET /wait","status":499`) {
		if time.Now().After(deadline) {
			t.Fatalf("no 499 in the access log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, "internal error") && strings.Contains(line, "/wait") {
			t.Errorf("the hang-up is logged as an internal error: %s", line)
		}
	}
	if !strings.Contains(logs.String(), `"msg":"client closed the request"`) {
		t.Errorf("the hang-up is not logged:\n%s", logs.String())
	}
}

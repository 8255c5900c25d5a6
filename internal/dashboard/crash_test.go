package dashboard

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/httpapi"
)

// A panic in a dashboard page, through the router and the middleware as the server serves it, is the
// dashboard's HTML 500 page with the request id, never the panic's text; a panic on an API path keeps
// the API's JSON 500.
func TestPanicPage(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	r := httpapi.NewRouter()
	r.Pages("/dashboard", http.HandlerFunc(h.notFound), http.HandlerFunc(h.notAllowed), h.crashed)
	boom := func(w http.ResponseWriter, r *http.Request) { panic("secret handler bug") }
	r.HandleFunc("GET", "/dashboard/boom", boom)
	r.HandleFunc("GET", "/v1/boom", boom)
	srv := httptest.NewServer(httpapi.Middleware(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, r))
	defer srv.Close()

	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, body := get("/dashboard/boom")
	id := resp.Header.Get("Request-Id")
	if resp.StatusCode != http.StatusInternalServerError || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		id == "" || !strings.Contains(body, "<code>"+id+"</code>") || !strings.Contains(body, `<a href="/dashboard">Back to the overview</a>`) {
		t.Fatalf("a page's panic: %d %s %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), id, body)
	}
	if strings.Contains(body, "secret handler bug") || strings.Contains(body, "panic") {
		t.Fatalf("the 500 page tells the panic:\n%s", body)
	}
	resp, body = get("/v1/boom")
	if resp.StatusCode != http.StatusInternalServerError || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
		!strings.Contains(body, `"internal_error"`) {
		t.Fatalf("the API's panic: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

package web_test

import (
	"crypto/sha512"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/kassapay/kassa/api/apitest"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/web"
)

// The script's own tests (published SHA-256 and base64 vectors, argument errors, a token opened by
// Node's crypto) run under Node's test runner.
func TestScriptUnderNode(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		storetest.Unavailable(t, "Node.js is not installed")
	}
	out, err := exec.Command(node, "--test", "card-encryption.test.js").CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# fail 0") || strings.Contains(string(out), "# pass 0") {
		t.Fatalf("node --test did not pass every test:\n%s", out)
	}
}

func TestServeScripts(t *testing.T) {
	t.Parallel()
	r := httpapi.NewRouter()
	r.HandleFunc("GET", "/js/{file}", web.ServeScripts)
	srv := httptest.NewServer(apitest.Handler(t, r, r.Routes()))
	defer srv.Close()
	s := web.CardEncryption
	get := func(path, etag string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	plain, body := get("/js/card-encryption.js", "")
	if plain.StatusCode != 200 || !strings.Contains(body, "function CardEncryption(") ||
		plain.Header.Get("Cache-Control") != "public, max-age=300" || plain.Header.Get("Content-Type") != "text/javascript; charset=utf-8" ||
		plain.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(plain.Header.Get("Link"), s.Path()) {
		t.Fatalf("plain name: %d %v", plain.StatusCode, plain.Header)
	}
	versioned, vbody := get(s.Path(), "")
	if versioned.StatusCode != 200 || vbody != body || !strings.Contains(versioned.Header.Get("Cache-Control"), "immutable") {
		t.Fatalf("versioned name: %d %v", versioned.StatusCode, versioned.Header)
	}
	sum := sha512.Sum384([]byte(body))
	if want := "sha384-" + base64.StdEncoding.EncodeToString(sum[:]); s.Integrity != want {
		t.Fatalf("integrity %s, want %s", s.Integrity, want)
	}
	if resp, _ := get("/js/card-encryption.js", plain.Header.Get("ETag")); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", resp.StatusCode)
	}
	if resp, _ := get("/js/card-encryption.0000000000000000.js", ""); resp.StatusCode != 404 {
		t.Fatalf("another version: %d", resp.StatusCode)
	}
	if resp, _ := get("/js/other.js", ""); resp.StatusCode != 404 {
		t.Fatalf("unknown script: %d", resp.StatusCode)
	}
}

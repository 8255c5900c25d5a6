package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Every JSON answer of the API carries "Cache-Control: no-store", success or error, whoever wrote it
// every registered route is called without credentials and with a merchant's
// bearer token and API key, then the router's own 404 and 405, and an idempotent replay.
func TestJSONAnswersAreNeverStored(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	srv := servertest.Start(t, db, server.Config{})
	m := srv.NewMerchant(t)
	key := srv.NewAPIKey(t, "acct_"+m.ID, checkout.AllPermissions)
	creds := []string{"Authorization", "Bearer " + m.Token, checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_" + m.ID}

	seen := map[int]int{} // JSON answers by status class
	call := func(method, path string, hdr ...string) http.Header {
		t.Helper()
		var body io.Reader
		if method != "GET" && method != "DELETE" {
			body = strings.NewReader("{}")
		}
		req, _ := http.NewRequest(method, srv.URL+path, body)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			seen[resp.StatusCode/100]++
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("%s %s: %d with Cache-Control %q", method, path, resp.StatusCode, cc)
			}
		}
		return resp.Header
	}
	first := call("POST", "/customer-service/customer", append(creds, "Idempotency-Key", "replayed-1")...)
	replay := call("POST", "/customer-service/customer", append(creds, "Idempotency-Key", "replayed-1")...)
	if first.Get("Idempotent-Replayed") != "" || replay.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("no replay: %v / %v", first, replay)
	}
	call("GET", "/no-such-route")
	call("DELETE", "/healthz")
	param := regexp.MustCompile(`\{[a-z_]+\}`)
	var last []string // the routes that revoke the token: called after every other
	for _, r := range srv.Routes() {
		path := param.ReplaceAllString(r.Pattern, "1")
		call(r.Method, path)
		if strings.HasPrefix(path, "/oauth/revoke") {
			last = append(last, r.Method, path)
			continue
		}
		call(r.Method, path, creds...)
	}
	for i := 0; i < len(last); i += 2 {
		call(last[i], last[i+1], creds...)
	}
	if seen[2] < 10 || seen[4] < 20 {
		t.Fatalf("too few JSON answers to say anything: %v by status class", seen)
	}
	t.Logf("JSON answers by status class: %v", seen)
}

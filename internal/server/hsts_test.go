package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Every answer of a Kassa whose public URL is https, or that serves TLS itself, carries
// Strict-Transport-Security for a year: JSON and pages, successes and errors, the router's own 404
// and 405. A Kassa on a plain-http public URL without TLS sends none of them the header.
func TestStrictTransportSecurity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"https public URL", server.Config{PublicURL: "https://pay.maple.example"}, "max-age=31536000"},
		{"https public URL in capitals", server.Config{PublicURL: "HTTPS://pay.maple.example"}, "max-age=31536000"},
		{"TLS", server.Config{TLS: true, PublicURL: "http://pay.maple.example"}, "max-age=31536000"},
		{"plain http", server.Config{PublicURL: "http://pay.maple.example"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := servertest.Start(t, storetest.SQLite(t), tc.cfg)
			for _, call := range []struct{ method, path, body string }{
				{"GET", "/healthz", ""},
				{"GET", "/dashboard/sign-in", ""},
				{"GET", "/no-such-route", ""},
				{"DELETE", "/healthz", ""},
				{"POST", "/oauth/token", "grant_type=client_credentials"},
				{"GET", "/customer-service/customer", ""},
			} {
				req, _ := http.NewRequest(call.method, srv.URL+call.path, strings.NewReader(call.body))
				if call.body != "" {
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got := resp.Header.Values("Strict-Transport-Security"); strings.Join(got, ", ") != tc.want {
					t.Errorf("%s %s: %d with Strict-Transport-Security %q, want %q", call.method, call.path, resp.StatusCode, got, tc.want)
				}
			}
		})
	}
}

package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/httpapi"
)

// FuzzTokenRequest feeds arbitrary query strings, content types, bodies and Authorization headers to
// the token endpoint's parameter and client-authentication parsing. It must never panic, every
// failure must be an RFC 6749 error, and what it accepts must satisfy the rules it implements.
func FuzzTokenRequest(f *testing.F) {
	f.Add("grant_type=client_credentials", "", "", "Basic YWJjOmRlZg==")
	f.Add("", "application/x-www-form-urlencoded", "grant_type=client_credentials&client_id=a&client_secret=b", "")
	f.Add("grant_type=x&grant_type=y", "multipart/form-data; boundary=zz", "--zz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--zz--\r\n", "basic %%%")
	f.Add("client_id=a%3Ab", "text/plain", "  ", "Basic OmZvbw==")
	f.Fuzz(func(t *testing.T, query, contentType, body, authorization string) {
		r := httptest.NewRequest("POST", "/oauth/token", strings.NewReader(body))
		r.URL.RawQuery = query
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, httpapi.MaxBody)
		p, fromQuery, err := readParams(r)
		if err != nil {
			if _, ok := err.(*oauthError); !ok {
				t.Fatalf("readParams error %T %v is not an oauthError", err, err)
			}
			return
		}
		for k, vs := range p {
			if len(vs) != 1 || vs[0] == "" {
				t.Fatalf("parameter %q has values %q; want exactly one non-empty value", k, vs)
			}
		}
		for k := range fromQuery {
			if v := fromQuery.Get(k); v != "" && p.Get(k) != v {
				t.Fatalf("query parameter %q=%q is not among the parameters: %q", k, v, p.Get(k))
			}
		}
		ca, oerr := readClientAuth(r, p)
		if oerr != nil {
			if oerr.Code != "invalid_client" || oerr.status != http.StatusUnauthorized {
				t.Fatalf("client auth error %+v", oerr)
			}
			return
		}
		if ca.id == "" {
			t.Fatal("accepted client authentication without a client id")
		}
		if id := p.Get("client_id"); id != "" && id != ca.id {
			t.Fatalf("client_id parameter %q disagrees with the authenticated id %q", id, ca.id)
		}
	})
}

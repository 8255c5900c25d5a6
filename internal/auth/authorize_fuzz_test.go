package auth_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// FuzzAuthorizationRequest feeds arbitrary query strings to ParseAuthorizationRequest. It must never
// panic; every failure is a ClientError or a RedirectError; a RedirectError only ever names a
// registered redirect URI, and an accepted request carries one, with code as its response type.
func FuzzAuthorizationRequest(f *testing.F) {
	fx := newFixture(f, storetest.SQLite(f))
	p := fx.newPartner(f, 0)
	for _, q := range []url.Values{authorizeQuery(p), authorizeQuery(p, "scope", "ecom invoice", "code_challenge", pkce("x"), "code_challenge_method", "S256"),
		authorizeQuery(p, "redirect_uri", "https://evil.example/"), authorizeQuery(p, "response_type", "token")} {
		f.Add(q.Encode())
	}
	f.Add("client_id=" + p.ClientID + "&redirect_uri=%zz")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // the pages answer a malformed form themselves
		}
		req, err := fx.svc.ParseAuthorizationRequest(context.Background(), q)
		var ce *auth.ClientError
		var re *auth.RedirectError
		switch {
		case err == nil:
			if q.Get("response_type") != "code" || !slices.Contains(req.Partner.CallbackURIs, req.RedirectURI) || req.Scopes == 0 {
				t.Fatalf("accepted %v as %+v", q, req)
			}
		case errors.As(err, &re):
			if !slices.Contains(req.Partner.CallbackURIs, req.RedirectURI) {
				t.Fatalf("a redirect error for an unregistered redirect URI %q", req.RedirectURI)
			}
		case !errors.As(err, &ce):
			t.Fatalf("error %T %v", err, err)
		}
	})
}

package client

import (
	"context"
	"net/http"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Auth authenticates the requests of a client: it wraps next, the transport that carries them to
// server (the base URL given to New or Transport). ClientCredentials and BearerToken authenticate to
// the gateway API, APIKey to the payments API v1.
type Auth func(server string, next http.RoundTripper) http.RoundTripper

// ClientCredentials authenticates as a merchant's OAuth client (`kassa client create` prints the
// pair) with the client credentials grant at server's /oauth/token, the pair sent with HTTP Basic.
// The access token is fetched at the first request and again once it expires; scopes, when given,
// narrow it to a subset of the client's.
func ClientCredentials(clientID, clientSecret string, scopes ...string) Auth {
	return func(server string, next http.RoundTripper) http.RoundTripper {
		cfg := clientcredentials.Config{
			ClientID:     clientID,
			ClientSecret: clientSecret,
			TokenURL:     strings.TrimSuffix(server, "/") + "/oauth/token",
			Scopes:       scopes,
			AuthStyle:    oauth2.AuthStyleInHeader,
		}
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Transport: next})
		return &oauth2.Transport{Source: cfg.TokenSource(ctx), Base: next}
	}
}

// BearerToken authenticates with an access token obtained elsewhere (a partner's authorization-code
// grant, a password sign-in), sent as "Authorization: Bearer token". It is not renewed.
func BearerToken(token string) Auth {
	return func(_ string, next http.RoundTripper) http.RoundTripper {
		src := oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token, TokenType: "Bearer"})
		return &oauth2.Transport{Source: src, Base: next}
	}
}

// APIKey authenticates to the payments API v1 as the server checks it (internal/checkout/access.go,
// after hosted-payment-page-api.md): "Header payments-api-key carries the secret API key; header
// payments-account carries the account identifier" — acct_ and the merchant id, which
// `kassa merchant create` prints as account_id. A partner's key acts for a merchant that approved it
// by naming the merchant's account.
func APIKey(key, account string) Auth {
	return func(_ string, next http.RoundTripper) http.RoundTripper {
		return headerTransport{set: http.Header{
			http.CanonicalHeaderKey("payments-api-key"): {key},
			http.CanonicalHeaderKey("payments-account"): {account},
		}, next: next}
	}
}

// headerTransport adds headers to every request.
type headerTransport struct {
	set  http.Header
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	// A RoundTripper must not change the request it is given.
	r = r.Clone(r.Context())
	for k, v := range t.set {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
}

package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// tokenResponse is the token endpoint's success body (gateway-api.md "Token response";
// wire-contract.md: scope is one space-separated string).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
	MerchantID   string `json:"merchant_id"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

// TokenHandler serves POST /oauth/token.
func (s *Service) TokenHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := s.token(r)
		if err != nil {
			writeOAuthError(w, r, err)
			return
		}
		// RFC 6749 §5.1: responses carrying tokens must not be cached.
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Pragma", "no-cache")
		httpapi.WriteJSON(w, http.StatusOK, resp)
	})
}

func (s *Service) token(r *http.Request) (*tokenResponse, error) {
	p, query, err := readParams(r)
	if err != nil {
		return nil, err
	}
	gt := p.Get("grant_type")
	resp, err := s.grant(r, p, query, gt)
	if err == nil {
		s.metrics.TokenIssued(gt)
	}
	return resp, err
}

// grant answers a token request of grant type gt, whose parameters are p (query: those of its query
// string).
func (s *Service) grant(r *http.Request, p, query url.Values, gt string) (*tokenResponse, error) {
	switch gt {
	case "":
		return nil, invalidRequest("The grant_type parameter is required.")
	case "client_credentials":
		return s.clientCredentials(r.Context(), r, p)
	case "authorization_code":
		return s.authorizationCode(r.Context(), r, p)
	case "refresh_token":
		return s.refreshToken(r.Context(), r, p)
	case "password":
		// Credentials stay out of URLs wherever the contract allows it: a URL is written to proxy and
		// server logs and kept in histories (RFC 6749 §3.2 asks for the body for the same reason).
		// The contract keeps the query string only for the spec's client-credentials,
		// authorization-code and refresh requests; the password grant's shape is not shown.
		if query.Get("password") != "" || query.Get("client_secret") != "" {
			return nil, invalidRequest("Send password and client_secret in the request body, not in the query string.")
		}
		return s.passwordGrant(r.Context(), r, p)
	default:
		return nil, &oauthError{status: http.StatusBadRequest, Code: "unsupported_grant_type",
			Description: "The grant_type " + strconv.Quote(gt) + " is not supported."}
	}
}

// clientCredentials is the client credentials grant (RFC 6749 §4.4): the merchant's own pair gets a
// token for the merchant's own account (gateway-api.md, Authentication rule 2). No refresh token is
// issued (§4.4.3).
func (s *Service) clientCredentials(ctx context.Context, r *http.Request, p url.Values) (*tokenResponse, error) {
	c, err := s.authenticateClient(ctx, r, p)
	if err != nil {
		return nil, err
	}
	if c.merchantID == "" {
		// A partner's client has no account of its own to act for: it acts for merchants who
		// approved it, through the authorization-code grant.
		return nil, unauthorizedClient("A partner's client gets tokens through the authorization_code grant.")
	}
	scopes := c.scopes
	if req := p.Get("scope"); req != "" {
		asked, err := ParseScopes(req)
		if err != nil || asked == 0 || !c.scopes.Has(asked) {
			return nil, &oauthError{status: http.StatusBadRequest, Code: "invalid_scope",
				Description: "The requested scope is unknown or exceeds what the client may ask for."}
		}
		scopes = asked
	}
	tok, claims := s.issue(c.id, c.merchantID, scopes, c.validity)
	s.noteUse(ctx, c)
	return &tokenResponse{
		AccessToken: tok,
		TokenType:   "Bearer",
		ExpiresIn:   int64(claims.ExpiresAt.Sub(claims.IssuedAt).Seconds()),
		Scope:       scopes.String(),
		MerchantID:  c.merchantID,
	}, nil
}

// authenticateClient checks the client's credentials. Unknown, revoked and wrong-secret clients get
// the same answer after the same work.
func (s *Service) authenticateClient(ctx context.Context, r *http.Request, p url.Values) (client, error) {
	ca, oerr := readClientAuth(r, p)
	if oerr != nil {
		return client{}, oerr
	}
	var c client
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		c, err = lookupClient(ctx, q, ca.id)
		return err
	})
	switch {
	case errors.Is(err, ErrUnknownClient):
		secretMatches(dummySecretHash, ca.secret)
		return client{}, invalidClient()
	case err != nil:
		return client{}, err
	}
	if !secretMatches(c.secretHash, ca.secret) || c.revoked {
		return client{}, invalidClient()
	}
	return c, nil
}

// writeOAuthError answers with an RFC 6749 §5.2 error; any other error is an internal failure.
func writeOAuthError(w http.ResponseWriter, r *http.Request, err error) {
	var oe *oauthError
	if !errors.As(err, &oe) {
		httpapi.WriteError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	if oe.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(oe.retryAfter), 10))
	}
	if oe.status == http.StatusUnauthorized {
		// RFC 6749 §5.2: invalid_client answered with 401 carries WWW-Authenticate.
		h.Set("WWW-Authenticate", `Basic realm="kassa"`)
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(oe.status)
	json.NewEncoder(w).Encode(oe)
}

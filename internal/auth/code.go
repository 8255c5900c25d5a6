package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// Authorization code lifetimes: "A maximum authorization code lifetime of 10 minutes is RECOMMENDED"
// (RFC 6749 §4.1.2); Kassa's codes last a minute unless configured otherwise.
const (
	DefaultCodeTTL = time.Minute
	MaxCodeTTL     = 10 * time.Minute
)

// AuthorizationRequest is a request to /oauth/authorize whose client and redirect URI are known good.
type AuthorizationRequest struct {
	ClientID      string
	RedirectURI   string
	State         string
	Scopes        Scopes
	CodeChallenge string // PKCE S256 challenge (RFC 7636 §4.2), or ""
	Partner       Partner
}

// ClientError is a fault of the client or redirect URI of an authorization request: the user agent
// must not be sent back to the redirect URI (RFC 6749 §4.1.2.1), only told.
type ClientError struct{ Reason string }

func (e *ClientError) Error() string { return e.Reason }

// RedirectError is any other fault of an authorization request: it goes back to the client's
// redirect URI as error and state (RFC 6749 §4.1.2.1).
type RedirectError struct {
	Code, Description string
}

func (e *RedirectError) Error() string { return e.Code + ": " + e.Description }

// pkceChallenge is the shape of an S256 challenge: base64url of 32 bytes (RFC 7636 §4.2).
var pkceChallenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// ParseAuthorizationRequest checks the parameters of an authorization request (RFC 6749 §4.1.1,
// RFC 7636 §4.3). The client and the redirect URI are checked first: a fault there is a ClientError.
// Once they are known good, every other fault is a RedirectError, with the request as far as it
// could be read.
func (s *Service) ParseAuthorizationRequest(ctx context.Context, q url.Values) (AuthorizationRequest, error) {
	req := AuthorizationRequest{ClientID: q.Get("client_id"), RedirectURI: q.Get("redirect_uri"), State: q.Get("state")}
	var c client
	err := s.db.Read(ctx, func(tx store.Querier) error {
		var err error
		if c, err = lookupClient(ctx, tx, req.ClientID); err != nil {
			return err
		}
		if c.partnerID != "" {
			req.Partner, err = GetPartner(ctx, tx, c.partnerID)
		}
		return err
	})
	switch {
	case errors.Is(err, ErrUnknownClient) || (err == nil && (c.revoked || c.partnerID == "")):
		return req, &ClientError{Reason: "The application asking for access is not known to Kassa."}
	case err != nil:
		return req, err
	}
	switch {
	case req.RedirectURI == "" && len(req.Partner.CallbackURIs) == 1:
		req.RedirectURI = req.Partner.CallbackURIs[0]
	case req.RedirectURI == "":
		return req, &ClientError{Reason: "The request names no redirect_uri, and the application has several."}
	case !slices.Contains(req.Partner.CallbackURIs, req.RedirectURI):
		// Compared exactly, as registered (RFC 6749 §3.1.2.3).
		return req, &ClientError{Reason: "The redirect_uri is not one the application registered."}
	}
	if rt := q.Get("response_type"); rt != "code" {
		return req, &RedirectError{"unsupported_response_type", "Only response_type=code is supported."}
	}
	req.Scopes = c.scopes
	if sc := q.Get("scope"); sc != "" {
		asked, err := ParseScopes(sc)
		if err != nil || asked == 0 || !c.scopes.Has(asked) {
			return req, &RedirectError{"invalid_scope", "The requested scope is unknown or exceeds what the application may ask for."}
		}
		req.Scopes = asked
	}
	if ch := q.Get("code_challenge"); ch != "" || q.Get("code_challenge_method") != "" {
		// RFC 7636 §4.3; only S256: "plain" would let a stolen code be redeemed by whoever saw the request.
		if q.Get("code_challenge_method") != "S256" || !pkceChallenge.MatchString(ch) {
			return req, &RedirectError{"invalid_request", "code_challenge must be an S256 challenge with code_challenge_method=S256."}
		}
		req.CodeChallenge = ch
	}
	return req, nil
}

// Authorize records the merchant's approval of req — a grant — and returns a new authorization code
// for the redirect URI. The code is single use, lives CodeTTL, and is bound to the client, the
// redirect URI and the PKCE challenge; only its hash is stored.
func (s *Service) Authorize(ctx context.Context, merchantID string, req AuthorizationRequest) (string, error) {
	code := base64.RawURLEncoding.EncodeToString(random32())
	now := s.now()
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		grantID, err := Approve(ctx, tx, req.ClientID, merchantID, req.Scopes, now)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO authorization_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at)
			VALUES ($1, $2, $3, $4, $5)`, hashOf(code), grantID, req.RedirectURI, nullable(req.CodeChallenge), now.Add(s.codeTTL).UnixMilli())
		return err
	})
	return code, err
}

// authorizationCode is the authorization code grant (RFC 6749 §4.1.3): a partner's client exchanges
// a code for an access token, a refresh token and the merchant id.
func (s *Service) authorizationCode(ctx context.Context, r *http.Request, p url.Values) (*tokenResponse, error) {
	c, err := s.authenticateClient(ctx, r, p)
	if err != nil {
		return nil, err
	}
	if c.partnerID == "" {
		return nil, unauthorizedClient("A merchant's own client gets tokens through the client_credentials or password grant.")
	}
	code := p.Get("code")
	if code == "" {
		return nil, invalidRequest("The code parameter is required.")
	}
	now := s.now()
	return s.redeem(ctx, func(tx *store.Tx, out *redemption) error {
		var redirect, challenge string
		var expires int64
		var used bool
		g, err := scanGrant(tx.QueryRowContext(ctx, `SELECT `+grantColumns+`, a.redirect_uri, COALESCE(a.code_challenge, ''),
			a.expires_at, a.used_at IS NOT NULL FROM authorization_codes a JOIN oauth_grants g ON g.id = a.grant_id
			WHERE a.code_hash = $1`, hashOf(code)), &redirect, &challenge, &expires, &used)
		switch {
		case isNoRows(err) || (err == nil && g.clientID != c.idString()):
			// RFC 6749 §4.1.3: the code must have been issued to the authenticated client.
			out.fail = invalidGrant("The authorization code is invalid.")
			return nil
		case err != nil:
			return err
		case g.revoked:
			out.fail = invalidGrant("The authorization code is invalid.")
			return nil
		case used:
			// RFC 6749 §4.1.2: "If an authorization code is used more than once, the authorization
			// server MUST deny the request and SHOULD revoke (when possible) all tokens previously
			// issued based on that authorization code."
			out.revoked, out.fail = g.id, invalidGrant("The authorization code was already used; the tokens issued for it are revoked.")
			return revokeGrant(ctx, tx, g.id, c.validity, now)
		case now.UnixMilli() >= expires:
			out.fail = invalidGrant("The authorization code has expired.")
			return nil
		case p.Get("redirect_uri") != redirect:
			// RFC 6749 §4.1.3: redirect_uri is required, and identical, when the authorization request had it.
			out.fail = invalidGrant("The redirect_uri does not match the authorization request.")
			return nil
		}
		if verr := verifyPKCE(challenge, p.Get("code_verifier")); verr != nil {
			out.fail = verr
			return nil
		}
		n, err := tx.ExecContext(ctx, `UPDATE authorization_codes SET used_at = $2 WHERE code_hash = $1 AND used_at IS NULL`, hashOf(code), now.UnixMilli())
		if err != nil {
			return err
		}
		if k, _ := n.RowsAffected(); k != 1 {
			out.revoked, out.fail = g.id, invalidGrant("The authorization code was already used; the tokens issued for it are revoked.")
			return revokeGrant(ctx, tx, g.id, c.validity, now)
		}
		out.resp, err = s.issueForGrant(ctx, tx, g, c, now)
		return err
	})
}

// verifyPKCE checks the code verifier against the challenge the authorization request carried (RFC
// 7636 §4.6). A verifier without a challenge is refused too, so that a client cannot be downgraded.
func verifyPKCE(challenge, verifier string) *oauthError {
	switch {
	case challenge == "" && verifier == "":
		return nil
	case challenge == "":
		return invalidGrant("A code_verifier was sent, but the authorization request had no code_challenge.")
	case len(verifier) < 43 || len(verifier) > 128:
		return invalidGrant("The code_verifier does not match the code_challenge.")
	}
	sum := sha256.Sum256([]byte(verifier))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) != 1 {
		return invalidGrant("The code_verifier does not match the code_challenge.")
	}
	return nil
}

func invalidGrant(desc string) *oauthError {
	return &oauthError{status: http.StatusBadRequest, Code: "invalid_grant", Description: desc}
}

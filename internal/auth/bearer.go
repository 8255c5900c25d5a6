package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
)

type claimsKey struct{}

// ClaimsFrom returns the claims of the bearer token that authenticated the request of ctx. The
// Require middleware guarantees they are there.
func ClaimsFrom(ctx context.Context) Claims {
	c, _ := ctx.Value(claimsKey{}).(*Claims)
	if c == nil {
		return Claims{}
	}
	return *c
}

// Require wraps next so that it runs only for a request with a valid bearer token (RFC 6750 §2.1)
// carrying every scope of want. A missing, malformed, unknown, expired or revoked token is a 401
// invalid_token; a valid token without the scope is a 403 insufficient_scope (RFC 6750 §3.1).
func (s *Service) Require(want Scopes, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kassa"`)
			httpapi.WriteError(w, r, fault.New(http.StatusUnauthorized, "invalid_token", "A bearer token is required in the Authorization header."))
			return
		}
		c, err := s.Verify(tok)
		if err != nil {
			msg := "The access token is invalid."
			switch {
			case errors.Is(err, ErrExpiredToken):
				msg = "The access token has expired."
			case errors.Is(err, ErrRevokedToken):
				msg = "The access token has been revoked."
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="kassa", error="invalid_token", error_description="`+msg+`"`)
			httpapi.WriteError(w, r, fault.New(http.StatusUnauthorized, "invalid_token", "%s", msg))
			return
		}
		if !c.Scopes.Has(want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kassa", error="insufficient_scope", scope="`+want.String()+`"`)
			httpapi.WriteError(w, r, fault.New(http.StatusForbidden, "insufficient_scope", "The access token lacks the scope %q.", want.String()))
			return
		}
		ctx := httpapi.WithPrincipal(context.WithValue(r.Context(), claimsKey{}, &c), c.Principal())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bearerToken takes the token from "Authorization: Bearer <token>"; the scheme is case-insensitive.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

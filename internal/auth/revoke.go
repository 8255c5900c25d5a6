package auth

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// RevokeTokenHandler serves DELETE /oauth/revoke_token (wire-contract.md, Token service): the bearer
// token of the request is revoked, and with it, when it descends from a grant (a partner's approval
// or a password sign-in), the whole grant: its refresh token and its other access tokens.
func (s *Service) RevokeTokenHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearerToken(r.Header.Get("Authorization"))
		var c Claims
		var err error
		if ok {
			c, err = s.Verify(tok)
		}
		if !ok || err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kassa", error="invalid_token"`)
			httpapi.WriteError(w, r, fault.New(http.StatusUnauthorized, "invalid_token", "A valid bearer token is required."))
			return
		}
		if err := s.revokeAccessToken(r.Context(), c); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"revoked": true})
	})
}

// RevokeHandler serves POST /oauth/revoke, token revocation as RFC 7009 §2: the client authenticates
// as at the token endpoint and names an access or refresh token of its own. "Invalid tokens do not
// cause an error response" (§2.2): an unknown or expired token is answered 200 too.
func (s *Service) RevokeHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.revoke(r); err != nil {
			writeOAuthError(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	})
}

func (s *Service) revoke(r *http.Request) error {
	ctx := r.Context()
	p, _, err := readParams(r)
	if err != nil {
		return err
	}
	c, err := s.authenticateClient(ctx, r, p)
	if err != nil {
		return err
	}
	tok := p.Get("token")
	if tok == "" {
		return invalidRequest("The token parameter is required.")
	}
	notYours := &oauthError{status: http.StatusBadRequest, Code: "unauthorized_client", Description: "The token was not issued to this client."}
	if strings.HasPrefix(tok, tokenPrefix) {
		claims, err := s.sealer.open(tok)
		switch {
		case err != nil:
			return nil
		case claims.ClientID != c.id:
			return notYours
		}
		return s.revokeAccessToken(ctx, claims)
	}
	// RFC 7009 §2.1: revoking a refresh token "SHOULD also invalidate all access tokens based on the
	// same authorization grant".
	var g grant
	err = s.db.Read(ctx, func(q store.Querier) error {
		var err error
		g, err = scanGrant(q.QueryRowContext(ctx, `SELECT `+grantColumns+` FROM refresh_tokens r JOIN oauth_grants g ON g.id = r.grant_id
			WHERE r.token_hash = $1`, hashOf(tok)))
		return err
	})
	switch {
	case isNoRows(err):
		return nil
	case err != nil:
		return err
	case g.clientID != c.idString():
		return notYours
	}
	return s.revokeGrants(ctx, []string{g.id}, c.validity)
}

// revokeAccessToken revokes one access token, and the grant it descends from if any.
func (s *Service) revokeAccessToken(ctx context.Context, c Claims) error {
	now := s.now()
	id := hex.EncodeToString(c.TokenID[:])
	grantID := ""
	if c.GrantID != ([16]byte{}) {
		grantID = hex.EncodeToString(c.GrantID[:])
	}
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		if err := recordRevocation(ctx, tx, kindToken, id, now, c.ExpiresAt); err != nil {
			return err
		}
		if grantID == "" {
			return nil
		}
		return revokeGrant(ctx, tx, grantID, c.ExpiresAt.Sub(c.IssuedAt), now)
	})
	if err != nil {
		return err
	}
	s.revoked.add(kindToken, c.TokenID)
	if grantID != "" {
		s.applyGrantRevocation(grantID)
	}
	return nil
}

// revokeGrants revokes grants whose access tokens live at most validity.
func (s *Service) revokeGrants(ctx context.Context, ids []string, validity time.Duration) error {
	now := s.now()
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		for _, id := range ids {
			if err := revokeGrant(ctx, tx, id, validity, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		s.applyGrantRevocation(id)
	}
	return nil
}

// ErrUnknownMerchant is returned by RevokePartner for a merchant id that does not exist.
var ErrUnknownMerchant = errors.New("auth: unknown merchant")

// RevokePartner ends a partner's access to one merchant: every grant the merchant gave the partner
// is revoked, so its refresh tokens stop at once and its access tokens on every node within one
// revocation poll. It returns how many grants were live.
func RevokePartner(ctx context.Context, db *store.DB, merchantID, partnerID string, now time.Time) (int, error) {
	n := 0
	err := db.Write(ctx, func(tx *store.Tx) error {
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM merchants WHERE id = $1`, merchantID).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			return ErrUnknownMerchant
		}
		if _, err := GetPartner(ctx, tx, partnerID); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT g.id, c.token_validity_seconds FROM oauth_grants g JOIN oauth_clients c ON c.client_id = g.client_id
			WHERE g.merchant_id = $1 AND g.partner_id = $2 AND g.revoked_at IS NULL`, merchantID, partnerID)
		if err != nil {
			return err
		}
		type live struct {
			id       string
			validity int64
		}
		var grants []live
		for rows.Next() {
			var l live
			if err := rows.Scan(&l.id, &l.validity); err != nil {
				rows.Close()
				return err
			}
			grants = append(grants, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, g := range grants {
			if err := revokeGrant(ctx, tx, g.id, time.Duration(g.validity)*time.Second, now); err != nil {
				return err
			}
		}
		n = len(grants)
		return nil
	})
	return n, err
}

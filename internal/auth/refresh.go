package auth

import (
	"context"
	"database/sql"
	"net/http"
	"net/url"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// refreshRace is how recently a refresh token may have been spent for a second use of it to count as
// the loser of a race between two concurrent refreshes (a client retrying, two workers of one
// partner) rather than as a replay: the loser is refused, and the grant stands.
const refreshRace = 2 * time.Second

// refreshToken is the refresh grant (RFC 6749 §6): a refresh token works once; the response carries
// a new one, with the grant's merchant and scopes (gateway-api.md, "Authentication" rule 4).
//
// RFC 6819 §5.2.2.3: "If the authorization server detects [that] an old refresh token [was used],
// [it] cannot determine which party is legitimate" — so a spent token used again revokes the whole
// grant: the new refresh token and every access token issued from the grant.
func (s *Service) refreshToken(ctx context.Context, r *http.Request, p url.Values) (*tokenResponse, error) {
	c, err := s.authenticateClient(ctx, r, p)
	if err != nil {
		return nil, err
	}
	rt := p.Get("refresh_token")
	if rt == "" {
		return nil, invalidRequest("The refresh_token parameter is required.")
	}
	now := s.now()
	return s.redeem(ctx, func(tx *store.Tx, out *redemption) error {
		var expires int64
		var used sql.NullInt64
		g, err := scanGrant(tx.QueryRowContext(ctx, `SELECT `+grantColumns+`, r.expires_at, r.used_at FROM refresh_tokens r
			JOIN oauth_grants g ON g.id = r.grant_id WHERE r.token_hash = $1`, hashOf(rt)), &expires, &used)
		switch {
		case isNoRows(err) || (err == nil && (g.clientID != c.idString() || g.revoked)):
			out.fail = invalidGrant("The refresh token is invalid.")
			return nil
		case err != nil:
			return err
		case used.Valid && now.Sub(time.UnixMilli(used.Int64)) < refreshRace:
			out.fail = invalidGrant("The refresh token was just used by another request.")
			return nil
		case used.Valid:
			out.revoked, out.fail = g.id, invalidGrant("The refresh token was already used; every token of this authorization is revoked.")
			return revokeGrant(ctx, tx, g.id, c.validity, now)
		case now.UnixMilli() >= expires:
			out.fail = invalidGrant("The refresh token has expired.")
			return nil
		}
		if sc := p.Get("scope"); sc != "" {
			// RFC 6749 §6: a narrower scope may be asked, never one "not originally granted".
			asked, err := ParseScopes(sc)
			if err != nil || asked == 0 || !g.scopes.Has(asked) {
				out.fail = &oauthError{status: http.StatusBadRequest, Code: "invalid_scope", Description: "The requested scope exceeds the one granted."}
				return nil
			}
			g.scopes = asked
		}
		n, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL`, hashOf(rt), now.UnixMilli())
		if err != nil {
			return err
		}
		if k, _ := n.RowsAffected(); k != 1 {
			out.fail = invalidGrant("The refresh token was just used by another request.")
			return nil
		}
		out.resp, err = s.issueForGrant(ctx, tx, g, c, now)
		return err
	})
}

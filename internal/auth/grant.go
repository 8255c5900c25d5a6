package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// ErrNotPartnerClient is returned when a grant is asked for a client that is not a partner's.
var ErrNotPartnerClient = errors.New("auth: not a partner's client")

// DefaultRefreshValidity is how long an unused refresh token stays valid. Each refresh issues a new
// one with a fresh validity, so a partner that refreshes at least this often keeps its access.
const DefaultRefreshValidity = 90 * 24 * time.Hour

// grant is a stored authorization grant: the root of the tokens issued from one approval (or one
// password sign-in).
type grant struct {
	id         string
	clientID   string
	merchantID string
	partnerID  string
	scopes     Scopes
	revoked    bool
}

// Approve records that the merchant approved a partner's client for scopes — the consent page's
// "approve" — and returns the new grant's id. Every token issued from it carries the grant, so that
// revoking the grant ends them all.
func Approve(ctx context.Context, tx store.Querier, clientID, merchantID string, scopes Scopes, now time.Time) (string, error) {
	c, err := lookupClient(ctx, tx, clientID)
	if err != nil {
		return "", err
	}
	if c.partnerID == "" {
		return "", ErrNotPartnerClient
	}
	return insertGrant(ctx, tx, clientID, merchantID, c.partnerID, scopes, now)
}

func insertGrant(ctx context.Context, tx store.Querier, clientID, merchantID, partnerID string, scopes Scopes, now time.Time) (string, error) {
	id := newHex16()
	_, err := tx.ExecContext(ctx, `INSERT INTO oauth_grants (id, client_id, merchant_id, partner_id, scopes, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, id, clientID, merchantID, nullable(partnerID), scopes.String(), now.UnixMilli())
	if err != nil {
		return "", fmt.Errorf("auth: store grant: %w", err)
	}
	return id, nil
}

const grantColumns = `g.id, g.client_id, g.merchant_id, COALESCE(g.partner_id, ''), g.scopes, g.revoked_at IS NOT NULL`

func scanGrant(row interface{ Scan(...any) error }, extra ...any) (grant, error) {
	var g grant
	var scopes string
	err := row.Scan(append([]any{&g.id, &g.clientID, &g.merchantID, &g.partnerID, &scopes, &g.revoked}, extra...)...)
	if err != nil {
		return g, err
	}
	g.scopes, err = ParseScopes(scopes)
	return g, err
}

// revokeGrant revokes a grant in tx: its refresh tokens stop working at once, and its access tokens
// on every node within one revocation poll (at once on this one, by the caller's s.revoked.add).
// validity is the longest an access token of the grant's client lives.
func revokeGrant(ctx context.Context, tx store.Querier, grantID string, validity time.Duration, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1`,
		grantID, now.UnixMilli()); err != nil {
		return err
	}
	return recordRevocation(ctx, tx, kindGrant, grantID, now, now.Add(validity))
}

// applyGrantRevocation applies a committed grant revocation to this node's snapshot at once.
func (s *Service) applyGrantRevocation(grantID string) {
	var id [16]byte
	if _, err := hex.Decode(id[:], []byte(grantID)); err == nil {
		s.revoked.add(kindGrant, id)
	}
}

// redemption is the outcome of redeeming a code or a refresh token: tokens, or a refusal, and the
// grant the attempt revoked (a reuse).
type redemption struct {
	resp    *tokenResponse
	fail    *oauthError
	revoked string
}

// redeem runs fn in a write transaction and answers with its outcome. A refusal commits too, so that
// the revocation of a grant it records stands; the revocation then applies on this node at once.
func (s *Service) redeem(ctx context.Context, fn func(tx *store.Tx, out *redemption) error) (*tokenResponse, error) {
	var out redemption
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		out = redemption{}
		return fn(tx, &out)
	})
	if err != nil {
		return nil, err
	}
	if out.revoked != "" {
		s.applyGrantRevocation(out.revoked)
	}
	if out.fail != nil {
		return nil, out.fail
	}
	return out.resp, nil
}

// issueForGrant issues an access token for grant g to client c and a new refresh token, storing the
// refresh token's hash in tx.
func (s *Service) issueForGrant(ctx context.Context, tx store.Querier, g grant, c client, now time.Time) (*tokenResponse, error) {
	refresh := "krt_" + base64.RawURLEncoding.EncodeToString(random32())
	sum := sha256.Sum256([]byte(refresh))
	if _, err := tx.ExecContext(ctx, `INSERT INTO refresh_tokens (token_hash, grant_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		sum[:], g.id, now.UnixMilli(), now.Add(DefaultRefreshValidity).UnixMilli()); err != nil {
		return nil, fmt.Errorf("auth: store refresh token: %w", err)
	}
	var grantID [16]byte
	if _, err := hex.Decode(grantID[:], []byte(g.id)); err != nil {
		return nil, fmt.Errorf("auth: grant id %q is not hex", g.id)
	}
	tok, claims := s.issueClaims(Claims{ClientID: c.id, GrantID: grantID, MerchantID: g.merchantID, Scopes: g.scopes}, c.validity)
	return &tokenResponse{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int64(claims.ExpiresAt.Sub(claims.IssuedAt).Seconds()),
		Scope: g.scopes.String(), MerchantID: g.merchantID, RefreshToken: refresh}, nil
}

func random32() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

// hashOf is the SHA-256 of a code or refresh token, as stored.
func hashOf(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

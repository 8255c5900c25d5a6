package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// ErrNotPartnerClient is returned when a grant is asked for a client that is not a partner's.
var ErrNotPartnerClient = errors.New("auth: not a partner's client")

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
	id := newHex16()
	_, err = tx.ExecContext(ctx, `INSERT INTO oauth_grants (id, client_id, merchant_id, partner_id, scopes, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, id, clientID, merchantID, c.partnerID, scopes.String(), now.UnixMilli())
	if err != nil {
		return "", fmt.Errorf("auth: store grant: %w", err)
	}
	return id, nil
}

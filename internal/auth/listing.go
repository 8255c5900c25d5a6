package auth

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// LastUsedGranularity is how precisely a client's last use is kept: a pair that gets many tokens a
// minute is written once a minute, not once a token.
const LastUsedGranularity = time.Minute

// ClientInfo is one of a merchant's client-credential pairs as the dashboard lists it: its client id,
// when it was created, its tokens' validity, when it was last used and its status. Never its secret.
type ClientInfo struct {
	ClientID  string
	CreatedAt time.Time
	Validity  time.Duration
	LastUsed  time.Time // zero: never used
	RevokedAt time.Time // zero: active
}

// Active reports whether the pair still gets tokens.
func (c ClientInfo) Active() bool { return c.RevokedAt.IsZero() }

// ListClients returns the merchant's own client-credential pairs, newest first, revoked ones included.
func ListClients(ctx context.Context, q store.Querier, merchantID string) ([]ClientInfo, error) {
	rows, err := q.QueryContext(ctx, `SELECT client_id, created_at, token_validity_seconds, last_used_at, revoked_at
		FROM oauth_clients WHERE merchant_id = $1 ORDER BY created_at DESC, client_id`, merchantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ClientInfo
	for rows.Next() {
		var c ClientInfo
		var created, validity int64
		var used, revoked sql.NullInt64
		if err := rows.Scan(&c.ClientID, &created, &validity, &used, &revoked); err != nil {
			return nil, err
		}
		c.CreatedAt, c.Validity = time.UnixMilli(created).UTC(), time.Duration(validity)*time.Second
		c.LastUsed, c.RevokedAt = timeOrZero(used), timeOrZero(revoked)
		out = append(out, c)
	}
	return out, rows.Err()
}

// ConnectedPartner is a partner that a merchant has approved, as the dashboard lists it: the partner,
// the scopes the merchant approved and when.
type ConnectedPartner struct {
	Partner    Partner
	Scopes     Scopes    // the union of the approvals in force (PartnerScopes)
	ApprovedAt time.Time // the earliest approval in force
}

// ConnectedPartners returns the partners whose access the merchant approved and has not revoked, by
// name. A partner whose client the operator revoked is not listed: it has no access left.
func ConnectedPartners(ctx context.Context, q store.Querier, merchantID string) ([]ConnectedPartner, error) {
	rows, err := q.QueryContext(ctx, `SELECT p.id, p.name, p.image_url, p.created_at, g.scopes, g.created_at
		FROM oauth_grants g JOIN oauth_clients c ON c.client_id = g.client_id JOIN partners p ON p.id = g.partner_id
		WHERE g.merchant_id = $1 AND g.revoked_at IS NULL AND c.revoked_at IS NULL
		ORDER BY p.name, p.id, g.created_at`, merchantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ConnectedPartner
	for rows.Next() {
		var p Partner
		var pCreated, approved int64
		var scopes string
		if err := rows.Scan(&p.ID, &p.Name, &p.ImageURL, &pCreated, &scopes, &approved); err != nil {
			return nil, err
		}
		s, err := ParseScopes(scopes)
		if err != nil {
			return nil, fmt.Errorf("auth: scopes of a grant: %w", err)
		}
		if n := len(out); n > 0 && out[n-1].Partner.ID == p.ID {
			out[n-1].Scopes |= s // rows come in approval order: the first was the earliest
			continue
		}
		p.CreatedAt = time.UnixMilli(pCreated).UTC()
		out = append(out, ConnectedPartner{Partner: p, Scopes: s, ApprovedAt: time.UnixMilli(approved).UTC()})
	}
	return out, rows.Err()
}

func timeOrZero(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// lastUse remembers when each client's last use was written, so that a client is written at most once
// per LastUsedGranularity by this node.
type lastUse struct {
	mu      sync.Mutex
	written map[[16]byte]time.Time
}

// noteUse records that client c got a token now, unless this node wrote its use less than
// LastUsedGranularity ago. A failure to write is logged: the token is not refused for it.
func (s *Service) noteUse(ctx context.Context, c client) {
	now := s.now()
	s.used.mu.Lock()
	if last, ok := s.used.written[c.id]; ok && now.Sub(last) < LastUsedGranularity {
		s.used.mu.Unlock()
		return
	}
	if s.used.written == nil {
		s.used.written = map[[16]byte]time.Time{}
	}
	s.used.written[c.id] = now
	s.used.mu.Unlock()
	// Written even when the client has gone: its token was issued.
	ctx = context.WithoutCancel(ctx)
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE oauth_clients SET last_used_at = $1 WHERE client_id = $2`, now.UnixMilli(), c.idString())
		return err
	})
	if err != nil {
		s.log.WarnContext(ctx, "record a client's last use", "client_id", c.idString(), "err", err)
	}
}

// ListPartners returns every partner, oldest first: the operator's list (kassa partner list).
func ListPartners(ctx context.Context, q store.Querier) ([]Partner, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, name, image_url, callback_uris, created_at FROM partners ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Partner
	for rows.Next() {
		var p Partner
		var uris string
		var created int64
		if err := rows.Scan(&p.ID, &p.Name, &p.ImageURL, &uris, &created); err != nil {
			return nil, err
		}
		p.CallbackURIs, p.CreatedAt = strings.Split(uris, "\n"), time.UnixMilli(created).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

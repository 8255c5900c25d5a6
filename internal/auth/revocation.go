package auth

import (
	"context"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// Kinds of revocation.
const (
	kindClient = "client" // every token of a client
	kindToken  = "token"  // one access token
	kindGrant  = "grant"  // every token descending from one authorization grant
)

// revoked is an immutable snapshot of what is revoked. Bearer checks read it without locks.
type revoked struct {
	clients map[[16]byte]struct{}
	tokens  map[[16]byte]struct{}
	grants  map[[16]byte]struct{}
}

func (r *revoked) has(c *Claims) bool {
	if _, ok := r.clients[c.ClientID]; ok {
		return true
	}
	if _, ok := r.tokens[c.TokenID]; ok {
		return true
	}
	_, ok := r.grants[c.GrantID]
	return ok && c.GrantID != [16]byte{}
}

// revocations keeps the current snapshot.
type revocations struct{ cur atomic.Pointer[revoked] }

// load replaces the snapshot with every unexpired revocation in the database.
func (rs *revocations) load(ctx context.Context, q store.Querier, now time.Time) error {
	rows, err := q.QueryContext(ctx, `SELECT kind, subject FROM revocations WHERE expires_at > $1`, now.UnixMilli())
	if err != nil {
		return err
	}
	defer rows.Close()
	next := &revoked{clients: map[[16]byte]struct{}{}, tokens: map[[16]byte]struct{}{}, grants: map[[16]byte]struct{}{}}
	for rows.Next() {
		var kind, subject string
		if err := rows.Scan(&kind, &subject); err != nil {
			return err
		}
		var id [16]byte
		if n, err := hex.Decode(id[:], []byte(subject)); err != nil || n != 16 {
			continue // not a subject this version knows how to check
		}
		next.set(kind)[id] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rs.cur.Store(next)
	return nil
}

// add records one revocation in this node's snapshot at once, ahead of the next load.
func (rs *revocations) add(kind string, id [16]byte) {
	for {
		old := rs.cur.Load()
		next := &revoked{clients: clone(old.clients), tokens: clone(old.tokens), grants: clone(old.grants)}
		next.set(kind)[id] = struct{}{}
		if rs.cur.CompareAndSwap(old, next) {
			return
		}
	}
}

func (r *revoked) set(kind string) map[[16]byte]struct{} {
	switch kind {
	case kindClient:
		return r.clients
	case kindToken:
		return r.tokens
	default:
		return r.grants
	}
}

func clone(m map[[16]byte]struct{}) map[[16]byte]struct{} {
	out := make(map[[16]byte]struct{}, len(m)+1)
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}

// recordRevocation stores a revocation in the caller's transaction and drops revocations that have
// nothing left to stop.
func recordRevocation(ctx context.Context, tx store.Querier, kind, subject string, now, expires time.Time) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM revocations WHERE expires_at <= $1`, now.UnixMilli()); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO revocations (kind, subject, revoked_at, expires_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (kind, subject) DO UPDATE SET expires_at = excluded.expires_at`,
		kind, subject, now.UnixMilli(), expires.UnixMilli())
	return err
}

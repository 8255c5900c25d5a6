package auth

import (
	"context"
	"encoding/hex"
	"sync"
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

// revocations keeps the current snapshot. A revocation made on this node is applied at once (add),
// and kept aside until a reload that began after it was committed has read it back from the
// database, so that a reload racing with it cannot drop it from the snapshot.
type revocations struct {
	cur   atomic.Pointer[revoked]
	mu    sync.Mutex // serializes add and the end of load
	gen   uint64
	local []localRevocation
}

// localRevocation is a revocation added on this node, numbered in the order of adds.
type localRevocation struct {
	kind string
	id   [16]byte
	gen  uint64
}

// load replaces the snapshot with every unexpired revocation in the database, and the ones this node
// added that the read may not have seen.
func (rs *revocations) load(ctx context.Context, q store.Querier, now time.Time) error {
	rs.mu.Lock()
	started := rs.gen
	rs.mu.Unlock()
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
	rs.mu.Lock()
	defer rs.mu.Unlock()
	// An add numbered after the read began may have committed after it: keep it for the next load.
	keep := rs.local[:0]
	for _, l := range rs.local {
		next.set(l.kind)[l.id] = struct{}{}
		if l.gen > started {
			keep = append(keep, l)
		}
	}
	rs.local = keep
	rs.cur.Store(next)
	return nil
}

// add records one revocation, already committed to the database, in this node's snapshot at once,
// ahead of the next load.
func (rs *revocations) add(kind string, id [16]byte) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.gen++
	rs.local = append(rs.local, localRevocation{kind: kind, id: id, gen: rs.gen})
	old := rs.cur.Load()
	next := &revoked{clients: clone(old.clients), tokens: clone(old.tokens), grants: clone(old.grants)}
	next.set(kind)[id] = struct{}{}
	rs.cur.Store(next)
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

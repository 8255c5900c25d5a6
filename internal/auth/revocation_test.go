package auth

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// hookQuerier runs after once its query has read its rows, before load uses them.
type hookQuerier struct {
	store.Querier
	after func()
}

func (h hookQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := h.Querier.QueryContext(ctx, q, args...)
	h.after()
	return rows, err
}

// A revocation added on this node while a reload is reading the database survives that reload, and
// stays until a reload that began after it has read it back.
func TestReloadDoesNotDropALocalRevocation(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	var rs revocations
	if err := rs.load(context.Background(), db.Reader(), time.Now()); err != nil {
		t.Fatal(err)
	}
	id := newTokenID()
	c := &Claims{TokenID: id}
	err := rs.load(context.Background(), hookQuerier{db.Reader(), func() { rs.add(kindToken, id) }}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !rs.cur.Load().has(c) {
		t.Fatal("a reload that raced with a local revocation dropped it")
	}
	if len(rs.local) != 1 {
		t.Fatalf("%d local revocations kept, want 1 (the reload may not have seen it)", len(rs.local))
	}
	if err := rs.load(context.Background(), db.Reader(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !rs.cur.Load().has(c) || len(rs.local) != 0 {
		t.Fatalf("after a later reload: revoked %v, %d kept aside", rs.cur.Load().has(c), len(rs.local))
	}
}

package store_test

import (
	"context"
	"testing"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A database restored into another cluster finds transaction ids there lower than the places it
// stores (here, the rollup's, as a restored dump's would be): Migrate raises the base once, so that
// the next places, and the horizon of what has committed, are above every place stored; in the same
// cluster it leaves the base as it is, however high a place stored.
func TestPlacesRiseInANewCluster(t *testing.T) {
	db := storetest.Postgres(t)
	ctx := context.Background()
	place := func() (xid, xmin int64) {
		t.Helper()
		if err := db.Reader().QueryRowContext(ctx, `SELECT `+store.XidSQL+`, `+store.XminSQL).Scan(&xid, &xmin); err != nil {
			t.Fatal(err)
		}
		return xid, xmin
	}
	base := func() int64 {
		t.Helper()
		var b int64
		if err := db.Reader().QueryRowContext(ctx, `SELECT base FROM xid_base`).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	now, _ := place()
	stored := now + 1_000_000
	if _, err := db.Exec(ctx, `UPDATE overview_rollup SET seen_xmax = $1`, stored); err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if b := base(); b != 0 {
		t.Fatalf("the base moved to %d in the cluster it was set for", b)
	}
	if _, err := db.Exec(ctx, `UPDATE xid_base SET cluster = 'the cluster the dump was taken in'`); err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	xid, xmin := place()
	if xid <= stored || xmin <= stored {
		t.Errorf("after the move, the next place is %d and the horizon %d, not above the stored %d", xid, xmin, stored)
	}
	b := base()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if again := base(); again != b {
		t.Errorf("a second start moved the base from %d to %d", b, again)
	}
}

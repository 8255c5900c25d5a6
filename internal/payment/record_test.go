package payment_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// An outcome takes its place in the merchant's commit order (event_seq) and records when it was
// recorded (finished_at), in the row itself. Operations one after
// another take places in that order, another merchant's included, whose places are its own concern.
func TestOutcomeTakesItsPlaceInCommitOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		other := f.srv.NewMerchant(t)
		var ids []string
		for i := range 3 {
			f.clock.Advance(time.Second)
			r := f.m.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa))
			if r.Status != 200 {
				t.Fatalf("sale %d: %d %v", i, r.Status, r.Body)
			}
			ids = append(ids, r.Num("id"))
			other.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa))
		}
		f.clock.Advance(time.Second)
		r := f.m.Do(t, "POST", "/transaction-service/refund/"+ids[0], map[string]any{"amount": "1.00"})
		if r.Status != 200 {
			t.Fatalf("refund: %d %v", r.Status, r.Body)
		}
		ids = append(ids, r.Num("id"))
		rows, err := db.Reader().QueryContext(context.Background(), `SELECT CAST(id AS TEXT), event_seq, finished_at FROM transactions
			WHERE merchant_id = $1 ORDER BY event_seq`, f.m.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		var last, lastAt int64
		for rows.Next() {
			var id string
			var seq, at *int64
			if err := rows.Scan(&id, &seq, &at); err != nil {
				t.Fatal(err)
			}
			if seq == nil || at == nil {
				t.Fatalf("transaction %s has no place (%v) or time (%v)", id, seq, at)
			}
			if *seq <= last || *at <= lastAt {
				t.Errorf("transaction %s: place %d at %d after %d at %d", id, *seq, *at, last, lastAt)
			}
			got, last, lastAt = append(got, id), *seq, *at
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != strings.Join(ids, " ") {
			t.Errorf("commit order %v, want %v", got, ids)
		}
	})
}

// On SQLite, the next place is read at the end of the merchant's part of transactions_merchant_seq,
// not by scanning the ledger.
func TestOutcomePlaceReadsItsIndex(t *testing.T) {
	db := storetest.SQLite(t)
	args := []any{int64(1), "APPROVED", "Approved", nil, nil, int64(0), "m"}
	if p := storetest.Plan(t, db, payment.OutcomeSQL[store.SQLite], args...); !strings.Contains(p, "transactions_merchant_seq") ||
		storetest.FullScan(p, "transactions") {
		t.Errorf("the outcome's place is not read from transactions_merchant_seq:\n%s", p)
	}
}

package audit_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// TestActorsAndList: a record written under a staff user's context names the user and the address;
// the activity list filters by user and by operation, newest first, a page at a time, and never shows
// another merchant's records.
func TestActorsAndList(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
		alice := audit.WithActor(ctx, audit.Actor{UserID: "u-alice", Address: "192.0.2.7"})
		bob := audit.WithActor(ctx, audit.Actor{UserID: "u-bob", Address: "2001:db8::1"})
		write := func(ctx context.Context, r audit.Record) {
			t.Helper()
			r.At, at = at, at.Add(time.Minute)
			if err := db.Write(ctx, func(tx *store.Tx) error { return audit.Write(ctx, tx, r) }); err != nil {
				t.Fatal(err)
			}
		}
		write(alice, audit.Record{MerchantID: "m1", Operation: "client.create", Resource: "client/c1", Outcome: audit.Done})
		write(ctx, audit.Record{MerchantID: "m1", ClientID: "api-client", Operation: "sale", TransactionID: "T1", Amount: 1999,
			Currency: "CAD", Outcome: "APPROVED"})
		write(alice, audit.Record{MerchantID: "m1", Operation: "refund", TransactionID: "T1", Amount: 500, Currency: "CAD", Outcome: "APPROVED"})
		write(bob, audit.Record{MerchantID: "m1", Operation: "refund", TransactionID: "T1", Amount: 100, Currency: "CAD", Outcome: "APPROVED"})
		write(alice, audit.Record{MerchantID: "m1", Operation: "refund", TransactionID: "T1", Amount: 200, Currency: "CAD", Outcome: "APPROVED"})
		write(alice, audit.Record{MerchantID: "m2", Operation: "refund", TransactionID: "T9", Amount: 1, Currency: "CAD", Outcome: "APPROVED"})
		// A record that names its user keeps it, whatever the context.
		write(bob, audit.Record{MerchantID: "m1", Operation: "user.invite", UserID: "u-carol", Outcome: audit.Done})

		list := func(f audit.Filter) []audit.Entry {
			t.Helper()
			var out []audit.Entry
			if err := db.Read(ctx, func(q store.Querier) error {
				var err error
				out, err = audit.List(ctx, q, "m1", f)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return out
		}
		ops := func(es []audit.Entry) (s []string) {
			for _, e := range es {
				s = append(s, e.UserID+":"+e.Operation)
			}
			return s
		}
		all := list(audit.Filter{})
		if got := ops(all); len(got) != 6 || got[0] != "u-carol:user.invite" || got[1] != "u-alice:refund" || got[4] != ":sale" ||
			got[5] != "u-alice:client.create" {
			t.Fatalf("all: %v", got)
		}
		if e := all[2]; e.Address != "2001:db8::1" || e.Amount != 100 || e.Currency != "CAD" || e.TransactionID != "T1" ||
			e.MerchantID != "m1" || e.At.IsZero() {
			t.Errorf("bob's refund: %+v", e)
		}
		if e := all[4]; e.ClientID != "api-client" || e.Address != "" {
			t.Errorf("the API's sale: %+v", e)
		}
		if got := ops(list(audit.Filter{UserID: "u-alice"})); len(got) != 3 {
			t.Errorf("alice's: %v", got)
		}
		if got := ops(list(audit.Filter{UserID: "u-alice", Operation: "refund"})); len(got) != 2 {
			t.Errorf("alice's refunds: %v", got)
		}
		if got := ops(list(audit.Filter{Operation: "refund"})); len(got) != 3 {
			t.Errorf("refunds: %v", got)
		}
		page := list(audit.Filter{Limit: 4})
		next := list(audit.Filter{Limit: 4, Before: page[len(page)-1].ID})
		if len(page) != 4 || len(next) != 2 || next[0].ID >= page[3].ID || ops(next)[1] != "u-alice:client.create" {
			t.Errorf("pages: %v then %v", ops(page), ops(next))
		}
	})
}

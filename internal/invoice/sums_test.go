package invoice

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The dashboard's totals of a list (Sums) are one aggregate in the database, per currency, over the
// list's own condition: they count and sum exactly what the list pages through, and read the merchant's
// invoices through its indexes (all of them, by status, by number), not the table, on both backends.
func TestSumsAreAnIndexedAggregate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var ours, theirs merchant.Merchant
		err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			if ours, err = merchant.Create(ctx, tx, merchant.New{Name: "Ours", Email: "ours@example.com"}, time.Now()); err != nil {
				return err
			}
			if theirs, err = merchant.Create(ctx, tx, merchant.New{Name: "Theirs", Email: "theirs@example.com"}, time.Now()); err != nil {
				return err
			}
			// Ours: 300 invoices, every third in USD, by status in turn; theirs: 5,000, all PAID.
			for _, m := range []struct {
				id     string
				n      int
				status string
			}{{ours.ID, 300, `CASE i % 5 WHEN 0 THEN 'DRAFT' WHEN 1 THEN 'SENT' WHEN 2 THEN 'PAID' WHEN 3 THEN 'OVERDUE' ELSE 'CANCELLED' END`},
				{theirs.ID, 5000, `'PAID'`}} {
				if _, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
					INSERT INTO invoices (lookup_id, merchant_id, invoice_number, status, pay_key_hash, currency, scale, items, subtotal_amount,
					tax_amount, total_amount, customer_email, created_at, updated_at)
					SELECT $1 || '-' || i, $1, 'N' || i, `+m.status+`, $1 || '-' || i, CASE WHEN i % 3 = 0 THEN 'USD' ELSE 'CAD' END, 2, '[]',
					i, 0, i, 'c' || (i % 7) || '@example.com', i, i FROM n`, m.id, m.n); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Raw().ExecContext(ctx, "ANALYZE"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			f     Filter
			index string
		}{
			{"all", Filter{}, "invoices_"},
			{"a status", Filter{Status: Sent}, "invoices_status"},
			{"an invoice number", Filter{InvoiceNumber: "N7"}, "invoices_number"},
			{"a customer e-mail, in any case", Filter{CustomerEmail: "C3@Example.com"}, "invoices_email"},
		} {
			tc.f.AmountMin, tc.f.AmountMax = -1, -1 // no bounds
			stmt, args := sumsQuery(ours.ID, tc.f)
			if p := storetest.Plan(t, db, stmt, args...); !strings.Contains(p, tc.index) || strings.Contains(p, "SCAN invoices") ||
				strings.Contains(p, "Seq Scan") {
				t.Errorf("the sums of %s are not read by %s:\n%s", tc.name, tc.index, p)
			}
			var sums []Sum
			var list []Invoice
			err := db.Read(ctx, func(q store.Querier) error {
				var err error
				if sums, err = Sums(ctx, q, ours.ID, tc.f); err != nil {
					return err
				}
				tc.f.Limit = 1000
				list, err = List(ctx, q, ours.ID, tc.f)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]Sum{}
			for _, inv := range list {
				s := want[inv.Currency.Code]
				s.Count++
				s.Total += inv.Totals.Total
				want[inv.Currency.Code] = s
			}
			if len(sums) != len(want) {
				t.Fatalf("the sums of %s: %+v, the list's %+v", tc.name, sums, want)
			}
			for _, s := range sums {
				if w := want[s.Currency.Code]; s.Count != w.Count || s.Total != w.Total || s.Currency.Digits != 2 {
					t.Errorf("the sums of %s in %s: %+v, the list's %+v", tc.name, s.Currency.Code, s, w)
				}
			}
		}
	})
}

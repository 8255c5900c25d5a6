package synth_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/history"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/synth"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// count runs a COUNT(*) query.
func count(t *testing.T, db *store.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// The loader writes exactly the rows asked for, of one merchant, in the mix the benchmark needs, and
// every money invariant of the ledger holds on them: follow-ups after parents that exist, refunds
// within what their sale or capture allows, one capture or void per authorization, times increasing
// with ids. The ledger reads every loaded row, and its own rules work on them afterwards: a fully
// refunded sale refuses another refund, a partly refunded one takes what remains, an open
// authorization is captured, and the new rows' ids follow the loaded ones.
func TestLoadKeepsTheLedgersInvariants(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		srv := servertest.Start(t, db, server.Config{})
		m, other := srv.NewMerchant(t), srv.NewMerchant(t)
		toronto, _ := time.LoadLocation("America/Toronto")
		const rows, people = 4000, 300
		sum, err := synth.Load(ctx, db, synth.Options{MerchantID: m.ID, ClientID: m.Creds.ClientID, Transactions: rows,
			Customers: people, Location: toronto, Seed: 17})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Transactions != rows || sum.Customers != people {
			t.Fatalf("summary %d transactions, %d customers", sum.Transactions, sum.Customers)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1`, m.ID); n != rows {
			t.Errorf("%d transactions of the merchant, want %d", n, rows)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id <> $1`, m.ID); n != 0 {
			t.Errorf("%d transactions of another merchant", n)
		}
		// Each row is the record of its operation, as an API's finish leaves it: a place in the
		// merchant's commit order rising with the ids, the time it was recorded, no audit record.
		if n := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE merchant_id = $1 AND transaction_id IS NOT NULL`, m.ID); n != 0 {
			t.Errorf("%d audit records beside the ledger's rows, want none", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions a JOIN transactions b ON b.id = a.id + 1
			WHERE a.merchant_id = $1 AND (a.event_seq IS NULL OR b.event_seq <= a.event_seq OR a.finished_at < a.created_at)`, m.ID); n != 0 {
			t.Errorf("%d rows without a place and time, or not in place order", n)
		}
		var newest string
		if err := db.Reader().QueryRowContext(ctx, `SELECT transaction_id FROM transactions WHERE merchant_id = $1 ORDER BY id DESC LIMIT 1`, m.ID).Scan(&newest); err != nil {
			t.Fatal(err)
		}
		page, err := history.List(ctx, db.Reader(), m.ID, history.Filter{Limit: 50})
		if err != nil || len(page.Entries) != 50 || page.Entries[0].Seq == 0 || page.Entries[0].TransactionID != newest {
			t.Fatalf("the activity history's newest page: %d entries (the first %+v, want %s), %v", len(page.Entries), page.Entries[0], newest, err)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM customers WHERE merchant_id = $1`, m.ID); n != people {
			t.Errorf("%d customers, want %d", n, people)
		}
		perDay := 0
		for _, n := range sum.PerDay {
			perDay += n
		}
		if perDay != rows || len(sum.PerDay) < 85 || len(sum.PerDay) > 92 {
			t.Errorf("%d rows over %d days", perDay, len(sum.PerDay))
		}
		// The mix.
		share := func(n int) float64 { return float64(n) / rows }
		if s := share(sum.Kinds["SALE"]); s < 0.62 || s > 0.76 {
			t.Errorf("sales are %.2f of the rows", s)
		}
		if s := share(sum.Declined); s < 0.05 || s > 0.12 {
			t.Errorf("declines are %.2f of the rows", s)
		}
		for _, k := range []string{"AUTHORIZATION", "CAPTURE", "REFUND", "VOID"} {
			if sum.Kinds[k] == 0 {
				t.Errorf("no %s", k)
			}
		}
		if n := count(t, db, `SELECT COUNT(DISTINCT currency) FROM transactions`); n != 3 {
			t.Errorf("%d currencies", n)
		}
		if n := count(t, db, `SELECT COUNT(DISTINCT test_mode) FROM transactions`); n != 2 {
			t.Errorf("live and test: %d kinds", n)
		}
		if n := count(t, db, `SELECT COUNT(DISTINCT decline_code) FROM transactions WHERE status = 'DECLINED'`); n < 4 {
			t.Errorf("%d decline codes", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions t WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE c.email = t.email)`); n != 0 {
			t.Errorf("%d transactions by someone not in the pool of customers", n)
		}
		if len(sum.TransactionIDs) != 1000 || len(sum.Emails) != 1000 || len(sum.CardSuffixes) != 1000 || len(sum.CustomerLookups) != people {
			t.Errorf("samples: %d ids, %d e-mails, %d suffixes, %d customers", len(sum.TransactionIDs), len(sum.Emails),
				len(sum.CardSuffixes), len(sum.CustomerLookups))
		}
		// Follow-ups: their parent exists, is the merchant's, is older, and is named on the row.
		if n := count(t, db, `SELECT COUNT(*) FROM transactions c LEFT JOIN transactions p ON p.id = c.parent_id
			WHERE c.kind IN ('CAPTURE', 'REFUND', 'VOID') AND (p.id IS NULL OR p.merchant_id <> c.merchant_id
			OR p.transaction_id <> c.parent_transaction_id OR p.id >= c.id OR p.created_at > c.created_at OR p.status <> 'APPROVED'
			OR p.currency <> c.currency OR p.card_suffix <> c.card_suffix)`); n != 0 {
			t.Errorf("%d follow-ups without a proper parent", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE kind IN ('SALE', 'AUTHORIZATION') AND parent_id IS NOT NULL`); n != 0 {
			t.Errorf("%d payments with a parent", n)
		}
		// Refunds: of a sale or capture, summing to what it reserved, never more than its amount.
		if n := count(t, db, `SELECT COUNT(*) FROM transactions p WHERE p.kind IN ('SALE', 'CAPTURE') AND (p.reserved > p.amount
			OR p.reserved <> (SELECT COALESCE(SUM(r.amount), 0) FROM transactions r WHERE r.parent_id = p.id AND r.kind = 'REFUND'))`); n != 0 {
			t.Errorf("%d sales or captures whose refunds do not add up", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions r JOIN transactions p ON p.id = r.parent_id
			WHERE r.kind = 'REFUND' AND p.kind NOT IN ('SALE', 'CAPTURE')`); n != 0 {
			t.Errorf("%d refunds of something else than a sale or capture", n)
		}
		// Authorizations: closed once, by the capture or void that is there, a capture within the amount.
		if n := count(t, db, `SELECT COUNT(*) FROM transactions a WHERE a.kind = 'AUTHORIZATION' AND
			(SELECT COUNT(*) FROM transactions c WHERE c.parent_id = a.id) <> (CASE WHEN a.closed_by IS NULL THEN 0 ELSE 1 END)`); n != 0 {
			t.Errorf("%d authorizations whose follow-ups disagree with closed_by", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions c JOIN transactions a ON a.id = c.parent_id
			WHERE (c.kind = 'CAPTURE' AND (a.kind <> 'AUTHORIZATION' OR a.closed_by <> 'CAPTURE' OR c.amount > a.amount OR a.reserved <> c.amount))
			OR (c.kind = 'VOID' AND (a.kind <> 'AUTHORIZATION' OR a.closed_by <> 'VOID' OR c.amount <> a.amount))`); n != 0 {
			t.Errorf("%d captures or voids that do not match their authorization", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions a JOIN transactions b ON b.id = a.id + 1 WHERE b.created_at < a.created_at`); n != 0 {
			t.Errorf("%d rows older than the row before", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE created_at > $1 OR created_at < $2`,
			time.Now().UnixMilli(), time.Now().Add(-91*24*time.Hour).UnixMilli()); n != 0 {
			t.Errorf("%d rows outside the last 90 days", n)
		}

		// The ledger reads them all, and its rules hold on them.
		l := srv.Ledger()
		all, err := l.List(ctx, m.ID, payment.Filter{Limit: payment.MaxLimit})
		if err != nil || len(all.Transactions) != rows {
			t.Fatalf("the ledger lists %d rows: %v", len(all.Transactions), err)
		}
		if page, err := l.List(ctx, other.ID, payment.Filter{}); err != nil || len(page.Transactions) != 0 {
			t.Errorf("the other merchant has %d rows: %v", len(page.Transactions), err)
		}
		var full, partial, open *payment.Transaction
		for i := range all.Transactions {
			tr := &all.Transactions[i]
			switch {
			case tr.Kind == payment.KindSale && tr.Reserved == tr.Amount && full == nil:
				full = tr
			case tr.Kind == payment.KindSale && tr.Reserved > 0 && tr.Reserved < tr.Amount && partial == nil:
				partial = tr
			case tr.Kind == payment.KindAuthorization && tr.Status == payment.StatusApproved && tr.ClosedBy == "" && open == nil:
				open = tr
			}
		}
		if full == nil || partial == nil || open == nil {
			t.Fatalf("no fully refunded sale, partly refunded sale or open authorization: %v %v %v", full, partial, open)
		}
		who := payment.Actor{MerchantID: m.ID, ClientID: m.Creds.ClientID}
		_, err = l.Refund(ctx, payment.FollowUp{Actor: who, ParentID: full.ID, Amount: 1})
		if fe := (*fault.Error)(nil); !errors.As(err, &fe) || fe.Status != http.StatusConflict {
			t.Errorf("a refund of a fully refunded sale: %v, want a 409", err)
		}
		r, err := l.Refund(ctx, payment.FollowUp{Actor: who, ParentID: partial.ID, Amount: partial.Amount - partial.Reserved})
		if err != nil || r.Status != payment.StatusApproved || r.ID <= all.Transactions[0].ID {
			t.Errorf("the rest of a partly refunded sale: %+v, %v (the newest loaded row is %d)", r, err, all.Transactions[0].ID)
		}
		if c, err := l.Capture(ctx, payment.FollowUp{Actor: who, ParentID: open.ID, Amount: open.Amount}); err != nil || c.Status != payment.StatusApproved {
			t.Errorf("capture an open authorization: %+v, %v", c, err)
		}
		// The operations made after the load are recorded after it: their places are above the
		// loaded rows' (on PostgreSQL, the base of places was raised past them).
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND id > $2
			AND event_seq <= (SELECT MAX(event_seq) FROM transactions WHERE merchant_id = $1 AND id <= $2)`, m.ID, all.Transactions[0].ID); n != 0 {
			t.Errorf("%d operations after the load placed among the loaded rows", n)
		}
		loaded := count(t, db, `SELECT MAX(event_seq) FROM transactions WHERE merchant_id = $1 AND id <= $2`, m.ID, all.Transactions[0].ID)
		if page, err := history.List(ctx, db.Reader(), m.ID, history.Filter{Limit: 2}); err != nil || len(page.Entries) != 2 ||
			page.Entries[0].Seq < page.Entries[1].Seq || page.Entries[1].Seq <= int64(loaded) {
			t.Errorf("the history's newest entries after the load (the last loaded place %d): %+v, %v", loaded, page.Entries, err)
		}
	})
}

package payment_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/history"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// 50 concurrent refunds of 10.00 against a 100.00 sale: exactly 10 are approved, the rest are 409s,
// and the refunded total is exactly 100.00.
func TestConcurrentRefundsNeverExceedTheSale(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{Latency: 2 * time.Millisecond})
		sale := ok(t, post(t, f.m, "sale", card(cardtest.Visa, "amount", "100.00")), "SALE", "100.00")
		var approved, conflicts, other atomic.Int64
		servertest.Parallel(50, func(int) {
			r := post(t, f.m, "refund/"+sale.Num("id"), map[string]any{"amount": "10.00"})
			switch {
			case r.Status == 200 && r.Str("transaction_result") == "APPROVED":
				approved.Add(1)
			case r.Status == 409:
				conflicts.Add(1)
			default:
				other.Add(1)
				t.Errorf("refund: %d %s", r.Status, r.Raw)
			}
		})
		if approved.Load() != 10 || conflicts.Load() != 40 || other.Load() != 0 {
			t.Fatalf("approved %d, 409 %d, other %d; want 10, 40, 0", approved.Load(), conflicts.Load(), other.Load())
		}
		refunded := sumRefunds(t, f.m, sale.Num("id"))
		if refunded != 10000 {
			t.Fatalf("refunded %d minor units, want 10000", refunded)
		}
	})
}

// sumRefunds adds up the approved refunds of a transaction, from the list.
func sumRefunds(t *testing.T, m *servertest.Merchant, id string) int64 {
	t.Helper()
	r := m.Do(t, "GET", "/transaction-service/transaction?limit=10000", nil)
	var sum int64
	for _, e := range r.Body["entities"].([]any) {
		tx := e.(map[string]any)
		if tx["transaction_type"] == "REFUND" && tx["transaction_result"] == "APPROVED" && tx["original_id"].(interface{ String() string }).String() == id {
			whole, frac, _ := strings.Cut(tx["amount"].(interface{ String() string }).String(), ".")
			sum += atoi(whole)*100 + atoi(frac)
		}
	}
	return sum
}

func atoi(s string) int64 {
	var n int64
	for _, c := range s {
		n = n*10 + int64(c-'0')
	}
	return n
}

// Concurrent captures of one authorization: exactly one succeeds. Concurrent captures and voids:
// exactly one of either.
func TestConcurrentCapturesAndVoids(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{Latency: 2 * time.Millisecond})
		auth := ok(t, post(t, f.m, "authorize", card(cardtest.Visa, "amount", "100.00")), "AUTHORIZATION", "100.00")
		var won atomic.Int64
		servertest.Parallel(20, func(int) {
			r := post(t, f.m, "capture/"+auth.Num("id"), map[string]any{"amount": "50.00"})
			switch {
			case r.Status == 200 && r.Str("transaction_result") == "APPROVED":
				won.Add(1)
			case r.Status != 409:
				t.Errorf("capture: %d %s", r.Status, r.Raw)
			}
		})
		if won.Load() != 1 {
			t.Fatalf("%d captures succeeded, want 1", won.Load())
		}

		auth2 := ok(t, post(t, f.m, "authorize", card(cardtest.Visa, "amount", "100.00")), "AUTHORIZATION", "100.00")
		var captures, voids atomic.Int64
		servertest.Parallel(20, func(i int) {
			op := map[bool]string{true: "capture/", false: "void/"}[i%2 == 0]
			r := post(t, f.m, op+auth2.Num("id"), nil)
			if r.Status == 200 && r.Str("transaction_result") == "APPROVED" {
				if op == "void/" {
					voids.Add(1)
				} else {
					captures.Add(1)
				}
			} else if r.Status != 409 {
				t.Errorf("%s: %d %s", op, r.Status, r.Raw)
			}
		})
		if captures.Load()+voids.Load() != 1 {
			t.Fatalf("%d captures and %d voids succeeded, want one in all", captures.Load(), voids.Load())
		}
	})
}

func TestIdempotency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		body := card(cardtest.Visa, "amount", "15.00")
		first := post(t, f.m, "sale", body, "Idempotency-Key", "order-1001")
		calls := f.proc.calls.Load()
		again := post(t, f.m, "sale", body, "Idempotency-Key", "order-1001")
		if again.Status != first.Status || string(again.Raw) != string(first.Raw) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d %s (replayed %q); first: %d %s", again.Status, again.Raw, again.Header.Get("Idempotent-Replayed"), first.Status, first.Raw)
		}
		if first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatal("the first response is marked replayed")
		}
		if f.proc.calls.Load() != calls {
			t.Fatal("the retry reached the processor")
		}
		if got := ids(t, f.m.Do(t, "GET", "/transaction-service/transaction", nil)); len(got) != 1 {
			t.Fatalf("two sales for one key: %v", got)
		}

		// The same key with another body is a 422; nothing reaches the processor.
		r := post(t, f.m, "sale", card(cardtest.Visa, "amount", "16.00"), "Idempotency-Key", "order-1001")
		if r.Status != 422 || r.Str("error") != "idempotency_key_reused" || f.proc.calls.Load() != calls {
			t.Fatalf("reused key: %d %s", r.Status, r.Raw)
		}

		// Keys are per merchant: another merchant's identical key is a new request.
		other := f.srv.NewMerchant(t)
		if r := post(t, other, "sale", body, "Idempotency-Key", "order-1001"); r.Status != 200 || r.Str("transaction_id") == first.Str("transaction_id") ||
			r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("another merchant's key: %d %s", r.Status, r.Raw)
		}

		// Follow-ups: a retried refund refunds once.
		ref1 := post(t, f.m, "refund/"+first.Num("id"), map[string]any{"amount": "5.00"}, "Idempotency-Key", "refund-1")
		ref2 := post(t, f.m, "refund/"+first.Num("id"), map[string]any{"amount": "5.00"}, "Idempotency-Key", "refund-1")
		if ref1.Status != 200 || string(ref1.Raw) != string(ref2.Raw) || sumRefunds(t, f.m, first.Num("id")) != 500 {
			t.Fatalf("retried refund: %s / %s", ref1.Raw, ref2.Raw)
		}
		// A rejection replays too.
		c1 := post(t, f.m, "capture/"+first.Num("id"), nil, "Idempotency-Key", "cap-1")
		c2 := post(t, f.m, "capture/"+first.Num("id"), nil, "Idempotency-Key", "cap-1")
		if c1.Status != 409 || c2.Status != 409 || string(c1.Raw) != string(c2.Raw) || c2.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replayed rejection: %d %s / %d %s", c1.Status, c1.Raw, c2.Status, c2.Raw)
		}
		if r := post(t, f.m, "sale", body, "Idempotency-Key", strings.Repeat("k", 256)); r.Status != 400 || r.Str("field") != "Idempotency-Key" {
			t.Fatalf("overlong key: %d %s", r.Status, r.Raw)
		}
	})
}

// Idempotency records are the credential's own, in both layers. Two clients of one merchant
// sending the same Idempotency-Key and body get a sale each, and neither sees the other's: not from the
// replay layer, nor from the ledger's binding of the key when the replay records are gone (a crash
// between the ledger and the record), where each retry finds its own sale.
func TestIdempotencyKeysArePerCredential(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		second := *f.m // the same merchant, with a second client
		err := db.Write(context.Background(), func(tx *store.Tx) error {
			var err error
			second.Creds, err = auth.CreateClient(context.Background(), tx, f.m.ID, auth.DefaultValidity, f.clock.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		second.NewToken(t)
		body := card(cardtest.Visa, "amount", "15.00")
		first := post(t, f.m, "sale", body, "Idempotency-Key", "order-9")
		other := post(t, &second, "sale", body, "Idempotency-Key", "order-9")
		if first.Status != 200 || other.Status != 200 || other.Header.Get("Idempotent-Replayed") != "" ||
			other.Str("transaction_id") == first.Str("transaction_id") {
			t.Fatalf("the second client's request with the first's key: %d %s (replayed %q); first %s",
				other.Status, other.Raw, other.Header.Get("Idempotent-Replayed"), first.Raw)
		}
		if got := ids(t, f.m.Do(t, "GET", "/transaction-service/transaction", nil)); len(got) != 2 {
			t.Fatalf("sales: %v, want two", got)
		}
		calls := f.proc.calls.Load()
		err = db.Write(context.Background(), func(tx *store.Tx) error {
			_, err := tx.ExecContext(context.Background(), `DELETE FROM idempotency_keys`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			m    *servertest.Merchant
			want servertest.Response
		}{{&second, other}, {f.m, first}} {
			if r := post(t, c.m, "sale", body, "Idempotency-Key", "order-9"); r.Status != 200 || r.Str("transaction_id") != c.want.Str("transaction_id") {
				t.Errorf("a retry that only the ledger recognises: %d %s, want %s", r.Status, r.Raw, c.want.Str("transaction_id"))
			}
		}
		if f.proc.calls.Load() != calls {
			t.Fatal("a retry reached the processor")
		}
	})
}

// While the first request with a key runs, a second with the same key is a 409, and the processor is
// asked once.
func TestIdempotencyKeyInFlight(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{Latency: 300 * time.Millisecond})
		body := card(cardtest.Visa, "amount", "15.00")
		statuses := make([]int, 2)
		servertest.Parallel(2, func(i int) {
			if i == 1 {
				time.Sleep(100 * time.Millisecond)
			}
			statuses[i] = post(t, f.m, "sale", body, "Idempotency-Key", "slow-1").Status
		})
		if statuses[0] != 200 || statuses[1] != 409 {
			t.Fatalf("statuses %v, want [200 409]", statuses)
		}
		if f.proc.calls.Load() != 1 {
			t.Fatalf("processor asked %d times", f.proc.calls.Load())
		}
		if r := post(t, f.m, "sale", body, "Idempotency-Key", "slow-1"); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("after completion: %d", r.Status)
		}
	})
}

// Every money operation and every decline is recorded, with no card data in the record: an API's
// operation by its ledger row, which the history reads as its record, and a follow-up refused by its
// parent's state (no ledger row) by an audit record. The API's finishes write no audit record.
func TestAuditTrail(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		// One operation a second: the history is in order of time.
		post := func(t *testing.T, m *servertest.Merchant, path string, body any, headers ...string) servertest.Response {
			f.clock.Advance(time.Second)
			return post(t, m, path, body, headers...)
		}
		sale := post(t, f.m, "sale", card(cardtest.Visa, "amount", "30.00"))
		post(t, f.m, "sale", card(cardtest.InsufficientFunds, "amount", "12.00"))
		post(t, f.m, "refund/"+sale.Num("id"), map[string]any{"amount": "10.00"})
		post(t, f.m, "refund/"+sale.Num("id"), map[string]any{"amount": "25.00"}) // rejected: exceeds
		auth := post(t, f.m, "authorize", card(cardtest.Visa, "amount", "8.00"))
		post(t, f.m, "capture/"+auth.Num("id"), map[string]any{"amount": "8.00"})
		auth2 := post(t, f.m, "authorize", card(cardtest.Visa, "amount", "9.00"))
		post(t, f.m, "void/"+auth2.Num("id"), nil)

		var ops []string
		rows, err := db.Reader().QueryContext(context.Background(), `SELECT operation || ' ' || outcome FROM audit_log ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var op string
			if err := rows.Scan(&op); err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(ops, ", ") != "refund REJECTED" {
			t.Errorf("audit log: %v, want the rejected refund's record alone", ops)
		}

		var page history.Page
		if err := db.Read(context.Background(), func(q store.Querier) error {
			var err error
			page, err = history.List(context.Background(), q, f.m.ID, history.Filter{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range slices.Backward(page.Entries) {
			if e.MerchantID != f.m.ID || e.ClientID != f.m.Creds.ClientID || len(e.TransactionID) != 20 || e.RequestID == "" ||
				e.At.IsZero() || e.Currency != "CAD" {
				t.Errorf("history entry lacks who, what or when: %+v", e)
			}
			got = append(got, e.Operation+" "+e.Outcome+" "+money.Format(e.Amount, money.Currency{Digits: 2}))
			cardtest.Check(t, "the history", strings.Join([]string{e.MerchantID, e.ClientID, e.Operation, e.TransactionID, e.Detail, e.RequestID}, " "))
			for _, last4 := range []string{"424242", "4242"} {
				if strings.Contains(e.Detail, last4) {
					t.Errorf("history detail carries card digits: %q", e.Detail)
				}
			}
		}
		want := []string{"sale APPROVED 30.00", "sale DECLINED 12.00", "refund APPROVED 10.00", "refund REJECTED 25.00",
			"authorize APPROVED 8.00", "capture APPROVED 8.00", "authorize APPROVED 9.00", "void APPROVED 9.00"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

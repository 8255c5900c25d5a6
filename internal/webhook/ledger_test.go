package webhook

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// outcomeSQL records an approved outcome of the pending transaction $1 at $2, as the ledger does on
// PostgreSQL: its place is its transaction's id.
const outcomeSQL = `UPDATE transactions SET status = 'APPROVED', message = 'Approved', lease_until = NULL, updated_at = $2,
	finished_at = $2, event_seq = pg_current_xact_id()::text::bigint WHERE id = $1 AND status = 'PENDING'`

// On PostgreSQL outcomes commit in another order than their places (their transactions' ids): an
// outcome whose transaction is still open holds back the delivery of those after it, which are
// neither sent before it nor let it be passed over; once it commits, both are delivered, in the order
// of their places, each with the payload of its transaction's Wire form as event.New made it.
func TestOutcomesDeliveredInCommitOrder(t *testing.T) {
	db := storetest.Postgres(t)
	ctx := context.Background()
	rc := newReceiver(t, nil)
	f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(rc)})
	m := f.merchant(t, "order@example.com")
	endpoint, secret := f.endpoint(t, m, rc.srv.URL+"/hooks")
	created := f.clock.Now()
	pending := func(suffix string) payment.Transaction {
		tr := payment.Transaction{TransactionID: "ORDERTEST" + suffix, MerchantID: m, Kind: payment.KindSale, Status: payment.StatusApproved,
			Amount: 1000, Currency: money.Currency{Code: "CAD", Digits: 2}, CardType: "VISA", CardSuffix: "4242", Source: payment.SourceEcommerce,
			Message: "Approved", CreatedAt: created}
		if err := db.QueryRow(ctx, []any{&tr.ID}, `INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount, currency, scale,
			card_type, card_suffix, source, created_at, updated_at) VALUES ($1, $2, 'SALE', 'PENDING', 1000, 'CAD', 2, 'VISA', '4242', $3, $4, $4)
			RETURNING id`, tr.TransactionID, m, payment.SourceEcommerce, created.UnixMilli()); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	first, second := pending("AAAAAAAAAAA"), pending("BBBBBBBBBBB")

	f.clock.Advance(time.Second)
	held, err := db.Raw().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	if _, err := held.ExecContext(ctx, outcomeSQL, first.ID, f.clock.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	firstAt := f.clock.Now()
	f.clock.Advance(time.Second)
	if _, err := db.Exec(ctx, outcomeSQL, second.ID, f.clock.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	secondAt := f.clock.Now()

	f.drive(t)
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("%d deliveries sent while an outcome before them was not committed", n)
	}
	if n := f.count(t, `SELECT COUNT(*) FROM webhook_deliveries`); n != 0 {
		t.Fatalf("%d deliveries made while an outcome before them was not committed", n)
	}
	if err := held.Commit(); err != nil {
		t.Fatal(err)
	}
	f.drive(t)

	var want []string
	bodies := map[string]string{}
	for _, c := range []struct {
		tr payment.Transaction
		at time.Time
	}{{first, firstAt}, {second, secondAt}} {
		e, err := event.New(m, event.TransactionApproved, c.tr.Wire(), c.at)
		if err != nil {
			t.Fatal(err)
		}
		id := payment.EventID(c.tr.ID, c.at)
		want = append(want, id)
		bodies[id] = string(Body(e.Type, e.CreatedAt, string(e.Data)))
	}
	rows, err := db.Reader().QueryContext(ctx, `SELECT transaction_ref FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY id`, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var made []int64
	for rows.Next() {
		var ref int64
		if err := rows.Scan(&ref); err != nil {
			t.Fatal(err)
		}
		made = append(made, ref)
	}
	rows.Close()
	if !slices.Equal(made, []int64{first.ID, second.ID}) {
		t.Fatalf("deliveries made of %v; want %v, in commit order", made, []int64{first.ID, second.ID})
	}
	got := rc.requests()
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2", len(got))
	}
	for _, r := range got {
		id := r.Header.Get("webhook-id")
		if r.Body != bodies[id] {
			t.Errorf("delivery %s body\n%s\nwant\n%s", id, r.Body, bodies[id])
		}
		if err := verifyIgnoringTimestamp(secret, r); err != nil {
			t.Errorf("delivery %s does not verify: %v", id, err)
		}
	}
}

// changeSQL records a change of payment intent $2 of merchant $1 with event $3 and data $4 at $5, as
// checkout's recordChange does on PostgreSQL: its place is its transaction's id.
var changeSQL = `INSERT INTO payment_intent_changes (merchant_id, intent_id, event_seq, type, data, amount, currency, status, created_at)
	VALUES ($1, $2, ` + event.Place(store.Postgres, "$1") + `, $3, $4, 1000, 'CAD', 'succeeded', $5) RETURNING id`

// Changes of payment intents whose transactions commit in another order than their places: the
// change whose transaction is still open holds back the delivery of the one after it, which is
// neither sent before it nor lets it be passed over; once it commits, both are delivered, in the
// order of their places, each with the data its row holds, under its derived id.
func TestIntentChangesDeliveredInCommitOrder(t *testing.T) {
	db := storetest.Postgres(t)
	ctx := context.Background()
	rc := newReceiver(t, nil)
	f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(rc)})
	m := f.merchant(t, "changes@example.com")
	endpoint, secret := f.endpoint(t, m, rc.srv.URL+"/hooks")

	f.clock.Advance(time.Second)
	held, err := db.Raw().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	firstData, firstAt := `{"id":"pi_FIRST","status":"requires_action"}`, f.clock.Now()
	var first, second int64
	if err := held.QueryRowContext(ctx, changeSQL, m, "pi_FIRST", event.PaymentIntentRequiresAction, firstData, firstAt.UnixMilli()).Scan(&first); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	secondData, secondAt := `{"id":"pi_SECOND","status":"succeeded"}`, f.clock.Now()
	if err := db.QueryRow(ctx, []any{&second}, changeSQL, m, "pi_SECOND", event.PaymentIntentSucceeded, secondData, secondAt.UnixMilli()); err != nil {
		t.Fatal(err)
	}

	f.drive(t)
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("%d deliveries sent while a change before them was not committed", n)
	}
	if n := f.count(t, `SELECT COUNT(*) FROM webhook_deliveries`); n != 0 {
		t.Fatalf("%d deliveries made while a change before them was not committed", n)
	}
	if err := held.Commit(); err != nil {
		t.Fatal(err)
	}
	f.drive(t)

	var made []int64
	rows, err := db.Reader().QueryContext(ctx, `SELECT change_ref FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY id`, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ref int64
		if err := rows.Scan(&ref); err != nil {
			t.Fatal(err)
		}
		made = append(made, ref)
	}
	rows.Close()
	if !slices.Equal(made, []int64{first, second}) {
		t.Fatalf("deliveries made of the changes %v; want %v, in commit order", made, []int64{first, second})
	}
	bodies := map[string]string{
		event.DerivedID(event.Intent, first, firstAt):   string(Body(event.PaymentIntentRequiresAction, firstAt, firstData)),
		event.DerivedID(event.Intent, second, secondAt): string(Body(event.PaymentIntentSucceeded, secondAt, secondData)),
	}
	got := rc.requests()
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2", len(got))
	}
	for _, r := range got {
		id := r.Header.Get("webhook-id")
		if want, ok := bodies[id]; !ok || r.Body != want {
			t.Errorf("delivery %s body\n%s\nwant\n%s", id, r.Body, want)
		}
		if err := verifyIgnoringTimestamp(secret, r); err != nil {
			t.Errorf("delivery %s does not verify: %v", id, err)
		}
	}
}

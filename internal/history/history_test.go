package history_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/history"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// shop is a server on a manual clock with two merchants.
type shop struct {
	db       *store.DB
	clock    *clock.Manual
	ledger   *payment.Ledger
	checkout *checkout.Service
	m, o     string // the merchant whose history is read, and another
}

func newShop(t *testing.T, db *store.DB) *shop {
	c := clock.NewManual(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	srv := servertest.Start(t, db, server.Config{Now: c.Now})
	return &shop{db: db, clock: c, ledger: srv.Ledger(), checkout: srv.Checkout(), m: srv.NewMerchant(t).ID, o: srv.NewMerchant(t).ID}
}

// intent creates a payment intent of 5.00 CAD plus cents for the merchant as client (an API key's
// id), under ctx (audit.WithActor for a staff user's), and returns its id.
func (s *shop) intent(t *testing.T, ctx context.Context, merchantID, client string, cents int64) string {
	t.Helper()
	cad, _ := money.Lookup("CAD")
	in, err := s.checkout.Create(ctx, checkout.Who{Merchant: merchant.Merchant{ID: merchantID}, ClientID: client, RequestID: "req-" + client},
		checkout.IntentParams{Amount: 500 + cents, Currency: cad, CaptureMethod: checkout.CaptureAutomatic})
	if err != nil {
		t.Fatalf("create an intent: %v", err)
	}
	return in.IntentID
}

// sale charges 10.00 CAD plus cents for the merchant as client (an API client's id, or a staff
// user's "dashboard/<id>"), under ctx (audit.WithActor for a staff user's).
func (s *shop) sale(t *testing.T, ctx context.Context, merchantID, client string, cents int64) payment.Transaction {
	t.Helper()
	n, _ := card.ParseNumber(cardtest.Visa)
	exp, _ := card.ParseExpiry("12", "40")
	cad, _ := money.Lookup("CAD")
	tx, err := s.ledger.Charge(ctx, payment.Charge{Actor: payment.Actor{MerchantID: merchantID, ClientID: client, RequestID: "req-" + client},
		Kind: payment.KindSale, Amount: 1000 + cents, Currency: cad, Card: n, Expiry: exp, CVV: "123", Source: payment.SourceEcommerce})
	if err != nil || tx.Status != payment.StatusApproved {
		t.Fatalf("sale: %v %+v", err, tx)
	}
	return tx
}

// record writes an audit record that is not a money operation, under ctx.
func (s *shop) record(t *testing.T, ctx context.Context, merchantID, op string) {
	t.Helper()
	if err := s.db.Write(ctx, func(tx *store.Tx) error {
		return audit.Write(ctx, tx, audit.Record{MerchantID: merchantID, Operation: op, Resource: "client/c1", Outcome: audit.Done, At: s.clock.Now()})
	}); err != nil {
		t.Fatal(err)
	}
}

func (s *shop) list(t *testing.T, merchantID string, f history.Filter) history.Page {
	t.Helper()
	var p history.Page
	if err := s.db.Read(context.Background(), func(q store.Querier) error {
		var err error
		p, err = history.List(context.Background(), q, merchantID, f)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// all reads every page of f, Limit at a time, calling between(page) after each.
func (s *shop) all(t *testing.T, merchantID string, f history.Filter, between func(int)) []history.Entry {
	t.Helper()
	var out []history.Entry
	for i := 0; ; i++ {
		p := s.list(t, merchantID, f)
		out = append(out, p.Entries...)
		if !p.More {
			return out
		}
		if i > 100 {
			t.Fatal("the history does not end")
		}
		f.Before = p.Next
		if between != nil {
			between(i)
		}
	}
}

// line is an entry as the tests compare it: its source, who, what and outcome.
func line(e history.Entry) string {
	src := "audit"
	switch {
	case e.Seq != 0:
		src = "ledger"
	case e.ChangeID != 0:
		src = "intent"
	}
	return fmt.Sprintf("%s %s %s %s %d %s", src, e.UserID+e.ClientID, e.Operation, e.TransactionID, e.Amount, e.Outcome)
}

func lines(es []history.Entry) (out []string) {
	for _, e := range es {
		out = append(out, line(e))
	}
	return out
}

func auditRows(t *testing.T, db *store.DB, transactionID string) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_log WHERE transaction_id = $1`,
		transactionID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An API's sale writes no audit record, and is in the history by its ledger row; a staff user's
// sale and refund, at the dashboard or at the virtual terminal's card form (a staff client without
// the dashboard's context), write an audit record naming the user and are in the history once, by
// it; records that are not money operations are there too, in order of time, newest first; another
// merchant's are not.
func TestOneHistory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		ctx := context.Background()
		alice := audit.WithActor(ctx, audit.Actor{UserID: "u-alice", Address: "192.0.2.7"})
		tick := func() { s.clock.Advance(time.Second) }

		api := s.sale(t, ctx, s.m, "client-1", 1)
		tick()
		s.record(t, alice, s.m, "client.create")
		tick()
		staff := s.sale(t, alice, s.m, payment.StaffClient+"u-alice", 2)
		tick()
		refund, err := s.ledger.Refund(alice, payment.FollowUp{Actor: payment.Actor{MerchantID: s.m, ClientID: payment.StaffClient + "u-alice"},
			ParentID: api.ID, Amount: 300})
		if err != nil || refund.Status != payment.StatusApproved {
			t.Fatalf("refund: %v %+v", err, refund)
		}
		tick()
		terminal := s.sale(t, ctx, s.m, payment.StaffClient+"u-bob", 3)
		tick()
		s.sale(t, ctx, s.o, "client-9", 4)
		s.record(t, alice, s.o, "client.create")

		if n := auditRows(t, db, api.TransactionID); n != 0 {
			t.Errorf("the API's sale wrote %d audit records", n)
		}
		for _, tx := range []payment.Transaction{staff, refund, terminal} {
			if n := auditRows(t, db, tx.TransactionID); n != 1 {
				t.Errorf("the staff's %s %s wrote %d audit records, want 1", tx.Kind, tx.TransactionID, n)
			}
		}
		want := []string{
			"audit u-bobdashboard/u-bob sale " + terminal.TransactionID + " 1003 APPROVED",
			"audit u-alicedashboard/u-alice refund " + refund.TransactionID + " 300 APPROVED",
			"audit u-alicedashboard/u-alice sale " + staff.TransactionID + " 1002 APPROVED",
			"audit u-alice client.create  0 DONE",
			"ledger client-1 sale " + api.TransactionID + " 1001 APPROVED",
		}
		got := s.list(t, s.m, history.Filter{})
		if strings.Join(lines(got.Entries), "\n") != strings.Join(want, "\n") || got.More {
			t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(lines(got.Entries), "\n"), strings.Join(want, "\n"))
		}
		if e := got.Entries[1]; e.Address != "192.0.2.7" || !e.At.Equal(s.clock.Now().Add(-2*time.Second)) {
			t.Errorf("the staff's refund: %+v", e)
		}
		if e := got.Entries[4]; e.RequestID != "req-client-1" || e.Detail == "" || e.Currency != "CAD" || e.MerchantID != s.m ||
			!e.At.Equal(s.clock.Now().Add(-5*time.Second)) {
			t.Errorf("the API's sale: %+v", e)
		}

		for _, tc := range []struct {
			f    history.Filter
			want []string
		}{
			{history.Filter{UserID: "u-alice"}, want[1:4]},
			{history.Filter{UserID: "u-bob"}, want[:1]},
			{history.Filter{Operation: "sale"}, []string{want[0], want[2], want[4]}},
			{history.Filter{Operation: "refund"}, want[1:2]},
			{history.Filter{Operation: "client.create"}, want[3:4]},
			{history.Filter{UserID: "u-alice", Operation: "sale"}, want[2:3]},
			{history.Filter{Operation: "void"}, nil},
		} {
			if got := lines(s.all(t, s.m, tc.f, nil)); !slices.Equal(got, tc.want) {
				t.Errorf("%+v:\n%s\nwant:\n%s", tc.f, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		}
		// The other merchant's history is its own.
		if got := lines(s.all(t, s.o, history.Filter{}, nil)); len(got) != 2 || strings.Contains(strings.Join(got, " "), "u-bob") {
			t.Errorf("the other merchant's: %v", got)
		}
	})
}

// Pages of the history, one or two entries at a time, with entries of the three sources at the same
// millisecond, hold the whole history once, in the order of one long page, although records of every
// source are written between the pages: those are newer, and wait for the next first page.
func TestPagesAreStable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		ctx := context.Background()
		alice := audit.WithActor(ctx, audit.Actor{UserID: "u-alice"})
		for i := range 12 {
			switch i % 3 {
			case 0:
				s.sale(t, ctx, s.m, "client-1", int64(i))
				s.intent(t, ctx, s.m, "key-1", int64(i))
			case 1:
				s.record(t, alice, s.m, fmt.Sprintf("op.%d", i))
			default:
				s.intent(t, ctx, s.m, "key-2", int64(i))
				s.sale(t, ctx, s.m, "client-2", int64(i))
				s.record(t, alice, s.m, fmt.Sprintf("op.%d", i))
			}
			if i%4 == 3 { // ties: the clock moves every fourth step only
				s.clock.Advance(time.Millisecond)
			}
		}
		if n := len(s.list(t, s.m, history.Filter{Limit: 100}).Entries); n != 24 {
			t.Fatalf("the whole history: %d entries", n)
		}
		for _, limit := range []int{1, 2, 5} {
			whole := lines(s.all(t, s.m, history.Filter{Limit: 100}, nil))
			got := lines(s.all(t, s.m, history.Filter{Limit: limit}, func(int) {
				s.clock.Advance(time.Millisecond)
				s.sale(t, ctx, s.m, "client-late", 0)
				s.intent(t, ctx, s.m, "key-late", 0)
				s.record(t, alice, s.m, "op.late")
			}))
			if !slices.Equal(got, whole) {
				t.Errorf("pages of %d:\n%s\nwant:\n%s", limit, strings.Join(got, "\n"), strings.Join(whole, "\n"))
			}
		}
		// The late ones lead the next first page.
		if first := s.list(t, s.m, history.Filter{Limit: 1}).Entries; len(first) != 1 || !strings.Contains(line(first[0]), "late") {
			t.Errorf("the newest: %v", lines(first))
		}
	})
}

// A cursor that a page did not give is refused with a clear error, not misread.
func TestParseCursor(t *testing.T) {
	for _, s := range []string{"1", "a.b", "1.", ".1", "-1.2", "1.2.3", "1.2:", "1.2:x", "1.2:-3", "1:2.3", "1.2:3:4"} {
		if _, err := history.ParseCursor(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
	for _, want := range []history.Cursor{{Audit: 12, Ledger: 34, Intent: 56}, {Audit: 1, Ledger: 1, Intent: 1}} {
		c, err := history.ParseCursor(want.String())
		if err != nil || c != want {
			t.Errorf("a round trip of %+v: %+v %v", want, c, err)
		}
	}
}

// An API key's operations on payment intents are in the history by their changes, as the audit
// records they replace read (the operation, the key, the amount, the status as detail), and a staff
// user's by the audit log's record naming the user, once each: the filters by operation and by user
// select them as they did.
func TestIntentOperationsInTheHistory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		ctx := context.Background()
		alice := audit.WithActor(ctx, audit.Actor{UserID: "u-alice"})
		s.sale(t, ctx, s.m, "client-1", 1)
		s.clock.Advance(time.Second)
		api := s.intent(t, ctx, s.m, "key-1", 1)
		s.clock.Advance(time.Second)
		staff := s.intent(t, alice, s.m, "", 2)
		s.clock.Advance(time.Second)
		s.record(t, alice, s.m, "client.create")
		s.intent(t, ctx, s.o, "key-9", 3)

		want := []string{
			"audit u-alice client.create  0 DONE",
			"audit u-alice payment_intent.create  502 DONE",
			"intent key-1 payment_intent.create  501 DONE",
			"ledger client-1 sale " + s.list(t, s.m, history.Filter{Operation: "sale"}).Entries[0].TransactionID + " 1001 APPROVED",
		}
		got := s.list(t, s.m, history.Filter{})
		if !slices.Equal(lines(got.Entries), want) || got.More {
			t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(lines(got.Entries), "\n"), strings.Join(want, "\n"))
		}
		if e := got.Entries[2]; e.Resource != "payment_intent/"+api || e.Detail != checkout.StatusRequiresPaymentMethod || e.Currency != "CAD" ||
			e.RequestID != "req-key-1" || e.MerchantID != s.m || !e.At.Equal(s.clock.Now().Add(-2*time.Second)) {
			t.Errorf("the API key's creation: %+v", e)
		}
		if e := got.Entries[1]; e.Resource != "payment_intent/"+staff {
			t.Errorf("the staff's creation: %+v", e)
		}
		for _, tc := range []struct {
			f    history.Filter
			want []string
		}{
			{history.Filter{Operation: "payment_intent.create"}, want[1:3]},
			{history.Filter{UserID: "u-alice"}, want[:2]},
			{history.Filter{UserID: "u-alice", Operation: "payment_intent.create"}, want[1:2]},
			{history.Filter{Operation: "payment_intent.confirm"}, nil},
			{history.Filter{Operation: "sale"}, want[3:]},
		} {
			if got := lines(s.all(t, s.m, tc.f, nil)); !slices.Equal(got, tc.want) {
				t.Errorf("%+v:\n%s\nwant:\n%s", tc.f, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		}
		if got := lines(s.all(t, s.o, history.Filter{}, nil)); !slices.Equal(got, []string{"intent key-9 payment_intent.create  503 DONE"}) {
			t.Errorf("the other merchant's: %v", got)
		}
	})
}

// A cursor of two numbers, as pages gave before the changes of payment intents were a source, goes
// on with the entries of the audit log and the ledger older than it, as it did, and shows none of the
// changes, all of which are newer than it (the intents' operations it was given among are in the
// audit log): the pages after it are the rest of the history as it was, once each.
func TestCursorOfTwoNumbers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		ctx := context.Background()
		alice := audit.WithActor(ctx, audit.Actor{UserID: "u-alice"})
		for i := range 6 {
			s.sale(t, ctx, s.m, "client-1", int64(i))
			s.record(t, alice, s.m, fmt.Sprintf("op.%d", i))
			s.clock.Advance(time.Millisecond)
		}
		before := lines(s.list(t, s.m, history.Filter{Limit: 100}).Entries)
		first := s.list(t, s.m, history.Filter{Limit: 3})
		old := fmt.Sprintf("%d.%d", first.Next.Audit, first.Next.Ledger)
		for i := range 3 { // written after the cursor was given
			s.clock.Advance(time.Millisecond)
			s.intent(t, ctx, s.m, "key-1", int64(i))
			s.sale(t, ctx, s.m, "client-late", int64(i))
		}
		c, err := history.ParseCursor(old)
		if err != nil {
			t.Fatalf("%q: %v", old, err)
		}
		got := lines(first.Entries)
		got = append(got, lines(s.all(t, s.m, history.Filter{Limit: 2, Before: c}, nil))...)
		if !slices.Equal(got, before) {
			t.Errorf("pages after the cursor %s:\n%s\nwant:\n%s", old, strings.Join(got, "\n"), strings.Join(before, "\n"))
		}
	})
}

// A transaction's trail holds its ledger row's own record and its audit records (a staff user's
// refund of it), oldest first.
func TestTrail(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		ctx := context.Background()
		alice := audit.WithActor(ctx, audit.Actor{UserID: "u-alice"})
		api := s.sale(t, ctx, s.m, "client-1", 0)
		s.clock.Advance(time.Second)
		refund, err := s.ledger.Refund(alice, payment.FollowUp{Actor: payment.Actor{MerchantID: s.m, ClientID: payment.StaffClient + "u-alice"},
			ParentID: api.ID, Amount: 100})
		if err != nil {
			t.Fatal(err)
		}
		other := s.sale(t, ctx, s.o, "client-9", 0)
		var got []history.Entry
		if err := db.Read(ctx, func(q store.Querier) error {
			got, err = history.Trail(ctx, q, s.m, []string{api.TransactionID, refund.TransactionID, other.TransactionID})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := []string{"ledger client-1 sale " + api.TransactionID + " 1000 APPROVED",
			"audit u-alicedashboard/u-alice refund " + refund.TransactionID + " 100 APPROVED"}
		if !slices.Equal(lines(got), want) {
			t.Errorf("trail:\n%s\nwant:\n%s", strings.Join(lines(got), "\n"), strings.Join(want, "\n"))
		}
	})
}

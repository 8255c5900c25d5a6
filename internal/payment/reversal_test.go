package payment_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// silent behaves as a processor whose acquirer went quiet, as an ISO 8583 connector does: it prepares a
// trace for every operation; while drop is set, a call gets no answer and is to be reversed
// (processor.Unanswered), and while fail is set, a call fails without having been sent; Lookup cannot
// ask, and answers that the operation is to be reversed; reversals are acknowledged while ack is set.
// Every sending of a reversal is kept, in order.
type silent struct {
	processor.Processor
	drop, fail, ack atomic.Bool
	traces          atomic.Int64

	mu      sync.Mutex
	sent    []string
	lookups []processor.Operation
}

func (s *silent) Prepare(context.Context, processor.Merchant) (string, error) {
	return fmt.Sprintf("trace-%d", s.traces.Add(1)), nil
}

func (s *silent) answer(trace string, call func() (processor.Result, error)) (processor.Result, error) {
	return s.answerAs(trace, false, call)
}

func (s *silent) answerAs(trace string, completes bool, call func() (processor.Result, error)) (processor.Result, error) {
	switch {
	case s.drop.Load():
		return processor.Result{}, &processor.Unanswered{Reversal: "reverse " + trace, Completes: completes, Err: context.DeadlineExceeded}
	case s.fail.Load():
		return processor.Result{}, errors.New("acquirer unreachable")
	}
	return call()
}

func (s *silent) Authorize(ctx context.Context, p processor.Payment) (processor.Result, error) {
	return s.answer(p.Trace, func() (processor.Result, error) { return s.Processor.Authorize(ctx, p) })
}

func (s *silent) Refund(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	return s.answer(f.Trace, func() (processor.Result, error) { return s.Processor.Refund(ctx, f) })
}

// Void is repeated until answered rather than undone, as an ISO 8583 void is.
func (s *silent) Void(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	return s.answerAs(f.Trace, true, func() (processor.Result, error) { return s.Processor.Void(ctx, f) })
}

func (s *silent) Lookup(_ context.Context, op processor.Operation) (processor.Result, error) {
	s.mu.Lock()
	s.lookups = append(s.lookups, op)
	s.mu.Unlock()
	if op.Trace == "" {
		return processor.Result{}, processor.ErrNotFound
	}
	return processor.Result{}, &processor.Unanswered{Reversal: "reverse " + op.Trace, Err: errors.New("no enquiry")}
}

func (s *silent) Reverse(_ context.Context, _ processor.Merchant, reversal string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, reversal)
	if !s.ack.Load() {
		return errors.New("no answer to the reversal")
	}
	return nil
}

func (s *silent) lookedUp() []processor.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]processor.Operation(nil), s.lookups...)
}

func (s *silent) sendings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sent...)
}

type reversalFixture struct {
	cfg   server.Config
	srv   *servertest.Server
	m     *servertest.Merchant
	proc  *silent
	clock *clock.Manual
	db    *store.DB
}

func newReversalFixture(t *testing.T, db *store.DB) *reversalFixture {
	f := &reversalFixture{clock: clock.NewManual(time.Now()), db: db}
	f.proc = &silent{Processor: simulator.New(simulator.Config{Now: f.clock.Now})}
	f.cfg = server.Config{Processor: f.proc, Now: f.clock.Now, ProcessorTimeout: 10 * time.Second, KEK: servertest.NewKEK(t)}
	f.srv = servertest.Start(t, db, f.cfg)
	f.m = f.srv.NewMerchant(t)
	return f
}

// reversal reads the reversal recorded for the transaction: what is sent, how often it was, and
// whether it was acknowledged.
func (f *reversalFixture) reversal(t *testing.T, transactionID string) (reversal string, attempts int, acknowledged bool) {
	t.Helper()
	var ack *int64
	if err := f.db.Read(context.Background(), func(q store.Querier) error {
		return q.QueryRowContext(context.Background(), `SELECT reversal, attempts, acknowledged_at FROM reversals WHERE transaction_id = $1`,
			transactionID).Scan(&reversal, &attempts, &ack)
	}); err != nil {
		t.Fatalf("the reversal of %s: %v", transactionID, err)
	}
	return reversal, attempts, ack != nil
}

// pendingID is the transaction_id of the merchant's one pending attempt.
func (f *reversalFixture) pendingID(t *testing.T) (id, trace string) {
	t.Helper()
	if err := f.db.Read(context.Background(), func(q store.Querier) error {
		return q.QueryRowContext(context.Background(), `SELECT transaction_id, processor_trace FROM transactions WHERE status = 'PENDING'`).Scan(&id, &trace)
	}); err != nil {
		t.Fatalf("the pending attempt: %v", err)
	}
	return id, trace
}

// A sale that gets no answer is reversed at once; acknowledged, it is a decline (processing_error),
// recorded with the trace it was sent under, and the reversal is done.
func TestUnansweredSaleIsReversed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newReversalFixture(t, db)
		f.proc.drop.Store(true)
		f.proc.ack.Store(true)
		r := post(t, f.m, "sale", card(cardtest.Visa))
		if r.Status != 200 || r.Str("transaction_result") != "DECLINED" || r.Bool("transaction_success") {
			t.Fatalf("an unanswered sale, reversed: %d %s", r.Status, r.Raw)
		}
		id := r.Str("transaction_id")
		if got := f.proc.sendings(); len(got) != 1 || got[0] != "reverse trace-1" {
			t.Fatalf("reversals sent: %q", got)
		}
		rev, attempts, acked := f.reversal(t, id)
		if rev != "reverse trace-1" || attempts != 1 || !acked {
			t.Fatalf("recorded reversal: %q, %d sendings, acknowledged %v", rev, attempts, acked)
		}
		var trace, code, outcome string
		if err := db.Read(context.Background(), func(q store.Querier) error {
			if err := q.QueryRowContext(context.Background(), `SELECT processor_trace, decline_code FROM transactions WHERE transaction_id = $1`, id).
				Scan(&trace, &code); err != nil {
				return err
			}
			return q.QueryRowContext(context.Background(), `SELECT outcome FROM audit_log WHERE transaction_id = $1`, id).Scan(&outcome)
		}); err != nil {
			t.Fatal(err)
		}
		if trace != "trace-1" || code != processor.CodeProcessingError || outcome != "REVERSED" {
			t.Fatalf("ledger: trace %q, decline code %q, audit outcome %q", trace, code, outcome)
		}
		// Not the card's fault: the next sale of the same card goes through.
		f.proc.drop.Store(false)
		ok(t, post(t, f.m, "sale", card(cardtest.Visa)), "SALE", "10.00")
	})
}

// A reversal that is not acknowledged leaves the answer a 502 and the attempt pending; it is sent
// again, the same each time, after a growing backoff, by the reversal sweep, until acknowledged: then
// the attempt is declined. Recovery leaves it to the reversal, and an acknowledged one is not sent again.
// The client's retry with the same Idempotency-Key, as the 502 tells it, answers 409 "retry shortly"
// (Retry-After) while the attempt is pending, and the decline once it is settled.
func TestReversalIsSentUntilAcknowledged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newReversalFixture(t, db)
		ctx := context.Background()
		f.proc.drop.Store(true)
		r := post(t, f.m, "sale", card(cardtest.Visa), "Idempotency-Key", "order-1")
		if r.Status != 502 || r.Str("error") != "processor_unavailable" {
			t.Fatalf("an unanswered sale whose reversal is not acknowledged: %d %s", r.Status, r.Raw)
		}
		id, _ := f.pendingID(t)
		if r := post(t, f.m, "sale", card(cardtest.Visa), "Idempotency-Key", "order-1"); r.Status != 409 ||
			r.Str("error") != "idempotency_key_in_use" || r.Header.Get("Retry-After") != "1" {
			t.Fatalf("a retry while the attempt is pending: %d %s, Retry-After %q", r.Status, r.Raw, r.Header.Get("Retry-After"))
		}
		if _, attempts, acked := f.reversal(t, id); attempts != 1 || acked {
			t.Fatalf("after the first sending: %d sendings, acknowledged %v", attempts, acked)
		}
		ledger := f.srv.Ledger()
		if n, err := ledger.SendReversals(ctx); err != nil || n != 0 || len(f.proc.sendings()) != 1 {
			t.Fatalf("before its backoff the reversal is not due: %d, %v, %d sendings", n, err, len(f.proc.sendings()))
		}
		f.clock.Advance(time.Second)
		if n, err := ledger.SendReversals(ctx); err != nil || n != 0 || len(f.proc.sendings()) != 2 {
			t.Fatalf("after 1 s it is sent again: %d, %v, %d sendings", n, err, len(f.proc.sendings()))
		}
		f.clock.Advance(time.Second)
		if _, _ = ledger.SendReversals(ctx); len(f.proc.sendings()) != 2 {
			t.Fatal("the second backoff is 2 s, not 1")
		}
		if n, err := ledger.Recover(ctx, true); err != nil || n != 0 || len(f.proc.lookedUp()) != 0 {
			t.Fatalf("recovery took an attempt that is being reversed: %d, %v, lookups %v", n, err, f.proc.lookedUp())
		}
		f.clock.Advance(time.Second)
		f.proc.ack.Store(true)
		if n, err := ledger.SendReversals(ctx); err != nil || n != 1 {
			t.Fatalf("acknowledged: %d, %v", n, err)
		}
		got := f.proc.sendings()
		if len(got) != 3 || got[0] != got[1] || got[1] != got[2] {
			t.Fatalf("every sending is a retransmission of the first: %q", got)
		}
		tx := f.m.Do(t, "GET", "/transaction-service/transaction/"+id, nil)
		if tx.Status != 200 || tx.Str("transaction_result") != "DECLINED" {
			t.Fatalf("after the acknowledgement: %d %s", tx.Status, tx.Raw)
		}
		if r := post(t, f.m, "sale", card(cardtest.Visa), "Idempotency-Key", "order-1"); r.Status != 200 ||
			r.Str("transaction_id") != id || r.Str("transaction_result") != "DECLINED" {
			t.Fatalf("a retry once the attempt is settled: %d %s", r.Status, r.Raw)
		}
		f.clock.Advance(time.Hour)
		if n, _ := ledger.SendReversals(ctx); n != 0 || len(f.proc.sendings()) != 3 {
			t.Fatalf("an acknowledged reversal was sent again")
		}
	})
}

// A refund that gets no answer and is reversed gives its reservation back: the whole sale can still be
// refunded.
func TestUnansweredRefundIsReversedAndReleased(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newReversalFixture(t, db)
		sale := ok(t, post(t, f.m, "sale", card(cardtest.Visa)), "SALE", "10.00")
		f.proc.drop.Store(true)
		f.proc.ack.Store(true)
		r := post(t, f.m, "refund/"+sale.Str("transaction_id"), map[string]any{"amount": "10.00"})
		if r.Status != 200 || r.Str("transaction_result") != "DECLINED" || r.Str("transaction_type") != "REFUND" {
			t.Fatalf("an unanswered refund, reversed: %d %s", r.Status, r.Raw)
		}
		if got := f.proc.sendings(); len(got) != 1 || got[0] != "reverse trace-2" {
			t.Fatalf("reversals sent: %q", got)
		}
		f.proc.drop.Store(false)
		ok(t, post(t, f.m, "refund/"+sale.Str("transaction_id"), map[string]any{"amount": "10.00"}), "REFUND", "10.00")
	})
}

// An attempt whose node died after sending it (here: whose call failed, leaving it pending) is looked up
// by recovery with the trace it was recorded with; a processor that cannot ask answers that it is to be
// reversed, and recovery records the reversal and sends it: the attempt ends declined, nothing charged.
func TestRecoveryReversesWhatItCannotAsk(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newReversalFixture(t, db)
		f.proc.fail.Store(true)
		if r := post(t, f.m, "sale", card(cardtest.Visa, "amount", "12.34")); r.Status != 502 {
			t.Fatalf("a failed call: %d %s", r.Status, r.Raw)
		}
		id, trace := f.pendingID(t)
		if trace != "trace-1" {
			t.Fatalf("the attempt was recorded with trace %q", trace)
		}
		f.proc.ack.Store(true)
		if n, err := f.srv.Ledger().Recover(context.Background(), true); err != nil || n != 1 {
			t.Fatalf("Recover = %d, %v", n, err)
		}
		if got := f.proc.lookedUp(); len(got) != 1 || got[0].Trace != "trace-1" || got[0].Kind != processor.OperationSale ||
			got[0].Amount != 1234 || got[0].Reference != id {
			t.Fatalf("Lookup was asked %+v", got)
		}
		if _, _, acked := f.reversal(t, id); !acked {
			t.Fatal("the reversal was not recorded as acknowledged")
		}
		tx := f.m.Do(t, "GET", "/transaction-service/transaction/"+id, nil)
		if tx.Status != 200 || tx.Str("transaction_result") != "DECLINED" {
			t.Fatalf("after recovery: %d %s", tx.Status, tx.Raw)
		}
		// The gateway's own work keeps its audit record, beside the API client's ledger row.
		if got := auditOf(t, db, id); got != "recover REVERSED" {
			t.Errorf("the recovered attempt's audit records: %q, want recovery's reversal", got)
		}
	})
}

// auditOf is the audit records of a transaction, "operation outcome" each, oldest first.
func auditOf(t *testing.T, db *store.DB, transactionID string) string {
	t.Helper()
	return strings.Join(storetest.Strings(t, db.Reader(), `SELECT operation || ' ' || outcome FROM audit_log
		WHERE transaction_id = $1 ORDER BY id`, transactionID), ", ")
}

// Two nodes over one PostgreSQL database, sweeping at the same moment, send each due reversal once.
func TestNodesSendAReversalOnce(t *testing.T) {
	t.Parallel()
	db := storetest.Postgres(t)
	f := newReversalFixture(t, db)
	other := servertest.Start(t, db, f.cfg)
	f.proc.drop.Store(true)
	for range 5 {
		if r := post(t, f.m, "sale", card(cardtest.Visa)); r.Status != 502 {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
	}
	f.clock.Advance(time.Second)
	var wg sync.WaitGroup
	for _, l := range []*servertest.Server{f.srv, other} {
		wg.Go(func() {
			if _, err := l.Ledger().SendReversals(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := f.proc.sendings(); len(got) != 10 {
		t.Fatalf("5 first sendings and 5 resendings, got %d: %q", len(got), got)
	}
}

// A void that gets no answer is repeated until answered, not undone: acknowledged, it is approved, and
// the authorization is voided for good.
func TestUnansweredVoidIsCompleted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newReversalFixture(t, db)
		auth := ok(t, post(t, f.m, "authorize", card(cardtest.Visa)), "AUTHORIZATION", "10.00")
		f.proc.drop.Store(true)
		f.proc.ack.Store(true)
		void := post(t, f.m, "void/"+auth.Str("transaction_id"), nil)
		if void.Status != 200 || void.Str("transaction_type") != "VOID" || void.Str("transaction_result") != "APPROVED" {
			t.Fatalf("an unanswered void, repeated and acknowledged: %d %s", void.Status, void.Raw)
		}
		// The repeated void is the gateway's work: audited, approved; the authorization, asked for through
		// the API, is its ledger row's record only.
		if got := auditOf(t, db, void.Str("transaction_id")); got != "void APPROVED" {
			t.Errorf("the completed void's audit records: %q", got)
		}
		if got := auditOf(t, db, auth.Str("transaction_id")); got != "" {
			t.Errorf("the API's authorization has audit records: %q", got)
		}
		f.proc.drop.Store(false)
		if r := post(t, f.m, "capture/"+auth.Str("transaction_id"), map[string]any{"amount": "10.00"}); r.Status != 409 {
			t.Fatalf("a capture of the voided authorization: %d %s", r.Status, r.Raw)
		}
	})
}

package payment_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/pgproxy"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Tests of a commit whose answer was lost: PostgreSQL behind a pgproxy that cuts the connection at
// one write of the payment path, with the write applied or not.

// lostBounds are short store bounds, so that a database that does not answer costs seconds, with a
// margin for a machine shared with other test binaries under the race detector.
var lostBounds = store.Bounds{ConnectTimeout: 2 * time.Second, TCPTimeout: 6 * time.Second,
	WriteTimeout: 4 * time.Second, ReadTimeout: 4 * time.Second}

// lostFixture is a fixture over a fresh PostgreSQL database reached through a proxy.
func lostFixture(t *testing.T, cfg server.Config, wrap func(processor.Processor) processor.Processor) (*fixture, *pgproxy.Proxy) {
	t.Helper()
	p, url := storetest.Proxied(t)
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: url, Bounds: lostBounds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return newFixtureWith(t, db, simulator.Config{}, cfg, wrap), p
}

// prefix matches a statement that begins with s (after white space).
func prefix(s string) func(string) bool {
	return func(q string) bool { return strings.HasPrefix(strings.TrimSpace(q), s) }
}

// contains matches a statement that contains s.
func contains(s string) func(string) bool {
	return func(q string) bool { return strings.Contains(q, s) }
}

// commitAfter matches the first COMMIT after a statement that first matches: the commit of the
// transaction that runs it, the test's requests running one at a time.
func commitAfter(first func(string) bool) func(string) bool {
	var mu sync.Mutex
	seen := false
	return func(q string) bool {
		mu.Lock()
		defer mu.Unlock()
		if first(q) {
			seen = true
			return false
		}
		if seen && pgproxy.IsCommit(q) {
			seen = false // matched once; armed again only by the next statement that matches first
			return true
		}
		return false
	}
}

// The statements of the payment path's writes, as the proxy sees them.
var (
	attemptInsert  = prefix("INSERT INTO transactions (")
	outcomeUpdate  = contains("UPDATE transactions SET status = $2, message = $3")
	refundReserve  = prefix("UPDATE transactions SET reserved = reserved + $2")
	captureReserve = prefix("UPDATE transactions SET closed_by = 'CAPTURE'")
)

// ledgerRow is what a test checks of a ledger row.
type ledgerRow struct {
	id, kind, status, decline string
	key                       sql.NullString
	reserved                  int64
	closedBy                  sql.NullString
}

func (r ledgerRow) String() string {
	return fmt.Sprintf("%s %s %s %s key=%v reserved=%d closed_by=%v", r.id, r.kind, r.status, r.decline, r.key.String, r.reserved, r.closedBy.String)
}

// ledger reads the merchant's ledger rows, oldest first.
func (f *fixture) ledger(t *testing.T) []ledgerRow {
	t.Helper()
	var out []ledgerRow
	err := f.srv.DB.Read(context.Background(), func(q store.Querier) error {
		rows, err := q.QueryContext(context.Background(), `SELECT transaction_id, kind, status, COALESCE(decline_code, ''),
			idempotency_key, reserved, closed_by FROM transactions WHERE merchant_id = $1 ORDER BY id`, f.m.ID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r ledgerRow
			if err := rows.Scan(&r.id, &r.kind, &r.status, &r.decline, &r.key, &r.reserved, &r.closedBy); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unavailable asserts the 503 of a write whose answer was lost.
func unavailable(t *testing.T, r servertest.Response) {
	t.Helper()
	if r.Status != 503 || r.Str("error") != "storage_unavailable" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("want 503 storage_unavailable with Retry-After: %d %v %s", r.Status, r.Header, r.Raw)
	}
}

// An outcome whose commit's answer was lost after the processor approved is written again on a new
// connection: applied or not, the client gets the approval at once, its retry with the key replays
// it, the processor was called once, and the ledger holds one approved sale.
func TestLostOutcomeIsReapplied(t *testing.T) {
	for _, apply := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", apply), func(t *testing.T) {
			f, p := lostFixture(t, server.Config{}, nil)
			p.CutAt(outcomeUpdate, apply)
			key := []string{"Idempotency-Key", "outcome"}
			r := ok(t, post(t, f.m, "sale", card(cardtest.Visa), key...), "SALE", "10.00")
			if p.Cuts() != 1 {
				t.Fatalf("%d cuts, want the outcome's", p.Cuts())
			}
			again := ok(t, post(t, f.m, "sale", card(cardtest.Visa), key...), "SALE", "10.00")
			if again.Str("transaction_id") != r.Str("transaction_id") {
				t.Errorf("the retry answered %s, want %s", again.Str("transaction_id"), r.Str("transaction_id"))
			}
			if n := f.proc.calls.Load(); n != 1 {
				t.Errorf("%d processor calls, want 1", n)
			}
			rows := f.ledger(t)
			if len(rows) != 1 || rows[0].id != r.Str("transaction_id") || rows[0].status != "APPROVED" {
				t.Errorf("ledger %v, want the one approved sale", rows)
			}
		})
	}
}

// remembering is a processor that can be asked what became of a payment, as Stripe can: Lookup
// answers what Authorize answered.
type remembering struct {
	processor.Processor
	mu      sync.Mutex
	answers map[string]processor.Result
	lookups int
	// after runs after each authorization, before its answer is returned.
	after func()
}

func (r *remembering) Authorize(ctx context.Context, p processor.Payment) (processor.Result, error) {
	res, err := r.Processor.Authorize(ctx, p)
	r.mu.Lock()
	if err == nil {
		r.answers[p.Reference] = res
	}
	after := r.after
	r.mu.Unlock()
	if after != nil {
		after()
	}
	return res, err
}

func (r *remembering) Lookup(ctx context.Context, op processor.Operation) (processor.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	res, ok := r.answers[op.Reference]
	if !ok {
		return processor.Result{}, processor.ErrNotFound
	}
	return res, nil
}

// An outcome that cannot be written before the attempt's lease runs out — the database gone from the
// processor's answer until past the lease — is left to recovery: the client gets 503, its retry is
// told the key is in use while the attempt is pending, recovery asks the processor and records its
// approval, and the retry then gets that approval. The processor authorized once.
func TestLostOutcomeIsLeftToRecovery(t *testing.T) {
	const timeout = time.Second // the lease: 2 s
	var p *pgproxy.Proxy
	rem := &remembering{answers: map[string]processor.Result{}}
	f, p := lostFixture(t, server.Config{ProcessorTimeout: timeout}, func(c processor.Processor) processor.Processor {
		rem.Processor = c
		rem.after = func() { p.Hang() } // the database is gone once the processor has answered
		return rem
	})
	key := []string{"Idempotency-Key", "recovered"}
	unavailable(t, post(t, f.m, "sale", card(cardtest.Visa), key...))
	rem.mu.Lock()
	rem.after = nil
	rem.mu.Unlock()
	p.Forward()
	p.Reset()
	rows := f.ledger(t)
	if len(rows) != 1 || rows[0].status != "PENDING" {
		t.Fatalf("ledger %v, want the pending sale", rows)
	}
	// Past the lease (and the idempotency record's lock, as long): the attempt is recovery's.
	f.clock.Advance(2*timeout + time.Second)
	r := post(t, f.m, "sale", card(cardtest.Visa), key...)
	if r.Status != 409 || r.Str("error") != "idempotency_key_in_use" {
		t.Fatalf("a retry before recovery: %d %s, want 409 idempotency_key_in_use", r.Status, r.Raw)
	}
	if n, err := f.srv.Ledger().Recover(context.Background(), false); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1", n, err)
	}
	r = ok(t, post(t, f.m, "sale", card(cardtest.Visa), key...), "SALE", "10.00")
	if r.Str("transaction_id") != rows[0].id {
		t.Errorf("the retry answered %s, want %s", r.Str("transaction_id"), rows[0].id)
	}
	if n := f.proc.calls.Load(); n != 1 || rem.lookups != 1 {
		t.Errorf("%d processor calls and %d lookups, want 1 and 1", n, rem.lookups)
	}
	if rows := f.ledger(t); len(rows) != 1 || rows[0].status != "APPROVED" {
		t.Errorf("ledger %v, want the one approved sale", rows)
	}
}

// An attempt whose commit's answer was lost is never followed by a processor call: the client gets
// 503 and the processor is not called. Applied, the attempt is withdrawn — declined as never sent,
// its key unbound — so that the retry with the same key runs afresh; either way the retry makes the
// one processor call, and the ledger holds one approved sale under the key. The attempt is cut at its
// transaction's COMMIT (a request with a key) and at its own statement (one without, which the
// batcher sends as a transaction of its own).
func TestLostAttemptIsNeverSent(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		for _, apply := range []bool{true, false} {
			t.Run(fmt.Sprintf("key=%v/applied=%v", keyed, apply), func(t *testing.T) {
				f, p := lostFixture(t, server.Config{}, nil)
				var key []string
				cut := attemptInsert
				if keyed {
					key, cut = []string{"Idempotency-Key", "attempt"}, commitAfter(attemptInsert)
				}
				p.CutAt(cut, apply)
				unavailable(t, post(t, f.m, "sale", card(cardtest.Visa), key...))
				if p.Cuts() != 1 || f.proc.calls.Load() != 0 {
					t.Fatalf("%d cuts and %d processor calls, want 1 and 0", p.Cuts(), f.proc.calls.Load())
				}
				r := ok(t, post(t, f.m, "sale", card(cardtest.Visa), key...), "SALE", "10.00")
				if n := f.proc.calls.Load(); n != 1 {
					t.Errorf("%d processor calls after the retry, want 1", n)
				}
				rows := f.ledger(t)
				want := 1
				if apply {
					want = 2
					if w := rows[0]; w.status != "DECLINED" || w.decline != processor.CodeProcessingError || w.key.Valid {
						t.Errorf("the withdrawn attempt: %v, want declined processing_error without its key", w)
					}
				}
				last := rows[len(rows)-1]
				if len(rows) != want || last.id != r.Str("transaction_id") || last.status != "APPROVED" || last.key.Valid != keyed {
					t.Errorf("ledger %v, want %d rows, the last the approved sale %s", rows, want, r.Str("transaction_id"))
				}
				if keyed {
					again := ok(t, post(t, f.m, "sale", card(cardtest.Visa), key...), "SALE", "10.00")
					if again.Str("transaction_id") != r.Str("transaction_id") || f.proc.calls.Load() != 1 {
						t.Errorf("a second retry: %s after %d calls, want %s after 1", again.Str("transaction_id"),
							f.proc.calls.Load(), r.Str("transaction_id"))
					}
				}
			})
		}
	}
}

// A follow-up's attempt carries its reservation on the parent in the same transaction; cut at its
// COMMIT, the client gets 503 and the processor is not called; applied, the attempt is withdrawn and
// its reservation released. The retry with the key makes the one call, and the parent holds exactly
// the one follow-up's reservation: a refund is not reserved twice, a capture closes its
// authorization once.
func TestLostFollowUpReservation(t *testing.T) {
	cases := []struct {
		name, parent, path string
		reserve            func(string) bool
		closedBy           string
	}{
		{"refund", "sale", "refund/", refundReserve, ""},
		{"capture", "authorize", "capture/", captureReserve, "CAPTURE"},
	}
	for _, c := range cases {
		for _, apply := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/applied=%v", c.name, apply), func(t *testing.T) {
				f, p := lostFixture(t, server.Config{}, nil)
				parent := post(t, f.m, c.parent, card(cardtest.Visa))
				if parent.Status != 200 {
					t.Fatalf("%s: %d %s", c.parent, parent.Status, parent.Raw)
				}
				calls := f.proc.calls.Load()
				key := []string{"Idempotency-Key", "follow-up"}
				body := map[string]any{"amount": "4.00"}
				p.CutAt(commitAfter(c.reserve), apply)
				unavailable(t, post(t, f.m, c.path+parent.Str("transaction_id"), body, key...))
				if p.Cuts() != 1 || f.proc.calls.Load() != calls {
					t.Fatalf("%d cuts and %d processor calls, want 1 and %d", p.Cuts(), f.proc.calls.Load(), calls)
				}
				r := ok(t, post(t, f.m, c.path+parent.Str("transaction_id"), body, key...), strings.ToUpper(c.name), "4.00")
				if n := f.proc.calls.Load(); n != calls+1 {
					t.Errorf("%d processor calls, want %d", n, calls+1)
				}
				rows := f.ledger(t)
				if rows[0].reserved != 400 || rows[0].closedBy.String != c.closedBy {
					t.Errorf("the parent after the retry: %v, want 4.00 reserved, closed by %q", rows[0], c.closedBy)
				}
				last := rows[len(rows)-1]
				if want := map[bool]int{true: 3, false: 2}[apply]; len(rows) != want || last.id != r.Str("transaction_id") || last.status != "APPROVED" {
					t.Errorf("ledger %v, want %d rows, the last the approved %s", rows, want, c.name)
				}
				if apply && (rows[1].status != "DECLINED" || rows[1].key.Valid) {
					t.Errorf("the withdrawn %s: %v, want declined without its key", c.name, rows[1])
				}
			})
		}
	}
}

// Two sales' attempts sent as one batch of the group commit (requests without a key: their attempt is
// a statement of its own) whose answer is lost, applied or not, are each settled as a lone attempt
// whose answer was lost: neither is followed by a processor call, both clients get 503, and, applied,
// both attempts are withdrawn — declined as never sent — rather than left pending. A retry of each
// makes its one processor call.
func TestLostBatchOfAttemptsIsNeverSent(t *testing.T) {
	for _, apply := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", apply), func(t *testing.T) {
			f, p := lostFixture(t, server.Config{}, nil)
			var first, second servertest.Response
			storetest.OneBatch(t, f.srv.DB, func() { p.CutAt(attemptInsert, apply) },
				func() error { first = post(t, f.m, "sale", card(cardtest.Visa)); return nil },
				func() error { second = post(t, f.m, "sale", card(cardtest.Visa)); return nil })
			unavailable(t, first)
			unavailable(t, second)
			if p.Cuts() != 1 || f.proc.calls.Load() != 0 {
				t.Fatalf("%d cuts and %d processor calls, want 1 and 0", p.Cuts(), f.proc.calls.Load())
			}
			rows := f.ledger(t)
			withdrawn := map[bool]int{true: 2, false: 0}[apply]
			if len(rows) != withdrawn {
				t.Fatalf("ledger %v after the cut, want %d rows", rows, withdrawn)
			}
			for _, w := range rows {
				if w.status != "DECLINED" || w.decline != processor.CodeProcessingError {
					t.Errorf("a withdrawn attempt: %v, want declined processing_error", w)
				}
			}
			ok(t, post(t, f.m, "sale", card(cardtest.Visa)), "SALE", "10.00")
			ok(t, post(t, f.m, "sale", card(cardtest.Visa)), "SALE", "10.00")
			if n := f.proc.calls.Load(); n != 2 {
				t.Errorf("%d processor calls after the retries, want 2", n)
			}
			if rows := f.ledger(t); len(rows) != withdrawn+2 || rows[withdrawn].status != "APPROVED" || rows[withdrawn+1].status != "APPROVED" {
				t.Errorf("ledger %v, want %d rows, the last two approved", rows, withdrawn+2)
			}
		})
	}
}

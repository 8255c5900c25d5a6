package payment_test

import (
	"fmt"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server"
)

// The idempotency record of a request is written twice: its claim before the handler, and its
// response after. A claim whose commit's answer was lost is withdrawn before the 503, so that the
// retry runs the payment, once; a response whose commit's answer was lost is written again, so that
// the client gets the approval at once and its retry replays it. Applied or not, the processor
// authorized once and the ledger holds one approved sale.
func TestLostIdempotencyRecord(t *testing.T) {
	cases := []struct {
		name   string
		cut    func(string) bool
		failed bool // the first request is answered 503
	}{
		{"claim", commitAfter(prefix("INSERT INTO idempotency_keys")), true},
		{"response", commitAfter(prefix("UPDATE idempotency_keys SET status")), false},
	}
	for _, c := range cases {
		for _, apply := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/applied=%v", c.name, apply), func(t *testing.T) {
				f, p := lostFixture(t, server.Config{}, nil)
				key := []string{"Idempotency-Key", "record"}
				p.CutAt(c.cut, apply)
				first := post(t, f.m, "sale", card(cardtest.Visa), key...)
				if p.Cuts() != 1 {
					t.Fatalf("%d cuts, want 1", p.Cuts())
				}
				if c.failed {
					unavailable(t, first)
					if n := f.proc.calls.Load(); n != 0 {
						t.Fatalf("%d processor calls after a lost claim, want 0", n)
					}
				} else {
					ok(t, first, "SALE", "10.00")
				}
				t.Cleanup(func() {
					if t.Failed() {
						t.Log(f.srv.Logs.String())
					}
				})
				r := ok(t, post(t, f.m, "sale", card(cardtest.Visa), key...), "SALE", "10.00")
				if !c.failed && (r.Str("transaction_id") != first.Str("transaction_id") || r.Header.Get("Idempotent-Replayed") != "true") {
					t.Errorf("the retry: %s replayed %q, want %s replayed", r.Str("transaction_id"), r.Header.Get("Idempotent-Replayed"),
						first.Str("transaction_id"))
				}
				if n := f.proc.calls.Load(); n != 1 {
					t.Errorf("%d processor calls, want 1", n)
				}
				if rows := f.ledger(t); len(rows) != 1 || rows[0].status != "APPROVED" || rows[0].id != r.Str("transaction_id") {
					t.Errorf("ledger %v, want the one approved sale", rows)
				}
			})
		}
	}
}

package billing_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// logLines returns the log lines of f's server whose message is msg, decoded.
func (f *fixture) logLines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(f.srv.Logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %q", line)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// The billing engine logs each charge it makes, approved or declined: the subscription, its cycle and
// attempt, the amount and currency, the result and the ledger's transaction, with the decline's code
// — and no card data, not even the last four digits.
func TestEngineLogsEachCharge(t *testing.T) {
	t.Parallel()
	start := time.Date(2027, time.June, 1, 10, 0, 0, 0, time.UTC)
	f := newFixture(t, storetest.SQLite(t), start, billing.Config{})
	p := f.plan(t, map[string]any{"name": "Monthly", "amount": "12.34", "currency": "CAD", "frequency": "MONTHLY"})
	good, _ := f.customer(t, cardtest.Visa)
	bad, _ := f.customer(t, cardtest.InsufficientFunds)
	paid := f.subscribe(t, good, map[string]any{"plan_lookup_id": p})
	declined := f.subscribe(t, bad, map[string]any{"plan_lookup_id": p, "amount": "7.50"})
	if n := f.run(t); n != 2 {
		t.Fatalf("charged %d", n)
	}
	f.clock.Advance(24 * time.Hour) // the decline's first retry
	if n := f.run(t); n != 1 {
		t.Fatalf("retried %d", n)
	}

	var got []string
	for _, l := range f.logLines(t, "billing: charge") {
		for k := range l {
			if !slices.Contains([]string{"time", "level", "msg", "subscription", "merchant_id", "cycle", "attempt", "amount", "currency",
				"result", "transaction_id", "decline_code", "message"}, k) {
				t.Errorf("the charge line says %s: %v", k, l)
			}
		}
		if l["level"] != "INFO" || l["merchant_id"] != f.m.ID || len(l["transaction_id"].(string)) != 20 {
			t.Errorf("charge line %v", l)
		}
		s := l["subscription"].(string) + " cycle " + jsonNum(l["cycle"]) + " attempt " + jsonNum(l["attempt"]) + " " +
			l["amount"].(string) + " " + l["currency"].(string) + " " + l["result"].(string)
		if code, ok := l["decline_code"]; ok {
			s += " " + code.(string) + " (" + l["message"].(string) + ")"
		}
		got = append(got, s)
	}
	want := []string{paid + " cycle 0 attempt 1 12.34 CAD APPROVED", declined + " cycle 0 attempt 1 7.50 CAD DECLINED insufficient_funds (Insufficient funds)",
		declined + " cycle 0 attempt 2 7.50 CAD DECLINED insufficient_funds (Insufficient funds)"}
	slices.Sort(got[:min(2, len(got))]) // the first two were due at once, in either order
	slices.Sort(want[:2])
	if !slices.Equal(got, want) {
		t.Fatalf("the charges logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Without SMTP, an engine warns that receipts wait in the outbox as soon as one does, with how many,
// then no more than once an hour while they wait — not at every tick — and says nothing while none
// wait.
func TestEngineWarnsOfReceiptsWaitingForSMTP(t *testing.T) {
	t.Parallel()
	start := time.Date(2027, time.June, 1, 10, 0, 0, 0, time.UTC)
	f := newFixture(t, storetest.SQLite(t), start, billing.Config{})
	const warning = "e-mails (receipts, invitations) wait in the outbox: no SMTP server is configured; start kassa serve with --smtp-url (or KASSA_SMTP_URL) to send them"
	tick := func() {
		t.Helper()
		if n, err := f.eng.Deliver(context.Background()); n != 0 || err != nil {
			t.Fatalf("Deliver without a mailer = %d, %v", n, err)
		}
	}
	tick()
	if w := f.logLines(t, warning); len(w) != 0 {
		t.Fatalf("warned with nothing waiting: %v", w)
	}
	p := f.plan(t, map[string]any{"name": "Monthly", "amount": "5.00", "frequency": "DAILY", "send_receipt": true})
	c, _ := f.customer(t, cardtest.Visa)
	f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
	f.run(t)
	tick()
	// A day of ticks a minute apart, a receipt more at each daily charge.
	for range 24 * 60 {
		f.clock.Advance(time.Minute)
		f.run(t)
		tick()
	}
	w := f.logLines(t, warning)
	if len(w) != 25 || w[0]["level"] != "WARN" || w[0]["waiting"] != 1.0 || w[24]["waiting"] != 2.0 {
		t.Fatalf("%d warnings in a day of ticks, want one at once and one an hour: %v", len(w), w)
	}
}

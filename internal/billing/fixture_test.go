package billing_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// fixture is a server whose billing engine the test drives, with a manual clock, and one merchant.
type fixture struct {
	srv   *servertest.Server
	m     *servertest.Merchant
	clock *clock.Manual
	eng   *billing.Engine
}

func newFixture(t testing.TB, db *store.DB, start time.Time, cfg billing.Config) *fixture {
	t.Helper()
	f := &fixture{clock: clock.NewManual(start)}
	f.srv = servertest.Start(t, db, server.Config{Now: f.clock.Now, NoBillingEngine: true, Billing: cfg})
	f.m = f.srv.NewMerchant(t)
	f.eng = f.srv.Billing()
	return f
}

// do calls the API with a fresh token (the manual clock may have outrun the last one).
func (f *fixture) do(t testing.TB, method, path string, body any) servertest.Response {
	t.Helper()
	f.m.NewToken(t)
	return f.m.Do(t, method, path, body)
}

func (f *fixture) must(t testing.TB, method, path string, body any) servertest.Response {
	t.Helper()
	r := f.do(t, method, path, body)
	if r.Status != 200 {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return r
}

// plan creates a plan.
func (f *fixture) plan(t testing.TB, body map[string]any) string {
	t.Helper()
	return f.must(t, "POST", "/plan-service/plan", body).Str("lookup_id")
}

// customer creates a customer with a card.
func (f *fixture) customer(t testing.TB, pan string) (customer, card string) {
	t.Helper()
	c := f.must(t, "POST", "/customer-service/customer", map[string]any{"email": "ada@example.com", "bcc_emails": "books@example.com"})
	r := f.must(t, "POST", "/customer-service/customer/"+c.Str("lookup_id")+"/card", map[string]any{"card_number": pan,
		"card_expiry_month": "12", "card_expiry_year": "2099"})
	cards := r.Body["cards"].([]any)
	return c.Str("lookup_id"), cards[len(cards)-1].(map[string]any)["lookup_id"].(string)
}

// subscribe subscribes the customer and returns the subscription's lookup id.
func (f *fixture) subscribe(t testing.TB, customer string, body map[string]any) string {
	t.Helper()
	r := f.must(t, "POST", "/customer-service/customer/"+customer+"/subscription", body)
	subs := r.Body["subscriptions"].([]any)
	return subs[len(subs)-1].(map[string]any)["lookup_id"].(string)
}

func (f *fixture) sub(t testing.TB, customer, sub string) servertest.Response {
	t.Helper()
	return f.must(t, "GET", "/customer-service/customer/"+customer+"/subscription/"+sub, nil)
}

// run runs the engine once, failing t on an error.
func (f *fixture) run(t testing.TB) int {
	t.Helper()
	n, err := f.eng.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// charges lists the merchant's RECURRING transactions, oldest first, as "date result amount".
func (f *fixture) charges(t testing.TB, loc *time.Location) []string {
	t.Helper()
	r := f.must(t, "GET", "/transaction-service/transaction?limit=10000", nil)
	var out []string
	es := r.Body["entities"].([]any)
	for i := len(es) - 1; i >= 0; i-- {
		e := es[i].(map[string]any)
		if e["transaction_source"] != "RECURRING" {
			continue
		}
		ms, _ := e["transaction_time"].(interface{ Int64() (int64, error) }).Int64()
		out = append(out, fmt.Sprintf("%s %s %v", time.UnixMilli(ms).In(loc).Format("2006-01-02"), e["transaction_result"], e["amount"]))
	}
	return out
}

func num(r servertest.Response, k string) int64 {
	n, _ := r.Body[k].(interface{ Int64() (int64, error) })
	if n == nil {
		return -1 // null
	}
	v, _ := n.Int64()
	return v
}

// status checks what "kassa billing status" reports now.
func (f *fixture) status(t testing.TB, db *store.DB, want billing.StatusReport) {
	t.Helper()
	got, err := billing.Status(context.Background(), db, f.clock.Now())
	if err != nil || got != want {
		t.Fatalf("billing status %+v, %v; want %+v", got, err, want)
	}
}

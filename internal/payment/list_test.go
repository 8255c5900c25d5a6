package payment_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// ids lists the ids of a list response's entities, in order.
func ids(t *testing.T, r servertest.Response) []string {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("list: %d %s", r.Status, r.Raw)
	}
	var out []string
	for _, e := range r.Body["entities"].([]any) {
		out = append(out, e.(map[string]any)["id"].(interface{ String() string }).String())
	}
	return out
}

func cursor(r servertest.Response, which string) string {
	c, _ := r.Body["paging"].(map[string]any)["cursors"].(map[string]any)[which].(string)
	return c
}

func TestListing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		m := f.m
		day := func(d int) { f.clock.Advance(time.Duration(d) * 24 * time.Hour); m.NewToken(t) }
		start := f.clock.Now().UTC()
		var all []string // ids, oldest first
		add := func(r servertest.Response) { all = append(all, r.Num("id")) }
		add(post(t, m, "sale", card(cardtest.Visa, "amount", "5.00", "email", "Ada@Example.com", "first_name", "Ada", "last_name", "Lovelace")))
		add(post(t, m, "sale", card(cardtest.Declined, "amount", "7.50")))
		day(1)
		add(post(t, m, "authorize", card(cardtest.Mastercard, "amount", "120.00", "first_name", "Grace", "last_name", "Hopper")))
		add(post(t, m, "sale", card(cardtest.Visa, "amount", "99.99", "currency", "USD", "email", "ada@example.com")))
		day(1)
		add(post(t, m, "refund/"+all[0], map[string]any{"amount": "2.00"}))

		newest := func(n []string) []string {
			out := make([]string, 0, len(n))
			for i := len(n) - 1; i >= 0; i-- {
				out = append(out, n[i])
			}
			return out
		}
		list := func(q string) []string {
			get := ids(t, m.Do(t, "GET", "/transaction-service/transaction?"+q, nil))
			posted := ids(t, m.Do(t, "POST", "/transaction-service/transaction?"+q, nil))
			if fmt.Sprint(get) != fmt.Sprint(posted) {
				t.Fatalf("GET and POST disagree for %q: %v vs %v", q, get, posted)
			}
			return get
		}
		expect := func(q string, want ...string) {
			t.Helper()
			if got := list(q); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("list?%s = %v, want %v", q, got, want)
			}
		}
		expect("", newest(all)...)
		expect("limit=10000", newest(all)...)
		expect("limit=2", all[4], all[3])

		// Paging: after the oldest of a page comes the next page; before its newest, the page before.
		page1 := m.Do(t, "GET", "/transaction-service/transaction?limit=2", nil)
		page2 := m.Do(t, "GET", "/transaction-service/transaction?limit=2&after="+url.QueryEscape(cursor(page1, "after")), nil)
		if got := ids(t, page2); fmt.Sprint(got) != fmt.Sprint([]string{all[2], all[1]}) {
			t.Fatalf("page 2 = %v", got)
		}
		page3 := m.Do(t, "GET", "/transaction-service/transaction?limit=2&after="+url.QueryEscape(cursor(page2, "after")), nil)
		if got := ids(t, page3); fmt.Sprint(got) != fmt.Sprint([]string{all[0]}) {
			t.Fatalf("page 3 = %v", got)
		}
		if end := m.Do(t, "GET", "/transaction-service/transaction?limit=2&after="+url.QueryEscape(cursor(page3, "after")), nil); len(ids(t, end)) != 0 || cursor(end, "after") != "" {
			t.Fatalf("past the end: %s", end.Raw)
		}
		back := m.Do(t, "GET", "/transaction-service/transaction?limit=2&before="+url.QueryEscape(cursor(page3, "before")), nil)
		if got := ids(t, back); fmt.Sprint(got) != fmt.Sprint([]string{all[2], all[1]}) {
			t.Fatalf("before page 3 = %v", got)
		}

		d := func(days int) string { return start.AddDate(0, 0, days).Format(time.DateOnly) }
		expect("from_date="+d(1), all[4], all[3], all[2])
		expect("to_date="+d(0), all[1], all[0])
		expect("from_date="+d(1)+"&to_date="+d(1), all[3], all[2])
		expect("transaction_status=DECLINED", all[1])
		expect("transaction_status=approved&limit=1", all[4])
		expect("min_amount=99.99", all[3], all[2])
		expect("min_amount=7&max_amount=100", all[3], all[1])
		expect("email_address=ADA@example.com", all[4], all[3], all[0]) // the refund carries its sale's customer
		expect("first_name=grace", all[2])
		expect("last_name=Lovelace&first_name=Ada", all[4], all[0])

		for _, tc := range []struct{ q, field string }{
			{"limit=0", "limit"}, {"limit=10001", "limit"}, {"limit=ten", "limit"}, {"limit=-1", "limit"},
			{"after=nonsense", "after"}, {"before=dDA", "before"}, {"from_date=2026-13-01", "from_date"},
			{"to_date=yesterday", "to_date"}, {"from_date=2026-02-02&to_date=2026-02-01", "to_date"},
			{"transaction_status=PENDING", "transaction_status"}, {"min_amount=abc", "min_amount"},
			{"max_amount=-1", "max_amount"},
		} {
			r := m.Do(t, "GET", "/transaction-service/transaction?"+tc.q, nil)
			if r.Status != 400 || r.Str("field") != tc.field {
				t.Errorf("list?%s: %d %s; want 400 naming %s", tc.q, r.Status, r.Raw, tc.field)
			}
		}
	})
}

func TestReadOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	sale := ok(t, post(t, f.m, "sale", card(cardtest.Visa)), "SALE", "10.00")
	for _, path := range []string{"/transaction-service/transaction/" + sale.Num("id"),
		"/transaction-service/transaction/" + sale.Str("transaction_id"),
		"/transaction-service/transaction/lookup/" + sale.Str("transaction_id")} {
		r := f.m.Do(t, "GET", path, nil)
		if r.Status != 200 || string(r.Raw) != string(sale.Raw) {
			t.Errorf("GET %s: %d %s; want the sale's response", path, r.Status, r.Raw)
		}
	}
	for _, path := range []string{"/transaction-service/transaction/999999", "/transaction-service/transaction/lookup/" + sale.Num("id"),
		"/transaction-service/transaction/lookup/AAAAAAAAAAAAAAAAAAAA", "/transaction-service/transaction/x"} {
		if r := f.m.Do(t, "GET", path, nil); r.Status != 404 || r.Str("error") != "not_found" {
			t.Errorf("GET %s: %d %s; want 404", path, r.Status, r.Raw)
		}
	}
}

// One merchant never sees or touches another's transactions: every path answers 404, as for an id
// that does not exist.
func TestMerchantIsolation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		other := f.srv.NewMerchant(t)
		sale := ok(t, post(t, f.m, "sale", card(cardtest.Visa, "amount", "40.00")), "SALE", "40.00")
		auth := ok(t, post(t, f.m, "authorize", card(cardtest.Visa, "amount", "40.00")), "AUTHORIZATION", "40.00")
		for _, ref := range []string{sale.Num("id"), sale.Str("transaction_id")} {
			for _, r := range []servertest.Response{
				other.Do(t, "GET", "/transaction-service/transaction/"+ref, nil),
				post(t, other, "refund/"+ref, map[string]any{"amount": "1.00"}),
				post(t, other, "capture/"+auth.Num("id"), nil),
				post(t, other, "void/"+auth.Num("id"), nil),
			} {
				if r.Status != 404 || r.Str("error") != "not_found" {
					t.Errorf("another merchant's transaction: %d %s; want 404", r.Status, r.Raw)
				}
			}
		}
		if r := other.Do(t, "GET", "/transaction-service/transaction/lookup/"+sale.Str("transaction_id"), nil); r.Status != 404 {
			t.Errorf("lookup of another merchant's transaction: %d", r.Status)
		}
		if got := ids(t, other.Do(t, "GET", "/transaction-service/transaction", nil)); len(got) != 0 {
			t.Errorf("another merchant lists %v", got)
		}
		// The owner's transactions are untouched.
		ok(t, post(t, f.m, "refund/"+sale.Num("id"), map[string]any{"amount": "40.00"}), "REFUND", "40.00")
	})
}

func TestListDefaultLimitIs100(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	for range 101 {
		post(t, f.m, "sale", card(cardtest.Visa, "amount", "1.00"))
	}
	page := f.m.Do(t, "GET", "/transaction-service/transaction", nil)
	if got := ids(t, page); len(got) != 100 || got[0] != "101" || got[99] != "2" {
		t.Fatalf("default page has %d entities, from %v to %v", len(got), got[0], got[len(got)-1])
	}
	rest := f.m.Do(t, "GET", "/transaction-service/transaction?after="+url.QueryEscape(cursor(page, "after")), nil)
	if got := ids(t, rest); len(got) != 1 || got[0] != "1" {
		t.Fatalf("second page %v", got)
	}
}

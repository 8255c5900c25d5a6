package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// group is the text of the search results' group id ("" when the page has none): its links' targets
// and texts.
func group(body, id string) string {
	return regexp.MustCompile(`(?s)<section id="` + id + `".*?</section>`).FindString(body)
}

// searchFor is the answer to the search box's query q.
func searchFor(b *browser, q string) (*http.Response, string) {
	b.t.Helper()
	return b.get("/dashboard/search?" + url.Values{"q": {q}}.Encode())
}

// The header's search box finds each kind of object by what a merchant types — a transaction by its
// order ID, its card's last 4 or its customer's e-mail, a customer by the beginning of a name or an
// e-mail, an invoice by its number — grouped by kind with links to the lists filtered alike; an exact
// ID opens its object's page (303). Another merchant's objects, alike in every way, are never found:
// its IDs are answered as IDs of nothing. A role finds only what it may open: sales staff no
// customers, invoices or plans, and only the transactions they made. A query that is empty, too
// long or not text is a 400 that says so. On SQLite and on PostgreSQL.
func TestSearch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		alice := a.pay(t, payment.KindSale, "12.50", cardtest.Visa, map[string]string{"email": "Alice@Example.com", "first_name": "Alice", "order_id": "ORD-77"})
		bob := a.pay(t, payment.KindSale, "9.00", cardtest.Mastercard, map[string]string{"order_id": "ORD-78"})
		jane, cards := a.customer(map[string]any{"email": "jane.roe@example.com", "first_name": "Jane", "last_name": "Roe"}, cardtest.Visa)
		sub := a.subscribeToNewPlan(jane, cards[0], "Monthly box")
		plan := a.call("POST", "/plan-service/plan", map[string]any{"name": "Yearly box", "amount": "90.00", "frequency": "ANNUALLY"})["lookup_id"].(string)
		inv := a.invoice(t, false, oneLine("INV-0042", "CAD", "10.00", "payer@example.com"))
		sales := s.users[user.Sales]
		n, _ := card.ParseNumber(cardtest.Visa)
		exp, _ := card.ParseExpiry("12", "40")
		cad, _ := money.Lookup("CAD")
		own, err := s.srv.Ledger().Charge(context.Background(), payment.Charge{Actor: payment.Actor{MerchantID: s.merchantID, ClientID: "dashboard/" + sales.ID},
			Kind: payment.KindSale, Amount: 700, Currency: cad, Card: n, Expiry: exp, CVV: "123", Source: payment.SourceEcommerce})
		if err != nil {
			t.Fatal(err)
		}
		// Another merchant with the same order, e-mail, customer, invoice number and cards.
		other := s.srv.NewMerchant(t)
		oa := s.api(t, other.ID)
		otherSale := oa.pay(t, payment.KindSale, "12.50", cardtest.Visa, map[string]string{"email": "alice@example.com", "order_id": "ORD-77"})
		otherJane, otherCards := oa.customer(map[string]any{"email": "jane.roe@example.com", "first_name": "Jane", "last_name": "Roe"}, cardtest.Visa)
		otherSub := oa.subscribeToNewPlan(otherJane, otherCards[0], "Monthly box")
		otherInv := oa.invoice(t, false, oneLine("INV-0042", "CAD", "10.00", "payer@example.com"))
		otherIDs := []string{otherSale, otherJane, otherSub, otherInv}

		owner := s.browser(t)
		owner.signIn("owner@maple.example")
		t.Run("by kind", func(t *testing.T) {
			for _, tc := range []struct {
				q, group string
				want     []string // the pages the group links to, in order
				seeAll   string
			}{
				{"ORD-77", "search-transactions", []string{"/dashboard/transactions/" + alice}, "/dashboard/transactions?order=ORD-77"},
				{"4444", "search-transactions", []string{"/dashboard/transactions/" + bob}, "/dashboard/transactions?last4=4444"},
				{"4242", "search-transactions", []string{"/dashboard/transactions/" + own.TransactionID, "/dashboard/transactions/" + alice},
					"/dashboard/transactions?last4=4242"},
				{"alice@example.COM", "search-transactions", []string{"/dashboard/transactions/" + alice}, "/dashboard/transactions?email=alice%40example.COM"},
				{"JAN", "search-customers", []string{"/dashboard/customers/" + jane}, ""},
				{"roe", "search-customers", []string{"/dashboard/customers/" + jane}, ""},
				{"jane r", "search-customers", []string{"/dashboard/customers/" + jane}, ""},
				{"jane.roe@ex", "search-customers", []string{"/dashboard/customers/" + jane}, ""},
				{"INV-0042", "search-invoices", []string{"/dashboard/invoices/" + inv}, "/dashboard/invoices?q=INV-0042"},
				{"payer@example.com", "search-invoices", []string{"/dashboard/invoices/" + inv}, "/dashboard/invoices?q=payer%40example.com"},
			} {
				resp, body := searchFor(owner, tc.q)
				wantStatus(t, "search "+tc.q, resp, body, http.StatusOK)
				g := group(body, tc.group)
				var got []string
				for _, m := range regexp.MustCompile(`<li><a href="([^"]*)"`).FindAllStringSubmatch(regexp.MustCompile(`(?s)<ul class="results">.*?</ul>`).FindString(g), -1) {
					got = append(got, m[1])
				}
				if strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("search %q: %s links to %v, want %v", tc.q, tc.group, got, tc.want)
				}
				if tc.seeAll != "" && !strings.Contains(g, `href="`+strings.ReplaceAll(tc.seeAll, "&", "&amp;")+`"`) {
					t.Errorf("search %q: no link to %s in %s", tc.q, tc.seeAll, g)
				}
				for _, id := range otherIDs {
					if strings.Contains(body, id) {
						t.Errorf("search %q shows another merchant's %s", tc.q, id)
					}
				}
			}
		})
		t.Run("exact IDs", func(t *testing.T) {
			for _, tc := range []struct{ q, page string }{
				{alice, "/dashboard/transactions/" + alice},
				{strings.ToLower(bob), "/dashboard/transactions/" + bob},
				{" " + jane + " ", "/dashboard/customers/" + jane},
				{inv, "/dashboard/invoices/" + inv},
				{plan, "/dashboard/plans/" + plan},
				{sub, "/dashboard/subscriptions/" + jane + "/" + sub},
			} {
				resp, body := searchFor(owner, tc.q)
				if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != tc.page {
					t.Errorf("search %q: %d to %q, want 303 to %s (%s)", tc.q, resp.StatusCode, resp.Header.Get("Location"), tc.page, body)
				}
			}
			// Another merchant's ID is answered as an ID of nothing, word for word.
			for _, tc := range []struct{ theirs, none string }{{otherSale, "AAAAAAAAAAAAAAAAAAAA"}, {otherJane, "AAAAAAAAAA"}, {otherSub, "BBBBBBBBBB"}, {otherInv, "CCCCCCCCCC"}} {
				resp, body := searchFor(owner, tc.theirs)
				_, none := searchFor(owner, tc.none)
				wantStatus(t, "another merchant's "+tc.theirs, resp, body, http.StatusOK)
				if emptyState(body, "search-empty") == "" || scrub(body, tc.theirs) != scrub(none, tc.none) {
					t.Errorf("another merchant's %s is answered otherwise than an ID of nothing:\n%s", tc.theirs, body)
				}
			}
		})
		t.Run("roles", func(t *testing.T) {
			seller := s.browser(t)
			seller.signIn("sales@maple.example")
			for _, q := range []string{"jan", "INV-0042", "ORD-78"} {
				resp, body := searchFor(seller, q)
				wantStatus(t, "sales search "+q, resp, body, http.StatusOK)
				if emptyState(body, "search-empty") == "" || strings.Contains(body, jane) || strings.Contains(body, inv) || strings.Contains(body, bob) {
					t.Errorf("sales staff's search %q finds what they may not open:\n%s", q, body)
				}
			}
			for _, q := range []string{jane, inv, plan, sub, alice} {
				if resp, body := searchFor(seller, q); resp.StatusCode != http.StatusOK || emptyState(body, "search-empty") == "" {
					t.Errorf("sales staff's search for %s: %d, not nothing found", q, resp.StatusCode)
				}
			}
			if resp, _ := searchFor(seller, own.TransactionID); resp.Header.Get("Location") != "/dashboard/transactions/"+own.TransactionID {
				t.Errorf("sales staff's own transaction: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			_, body := searchFor(seller, "4242")
			if g := group(body, "search-transactions"); !strings.Contains(g, own.TransactionID) || strings.Contains(g, alice) {
				t.Errorf("sales staff's search by card finds not only their own transaction:\n%s", g)
			}
			reporting := s.browser(t)
			reporting.signIn("reporting@maple.example")
			if _, body := searchFor(reporting, "jan"); !strings.Contains(group(body, "search-customers"), jane) {
				t.Errorf("the reporting role's search finds no customer:\n%s", body)
			}
		})
		t.Run("bad queries", func(t *testing.T) {
			for _, tc := range []struct{ raw, says string }{
				{"", "Search: type"},
				{"q=", "Search: type"},
				{"q=%20%20", "Search: type"},
				{"q=" + strings.Repeat("x", 201), "at most 200 characters"},
				{"q=%00", "must be text"},
				{"q=%ff", "must be text"},
			} {
				resp, body := owner.get("/dashboard/search?" + tc.raw)
				wantStatus(t, "search "+tc.raw, resp, body, http.StatusBadRequest)
				if !strings.Contains(body, tc.says) || !strings.Contains(body, `role="alert"`) {
					t.Errorf("search %q does not say %q:\n%s", tc.raw, tc.says, body)
				}
			}
			// 200 characters are a query.
			resp, body := searchFor(owner, strings.Repeat("x", 200))
			wantStatus(t, "a query of 200 characters", resp, body, http.StatusOK)
		})
		t.Run("header", func(t *testing.T) {
			_, page := owner.get("/dashboard/transactions")
			form := regexp.MustCompile(`(?s)<form class="search" role="search" method="get" action="/dashboard/search"[^>]*>.*?</form>`).FindString(page)
			if !strings.Contains(form, `<label class="visually-hidden" for="search-q">`) || !strings.Contains(form, `id="search-q" name="q"`) {
				t.Errorf("no labelled search box in the header:\n%s", page)
			}
			_, body := searchFor(owner, "jan")
			if !strings.Contains(body, `id="search-q" name="q" type="search" maxlength="200" placeholder="Search" value="jan"`) {
				t.Errorf("the results page's search box does not hold the query")
			}
		})
	})
}

// scrub is a page with id and the request's own ids (nonces, CSRF tokens, request ids) taken out.
func scrub(body, id string) string {
	body = strings.ReplaceAll(body, id, "ID")
	return regexp.MustCompile(`(nonce|value|content)="[^"]*"`).ReplaceAllString(body, `$1=""`)
}

// The search box on a large merchant: 100,000 transactions and 100,000 customers, each query a page
// over real HTTP (session, reads, rendering), on SQLite and on PostgreSQL. Every match is read through
// an index that begins with the merchant, so the time does not grow with the merchant's rows.
func BenchmarkSearch(b *testing.B) {
	const n = 100_000
	for _, backend := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		b.Run(backend.name, func(b *testing.B) {
			db := backend.open(b)
			s := newShop(b, db, server.Config{})
			sale := s.api(b, s.merchantID).pay(b, payment.KindSale, "12.50", cardtest.Visa, nil)
			ctx := context.Background()
			// In writes of 10,000 rows, each well within the store's time for one.
			for from := 0; from < n; from += 10_000 {
				err := db.Write(ctx, func(tx *store.Tx) error {
					if _, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT $2 + 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2 + 10000)
						INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount, currency, scale, source, card_prefix, card_suffix,
						email, first_name, last_name, order_id, created_at, updated_at)
						SELECT 'B' || i, $1, 'SALE', 'APPROVED', 100 + i, 'CAD', 2, 'E_COMMERCE', '424242', CAST(1000 + i % 9000 AS TEXT),
						'buyer' || (i % 20000) || '@example.com', 'Given' || (i % 20000), 'Family' || (i % 20000), 'O-' || i, i, i FROM n`,
						s.merchantID, from); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT $2 + 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2 + 10000)
						INSERT INTO customers (lookup_id, merchant_id, email, first_name, last_name, created_at, updated_at)
						SELECT 'C' || i, $1, 'buyer' || i || '@example.com', 'Given' || i, 'Family' || i, i, i FROM n`, s.merchantID, from)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if _, err := db.Raw().ExecContext(ctx, "ANALYZE"); err != nil {
				b.Fatal(err)
			}
			br := s.browser(b)
			br.signIn("owner@maple.example")
			for _, q := range []struct{ name, q string }{
				{"order", "O-77777"},
				{"last4", "1077"},
				{"email", "buyer77@example.com"},
				{"name", "given7777"},
				{"common-name", "given"},
				{"transaction-id", sale},
				{"nothing", "no such thing"},
			} {
				b.Run(q.name, func(b *testing.B) {
					for b.Loop() {
						if resp, body := searchFor(br, q.q); resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther {
							b.Fatalf("search %q: %d %s", q.q, resp.StatusCode, body)
						}
					}
				})
			}
		})
	}
}

// Whatever the search box is sent — bytes no database keeps, IDs of any length and case, quotes,
// wildcards, the highest code points — is answered as a page that says what was found (200), the
// object's page (303), or what is wrong with the query (400): never a 5xx.
func FuzzSearch(f *testing.F) {
	for _, q := range []string{"", " ", "ORD-1", "4242", "a@b", "jane roe", "%", "_", "'", "\x00", "\xff", "\U0010FFFF",
		"AAAAAAAAAA", "aaaaaaaaaaaaaaaaaaaa", strings.Repeat("é", 201)} {
		f.Add(q)
	}
	s := newShop(f, storetest.SQLite(f), server.Config{})
	owner := s.browser(f)
	owner.signIn("owner@maple.example")
	f.Fuzz(func(t *testing.T, q string) {
		owner.t = t
		resp, body := searchFor(owner, q)
		switch resp.StatusCode {
		case http.StatusOK, http.StatusSeeOther, http.StatusBadRequest:
		default:
			t.Fatalf("search %q: %d\n%s", q, resp.StatusCode, body)
		}
		if trimmed := strings.TrimSpace(q); resp.StatusCode == http.StatusBadRequest && trimmed != "" && utf8.ValidString(trimmed) &&
			!strings.Contains(trimmed, "\x00") && utf8.RuneCountInString(trimmed) <= 200 {
			t.Fatalf("search %q refused:\n%s", q, body)
		}
	})
}

package dashboard_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// pay makes a sale or authorization through the gateway API with the customer fields given and
// returns its transaction_id.
func (a *api) pay(t testing.TB, kind, amount, number string, fields map[string]string) string {
	t.Helper()
	body := map[string]string{"amount": amount, "currency": "CAD", "card_number": number, "card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"}
	for k, v := range fields {
		body[k] = v
	}
	path := "/transaction-service/sale"
	if kind == payment.KindAuthorization {
		path = "/transaction-service/authorize"
	}
	r := a.do(t, "POST", path, body)
	if r.Status != http.StatusOK {
		t.Fatalf("%s: %d %s", path, r.Status, r.Raw)
	}
	return r.Str("transaction_id")
}

// get reads a transaction through the API.
func (a *api) get(t testing.TB, id string) servertest.Response {
	t.Helper()
	return a.do(t, "GET", "/transaction-service/transaction/"+id, nil)
}

// listed are the transaction ids a list page links to, in order.
func listed(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`href="/dashboard/transactions/([A-Z2-7]{20})"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// The list's filters each select what they say, newest first; a bad filter is a 400 that names the
// field; paging goes older and back newer; sales staff list only what they made, and another's
// transaction (or another merchant's) is not found.
func TestTransactionsListFilters(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		alice := a.pay(t, payment.KindSale, "12.50", cardtest.Visa, map[string]string{"email": "Alice@Example.com", "first_name": "Alice", "last_name": "Moreau", "order_id": "A-1"})
		bob := a.pay(t, payment.KindSale, "99.00", cardtest.Mastercard, map[string]string{"email": "bob@example.com", "first_name": "Bob", "last_name": "Alice"})
		auth := a.pay(t, payment.KindAuthorization, "40.00", cardtest.Visa, nil)
		declined := a.pay(t, payment.KindSale, "5.00", cardtest.Declined, nil)
		// A sale the sales user made (as the virtual terminal records it).
		sales := s.users[user.Sales]
		n, _ := card.ParseNumber(cardtest.Visa)
		exp, _ := card.ParseExpiry("12", "40")
		cad, _ := money.Lookup("CAD")
		own, err := s.srv.Ledger().Charge(context.Background(), payment.Charge{Actor: payment.Actor{MerchantID: s.merchantID, ClientID: "dashboard/" + sales.ID},
			Kind: payment.KindSale, Amount: 700, Currency: cad, Card: n, Expiry: exp, CVV: "123", Source: payment.SourceEcommerce})
		if err != nil {
			t.Fatal(err)
		}

		b := s.browser(t)
		b.signIn("reporting@maple.example")
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"", []string{own.TransactionID, declined, auth, bob, alice}},
			{"email=alice@example.COM", []string{alice}},
			{"name=alice", []string{bob, alice}}, // Bob's last name is Alice
			{"name=MOREAU", []string{alice}},
			{"last4=4444", []string{bob}},
			{"first6=424242&last4=4242", []string{own.TransactionID, auth, alice}},
			{"type=AUTHORIZATION", []string{auth}},
			{"result=DECLINED", []string{declined}},
			{"min=40&max=99", []string{auth, bob}},
			{"order=A-1", []string{alice}},
			{"id=" + strings.ToLower(bob), []string{bob}},
			{"from=2000-01-01&to=2999-12-31&last4=4242", []string{own.TransactionID, auth, alice}},
			{"to=2000-01-01", nil},
		} {
			resp, body := b.get("/dashboard/transactions?" + tc.query)
			wantStatus(t, tc.query, resp, body, http.StatusOK)
			if got := listed(body); !slices.Equal(got, tc.want) {
				t.Errorf("?%s lists %v, want %v", tc.query, got, tc.want)
			}
		}
		for _, tc := range []struct{ query, field, says string }{
			{"from=23/11/2026", "from", "From must be a date"},
			{"from=2026-11-23&to=2026-11-01", "to", "To must not be before From"},
			{"last4=42", "last4", "Card last 4 must be four digits"},
			{"first6=4242x2", "first6", "Card first 6 must be six digits"},
			{"min=1.00001", "min", "Minimum amount"},
			{"min=5&max=1", "max", "Maximum amount must not be below"},
			{"type=REFUNDS", "type", "Type must be one of"},
			{"result=OK", "result", "Result must be APPROVED or DECLINED"},
			{"id=nope", "id", "Transaction ID must be"},
		} {
			resp, body := b.get("/dashboard/transactions?" + tc.query)
			wantStatus(t, tc.query, resp, body, http.StatusBadRequest)
			if !strings.Contains(body, tc.says) || !strings.Contains(body, `name="`+tc.field+`"`) ||
				!regexp.MustCompile(`name="`+tc.field+`"[^>]*aria-invalid="true"`).MatchString(body) {
				t.Errorf("?%s: the page does not name %s: %s", tc.query, tc.field, body)
			}
		}

		// Sales staff: their own only; another's is not found.
		sb := s.browser(t)
		sb.signIn("sales@maple.example")
		_, body := sb.get("/dashboard/transactions")
		if got := listed(body); !slices.Equal(got, []string{own.TransactionID}) {
			t.Errorf("the sales user lists %v", got)
		}
		resp, body := sb.get("/dashboard/transactions/" + alice)
		wantStatus(t, "sales opens another's transaction", resp, body, http.StatusNotFound)
		resp, body = sb.get("/dashboard/transactions/" + own.TransactionID)
		wantStatus(t, "sales opens its own transaction", resp, body, http.StatusOK)

		// Another merchant's transaction is not found.
		other := s.srv.NewMerchant(t)
		r := other.Do(t, "POST", "/transaction-service/sale", map[string]string{"amount": "1.00", "currency": "CAD", "card_number": cardtest.Visa,
			"card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"})
		resp, body = b.get("/dashboard/transactions/" + r.Str("transaction_id"))
		wantStatus(t, "another merchant's transaction", resp, body, http.StatusNotFound)
	})
}

// Paging, on both backends: 50 a page, Older then Newer return to the first page; a date-bounded list
// pages the same.
func TestTransactionsPaging(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		var all []string
		for i := range 53 {
			all = append(all, a.pay(t, payment.KindSale, fmt.Sprintf("%d.00", i+1), cardtest.Visa, nil))
		}
		slices.Reverse(all)
		b := s.browser(t)
		b.signIn("owner@maple.example")
		for _, base := range []string{"", "from=2000-01-01&"} {
			_, first := b.get("/dashboard/transactions?" + base)
			if got := listed(first); !slices.Equal(got, all[:50]) {
				t.Fatalf("%s first page: %v", base, got)
			}
			older := regexp.MustCompile(`href="/dashboard/transactions\?([^"]+)" rel="next"`).FindStringSubmatch(first)
			if older == nil || strings.Contains(first, `rel="prev"`) {
				t.Fatalf("%s first page's links: %s", base, first)
			}
			_, second := b.get("/dashboard/transactions?" + strings.ReplaceAll(older[1], "&amp;", "&"))
			if got := listed(second); !slices.Equal(got, all[50:]) || strings.Contains(second, `rel="next"`) {
				t.Fatalf("%s second page: %v", base, got)
			}
			newer := regexp.MustCompile(`href="/dashboard/transactions\?([^"]+)" rel="prev"`).FindStringSubmatch(second)
			if newer == nil {
				t.Fatalf("%s no Newer link on the second page", base)
			}
			_, back := b.get("/dashboard/transactions?" + strings.ReplaceAll(newer[1], "&amp;", "&"))
			if got := listed(back); !slices.Equal(got, all[:50]) || strings.Contains(back, `rel="prev"`) {
				t.Fatalf("%s back to the first page: %v", base, got)
			}
		}
	})
}

// confirmFollowUp posts a follow-up form of a transaction's page, then its confirmation, as a browser
// without script does, and returns the confirmation's response.
func confirmFollowUp(t *testing.T, b *browser, csrf, id, action, amount, key string) (*http.Response, string) {
	t.Helper()
	form := url.Values{"csrf_token": {csrf}, "key": {key}, "amount": {amount}}
	resp, body := b.post("/dashboard/transactions/"+id+"/"+action, form)
	wantStatus(t, action+" asks to confirm", resp, body, http.StatusOK)
	if !strings.Contains(body, `id="confirm-form"`) {
		t.Fatalf("%s: no confirmation: %s", action, body)
	}
	form.Set("confirm", "yes")
	return b.post("/dashboard/transactions/"+id+"/"+action, form)
}

// refunded sums the approved refunds of a sale in the ledger.
func refunded(t *testing.T, db *store.DB, id string) (sum int64, n int) {
	t.Helper()
	if err := db.Reader().QueryRowContext(context.Background(), `SELECT COALESCE(SUM(amount), 0), COUNT(*) FROM transactions
		WHERE parent_transaction_id = $1 AND kind = 'REFUND' AND status = 'APPROVED'`, id).Scan(&sum, &n); err != nil {
		t.Fatal(err)
	}
	return sum, n
}

// A partial refund from the detail page, behind a confirmation: submitted twice and reloaded, it moves
// money once (the ledger holds one refund); what remains is shown, and the audit trail names the
// refund and the admin who made it; a refund beyond it is refused on the form itself, before a
// confirmation, and with the API's sentence when confirmed anyway, never a 500; a capture beyond the
// authorized is refused likewise; a capture of part of an authorization, then a second capture, is
// refused; a void of another authorization closes it with one VOID, and a second void moves nothing.
// Reporting and sales get 403 on these POSTs; another merchant's transaction is not found.
func TestTransactionActions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		sale := a.pay(t, payment.KindSale, "100.00", cardtest.Visa, map[string]string{"email": "carol@example.com"})
		b := s.browser(t)
		csrf := b.signIn("admin@maple.example")
		_, page := b.get("/dashboard/transactions/" + sale)
		if !strings.Contains(page, "CA$100.00 remains to refund") {
			t.Fatalf("the sale's page: %s", page)
		}
		key := signintest.Field(t, page[strings.Index(page, `id="refund-form"`):], "key")
		var refundID string
		for i := range 3 { // a double submit, then a reload of the confirmation's POST
			resp, body := confirmFollowUp(t, b, csrf, sale, "refund", "30.00", key)
			wantStatus(t, fmt.Sprintf("refund, submission %d", i+1), resp, body, http.StatusSeeOther)
			id := strings.TrimPrefix(strings.Split(resp.Header.Get("Location"), "?")[0], "/dashboard/transactions/")
			if refundID != "" && id != refundID {
				t.Fatalf("submission %d of one refund form lands on %s, the first on %s", i+1, id, refundID)
			}
			refundID = id
		}
		if r := a.get(t, refundID); r.Str("transaction_type") != "REFUND" || r.Num("amount") != "30.00" || r.Str("original_transaction_id") != sale {
			t.Fatalf("the refund through the API: %s", r.Raw)
		}
		if sum, n := refunded(t, db, sale); sum != 3000 || n != 1 {
			t.Fatalf("after three submissions of one refund form: %d refunds of %d", n, sum)
		}
		if r := a.get(t, sale); r.Status != 200 {
			t.Fatalf("the API's sale: %d", r.Status)
		}
		_, page = b.get("/dashboard/transactions/" + sale)
		if !strings.Contains(page, "CA$70.00 remains to refund") {
			t.Fatalf("the sale's page after the refund: %s", page)
		}
		// The trail records what was done to the sale, and by whom: the API client's sale, and the one
		// refund of the admin's three submissions.
		rows := trail(t, page)
		if len(rows) != 2 || !strings.HasPrefix(rows[0][0], "API client ") || rows[0][1] != "sale "+sale+" CA$100.00 (Approved)" ||
			rows[1] != [3]string{"admin@maple.example", "refund " + refundID + " CA$30.00 (Approved)", "approved"} {
			t.Fatalf("the sale's audit trail after the refund: %q", rows)
		}
		// A new form: more than remains is refused on the form itself, beside the field, before any
		// confirmation is asked for; a confirmation sent anyway (a stale page) is refused by the ledger.
		key = signintest.Field(t, page[strings.Index(page, `id="refund-form"`):], "key")
		form := url.Values{"csrf_token": {csrf}, "key": {key}, "amount": {"70.01"}}
		resp, body := b.post("/dashboard/transactions/"+sale+"/refund", form)
		wantStatus(t, "a refund beyond what remains, before its confirmation", resp, body, http.StatusConflict)
		if !strings.Contains(body, "The refund of CA$70.01 exceeds the CA$70.00 that remains refundable.") || strings.Contains(body, `id="confirm-form"`) ||
			!regexp.MustCompile(`id="refund-amount"[^>]*aria-invalid="true"`).MatchString(body) {
			t.Fatalf("the refusal on the form: %s", body)
		}
		form.Set("confirm", "yes")
		resp, body = b.post("/dashboard/transactions/"+sale+"/refund", form)
		wantStatus(t, "a refund beyond what remains, confirmed", resp, body, http.StatusConflict)
		if !strings.Contains(body, "exceeds the 70.00 that remains refundable") || !strings.Contains(body, `role="alert"`) {
			t.Fatalf("the refusal: %s", body)
		}
		if sum, _ := refunded(t, db, sale); sum != 3000 {
			t.Fatalf("the refused refund moved money: %d", sum)
		}
		// A bad amount is named.
		resp, body = b.post("/dashboard/transactions/"+sale+"/refund", url.Values{"csrf_token": {csrf}, "key": {"k-bad"}, "amount": {"1.001"}})
		wantStatus(t, "a refund of 1.001", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "Amount ") || !regexp.MustCompile(`id="refund-amount"[^>]*aria-invalid="true"`).MatchString(body) {
			t.Fatalf("the bad amount's page: %s", body)
		}

		// Capture part of an authorization; the second capture is refused.
		auth := a.pay(t, payment.KindAuthorization, "80.00", cardtest.Visa, nil)
		resp, body = b.post("/dashboard/transactions/"+auth+"/capture", url.Values{"csrf_token": {csrf}, "key": {"k-capture-0"}, "amount": {"80.01"}})
		wantStatus(t, "a capture beyond the authorized, before its confirmation", resp, body, http.StatusConflict)
		if !strings.Contains(body, "The capture of CA$80.01 exceeds the CA$80.00 that is authorized.") || strings.Contains(body, `id="confirm-form"`) {
			t.Fatalf("the capture's refusal on the form: %s", body)
		}
		resp, body = confirmFollowUp(t, b, csrf, auth, "capture", "50.00", "k-capture-1")
		wantStatus(t, "capture", resp, body, http.StatusSeeOther)
		capture := strings.TrimPrefix(strings.Split(resp.Header.Get("Location"), "?")[0], "/dashboard/transactions/")
		if r := a.get(t, capture); r.Str("transaction_type") != "CAPTURE" || r.Num("amount") != "50.00" || r.Str("original_transaction_id") != auth {
			t.Fatalf("the capture through the API: %s", r.Raw)
		}
		resp, body = b.get(resp.Header.Get("Location"))
		if !strings.Contains(body, "The capture was approved.") || !strings.Contains(body, `href="/dashboard/transactions/`+auth+`"`) {
			t.Fatalf("the capture's page: %s", body)
		}
		resp, body = confirmFollowUp(t, b, csrf, auth, "capture", "10.00", "k-capture-2")
		wantStatus(t, "a second capture", resp, body, http.StatusConflict)
		if !strings.Contains(body, "already been captured") {
			t.Fatalf("the second capture's refusal: %s", body)
		}
		// A void: the ledger closes the authorization with one approved VOID, which the API shows; the
		// form sent again lands on the same void, and a second void (a new form) is refused and moves
		// nothing, as is a capture of what was voided.
		hold := a.pay(t, payment.KindAuthorization, "20.00", cardtest.Visa, nil)
		resp, body = confirmFollowUp(t, b, csrf, hold, "void", "", "k-void")
		wantStatus(t, "void", resp, body, http.StatusSeeOther)
		void := strings.TrimPrefix(strings.Split(resp.Header.Get("Location"), "?")[0], "/dashboard/transactions/")
		if r := a.get(t, void); r.Str("transaction_type") != "VOID" || r.Str("transaction_result") != "APPROVED" || r.Str("original_transaction_id") != hold {
			t.Fatalf("the void through the API: %s", r.Raw)
		}
		voided := func() (closedBy string, voids int) {
			t.Helper()
			if err := db.Reader().QueryRowContext(context.Background(), `SELECT COALESCE(closed_by, ''),
				(SELECT COUNT(*) FROM transactions WHERE parent_transaction_id = $1 AND kind = 'VOID' AND status = 'APPROVED')
				FROM transactions WHERE transaction_id = $1`, hold).Scan(&closedBy, &voids); err != nil {
				t.Fatal(err)
			}
			return closedBy, voids
		}
		if closedBy, n := voided(); closedBy != "VOID" || n != 1 {
			t.Fatalf("after the void the authorization is closed by %q with %d voids", closedBy, n)
		}
		resp, body = confirmFollowUp(t, b, csrf, hold, "void", "", "k-void")
		wantStatus(t, "the void sent again", resp, body, http.StatusSeeOther)
		if again := strings.TrimPrefix(strings.Split(resp.Header.Get("Location"), "?")[0], "/dashboard/transactions/"); again != void {
			t.Fatalf("the void sent again lands on %s, not %s", again, void)
		}
		resp, body = confirmFollowUp(t, b, csrf, hold, "void", "", "k-void-2")
		wantStatus(t, "a second void", resp, body, http.StatusConflict)
		if !strings.Contains(body, "has been voided") {
			t.Fatalf("the second void's refusal: %s", body)
		}
		if r := a.do(t, "POST", "/transaction-service/capture/"+hold, map[string]string{"amount": "20.00"}); r.Status != http.StatusConflict {
			t.Fatalf("a capture of the voided authorization: %d %s", r.Status, r.Raw)
		}
		if closedBy, n := voided(); closedBy != "VOID" || n != 1 {
			t.Fatalf("after a second void the authorization is closed by %q with %d voids", closedBy, n)
		}
		_, body = b.get("/dashboard/transactions/" + hold)
		if strings.Contains(body, `id="void-form"`) || strings.Contains(body, `id="capture-form"`) || !strings.Contains(body, void) {
			t.Fatalf("the voided authorization's page: %s", body)
		}

		// Reporting and sales may not; another merchant's transaction is not found.
		for _, role := range []user.Role{user.Reporting, user.Sales} {
			rb := s.browser(t)
			rcsrf := rb.signIn(string(role) + "@maple.example")
			for _, action := range []string{"refund", "capture", "void"} {
				resp, body := rb.post("/dashboard/transactions/"+sale+"/"+action, url.Values{"csrf_token": {rcsrf}, "key": {"k-" + action},
					"amount": {"1.00"}, "confirm": {"yes"}})
				wantStatus(t, string(role)+" "+action, resp, body, http.StatusForbidden)
			}
			_, page := rb.get("/dashboard/transactions/" + sale)
			if strings.Contains(page, `id="refund-form"`) {
				t.Errorf("%s is shown the refund form", role)
			}
		}
		if sum, n := refunded(t, db, sale); sum != 3000 || n != 1 {
			t.Fatalf("after the refused roles: %d refunds of %d", n, sum)
		}
		other := s.srv.NewMerchant(t)
		r := other.Do(t, "POST", "/transaction-service/sale", map[string]string{"amount": "1.00", "currency": "CAD", "card_number": cardtest.Visa,
			"card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"})
		resp, body = confirmFollowUp404(t, b, csrf, r.Str("transaction_id"))
		wantStatus(t, "a refund of another merchant's sale", resp, body, http.StatusNotFound)
	})
}

func confirmFollowUp404(t *testing.T, b *browser, csrf, id string) (*http.Response, string) {
	t.Helper()
	return b.post("/dashboard/transactions/"+id+"/refund", url.Values{"csrf_token": {csrf}, "key": {"k"}, "amount": {"1.00"}, "confirm": {"yes"}})
}

// exportRows reads an export: its header and rows.
func exportRows(t *testing.T, b *browser, query string) ([]string, [][]string) {
	t.Helper()
	resp, body := b.get("/dashboard/transactions/export.csv?" + query)
	wantStatus(t, "export", resp, body, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export headers: %v", resp.Header)
	}
	if !strings.Contains(body, "\r\n") || strings.Count(body, "\n") != strings.Count(body, "\r\n") {
		t.Fatal("the export's lines do not end in CRLF")
	}
	records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(records) == 0 {
		t.Fatalf("the export is not CSV (%v): %q", err, body)
	}
	if resp.Header.Get("Kassa-Export-Rows") != fmt.Sprint(len(records)-1) {
		t.Errorf("Kassa-Export-Rows %s for %d rows", resp.Header.Get("Kassa-Export-Rows"), len(records)-1)
	}
	return records[0], records[1:]
}

// apiRows is the API's list for query, every page of it, as rows of the export's columns.
func apiRows(t *testing.T, a *api, query string, columns []string) [][]string {
	t.Helper()
	var out [][]string
	for after := ""; ; {
		q := query + "&limit=7"
		if after != "" {
			q += "&after=" + after
		}
		r := a.do(t, "GET", "/transaction-service/transaction?"+q, nil)
		if r.Status != 200 {
			t.Fatalf("the API's list: %d %s", r.Status, r.Raw)
		}
		entities, _ := r.Body["entities"].([]any)
		for _, e := range entities {
			obj := e.(map[string]any)
			var row []string
			for _, c := range columns {
				switch v := obj[c].(type) {
				case nil:
					row = append(row, "")
				case json.Number:
					row = append(row, v.String())
				case bool:
					row = append(row, fmt.Sprint(v))
				case string:
					row = append(row, v)
				default:
					t.Fatalf("field %s is %T", c, v)
				}
			}
			out = append(out, row)
		}
		if len(entities) < 7 {
			return out
		}
		after = r.Body["paging"].(map[string]any)["cursors"].(map[string]any)["after"].(string)
	}
}

// The CSV export of a filter equals the API's list of the same filter, row for row and field for
// field, its header naming the API's fields; sales staff export their own only.
func TestExportEqualsAPIList(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		for i := range 20 {
			email := []string{"dana@example.com", "eve@example.com"}[i%2]
			number := []string{cardtest.Visa, cardtest.Declined, cardtest.Mastercard}[i%3]
			a.pay(t, payment.KindSale, fmt.Sprintf("%d.%02d", 10+i, i), number, map[string]string{"email": email, "first_name": "Dana, \"D\"",
				"description": "line one\nline two", "order_id": fmt.Sprint("O-", i)})
		}
		auth := a.pay(t, payment.KindAuthorization, "30.00", cardtest.Visa, map[string]string{"email": "dana@example.com"})
		if r := a.do(t, "POST", "/transaction-service/capture/"+auth, map[string]string{"amount": "12.00"}); r.Status != 200 {
			t.Fatal(r.Status, string(r.Raw))
		}
		b := s.browser(t)
		b.signIn("reporting@maple.example")
		for _, tc := range []struct{ dashboard, api string }{
			{"", ""},
			{"email=dana@example.com", "email_address=dana@example.com"},
			{"result=APPROVED&min=12&max=25.5", "transaction_status=APPROVED&min_amount=12&max_amount=25.5"},
		} {
			header, rows := exportRows(t, b, tc.dashboard)
			if header[0] != "id" || header[1] != "transaction_id" || !slices.Contains(header, "original_transaction_id") || !slices.Contains(header, "description") {
				t.Fatalf("header %v", header)
			}
			want := apiRows(t, a, tc.api, header)
			if len(rows) == 0 || !slices.EqualFunc(rows, want, slices.Equal[[]string]) {
				t.Fatalf("?%s: the export (%d rows) differs from the API's list (%d rows):\n%q\n%q", tc.dashboard, len(rows), len(want), rows, want)
			}
		}
		sb := s.browser(t)
		sb.signIn("sales@maple.example")
		if _, rows := exportRows(t, sb, ""); len(rows) != 0 {
			t.Fatalf("the sales user exports %d rows of others", len(rows))
		}
		resp, body := b.get("/dashboard/transactions/export.csv?last4=12")
		wantStatus(t, "an export with a bad filter", resp, body, http.StatusBadRequest)
	})
}

// A transaction's page shows the chain (authorization → captures → refunds or void), the processor
// and its reference, the audit trail, and the 3-D Secure outcome where there was one:
// from the capture in the middle of a chain, the page lists the authorization, the capture and the
// refund; the authorization's page says its cardholder passed a 3-D Secure challenge and names the
// processor's reference; the capture's says there was no challenge; each has its audit trail.
func TestTransactionDetail(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := context.Background()
		l := s.srv.Ledger()
		n, _ := card.ParseNumber(cardtest.Visa)
		exp, _ := card.ParseExpiry("12", "40")
		cad, _ := money.Lookup("CAD")
		who := payment.Actor{MerchantID: s.merchantID, ClientID: "dashboard/" + s.users[user.Owner].ID}
		auth, err := l.Charge(ctx, payment.Charge{Actor: who, Kind: payment.KindAuthorization, Amount: 4000, Currency: cad, Card: n, Expiry: exp,
			CVV: "123", Authentication: processor.AuthenticationSucceeded, Source: payment.SourceEcommerce})
		if err != nil || auth.Status != payment.StatusApproved || auth.ProcessorRef == "" {
			t.Fatalf("the authorization: %+v, %v", auth, err)
		}
		capture, err := l.Capture(ctx, payment.FollowUp{Actor: who, ParentID: auth.ID, Amount: 2500})
		if err != nil || capture.Status != payment.StatusApproved {
			t.Fatalf("the capture: %+v, %v", capture, err)
		}
		refund, err := l.Refund(ctx, payment.FollowUp{Actor: who, ParentID: capture.ID, Amount: 1000})
		if err != nil || refund.Status != payment.StatusApproved {
			t.Fatalf("the refund: %+v, %v", refund, err)
		}

		b := s.browser(t)
		b.signIn("reporting@maple.example")
		resp, page := b.get("/dashboard/transactions/" + capture.TransactionID)
		wantStatus(t, "the capture's page", resp, page, http.StatusOK)
		chain := page[strings.Index(page, `id="chain"`):]
		chain = chain[:strings.Index(chain, "</table>")]
		for _, tx := range []payment.Transaction{auth, capture, refund} {
			if !strings.Contains(chain, tx.TransactionID) {
				t.Errorf("the chain lacks the %s %s:\n%s", tx.Kind, tx.TransactionID, chain)
			}
		}
		if !strings.Contains(page, `id="three-d-secure">No challenge<`) || !strings.Contains(page, `id="trail"`) {
			t.Errorf("the capture's page: %s", page)
		}
		_, page = b.get("/dashboard/transactions/" + auth.TransactionID)
		if !strings.Contains(page, `id="three-d-secure">Challenged; the cardholder passed<`) || !strings.Contains(page, auth.ProcessorRef) ||
			!strings.Contains(page, `id="processor"`) || !strings.Contains(page, `id="trail"`) {
			t.Errorf("the authorization's page: %s", page)
		}
	})
}

// trail reads the rows of a transaction page's audit trail: who, what, outcome.
func trail(t *testing.T, page string) [][3]string {
	t.Helper()
	i := strings.Index(page, `<table id="trail"`)
	if i < 0 {
		t.Fatalf("the page has no audit trail: %s", page)
	}
	table := page[i : i+strings.Index(page[i:], "</table>")]
	var rows [][3]string
	// What is done names its transaction by a link, read as its text.
	tags := regexp.MustCompile(`<[^>]+>`)
	for _, m := range regexp.MustCompile(`<tr><td>[^<]*</td><td>([^<]*)</td><td>(.*?)</td><td>([^<]*)</td><td>[^<]*</td></tr>`).FindAllStringSubmatch(table, -1) {
		rows = append(rows, [3]string{html.UnescapeString(m[1]), html.UnescapeString(tags.ReplaceAllString(m[2], "")), m[3]})
	}
	return rows
}

// The date filter's days are the merchant's, in its time zone: for a merchant in Pacific/Auckland, a
// sale a minute before its local midnight falls on the
// day before and one a minute after on the day of, although both are on the same day in UTC (about
// 11:00 UTC, so a filter read in UTC would put them both on the other side). The list shows the times
// in the merchant's zone.
func TestTransactionsDateRangeInMerchantZone(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := &clock{t: time.Now()}
		s := newShop(t, db, server.Config{Now: clk.Now})
		const zone = "Pacific/Auckland"
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Write(context.Background(), func(tx *store.Tx) error {
			_, err := merchant.ApplyUpdate(context.Background(), tx, s.merchantID, merchant.Update{Timezone: new(zone)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		a := s.api(t, s.merchantID)
		y, m, d := time.Now().In(loc).Date()
		midnight := time.Date(y, m, d-1, 0, 0, 0, 0, loc) // yesterday's, in Auckland: in the past
		dayBefore, day := midnight.AddDate(0, 0, -1).Format(time.DateOnly), midnight.Format(time.DateOnly)
		clk.Set(midnight.Add(-time.Minute))
		before := a.pay(t, payment.KindSale, "11.00", cardtest.Visa, nil)
		clk.Set(midnight.Add(time.Minute))
		after := a.pay(t, payment.KindSale, "12.00", cardtest.Visa, nil)
		if ub, ua := midnight.Add(-time.Minute).UTC(), midnight.Add(time.Minute).UTC(); ub.YearDay() != ua.YearDay() {
			t.Fatalf("the two sales are on different UTC days (%v, %v): the test would not tell the zones apart", ub, ua)
		}
		clk.Set(time.Now())

		b := s.browser(t)
		b.signIn("reporting@maple.example")
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"from=" + day + "&to=" + day, []string{after}},
			{"from=" + day, []string{after}},
			{"to=" + dayBefore, []string{before}},
			{"from=" + dayBefore + "&to=" + dayBefore, []string{before}},
			{"from=" + dayBefore + "&to=" + day, []string{after, before}},
			{"from=" + midnight.AddDate(0, 0, 1).Format(time.DateOnly), nil},
		} {
			resp, body := b.get("/dashboard/transactions?" + tc.query)
			wantStatus(t, tc.query, resp, body, http.StatusOK)
			if got := listed(body); !slices.Equal(got, tc.want) {
				t.Errorf("?%s lists %v, want %v (the sale at 23:59 is %s, the one at 00:01 %s)", tc.query, got, tc.want, before, after)
			}
		}
		_, body := b.get("/dashboard/transactions/" + after)
		if want := midnight.Add(time.Minute).Format("2006-01-02 15:04"); !strings.Contains(body, want) {
			t.Errorf("the sale's page does not show its time %s in %s: %s", want, zone, body)
		}
	})
}

// A refund's confirmation sent twice at the same moment (a double click that two connections carry
// at once, with the form's one idempotency key) refunds once, three times over: the ledger holds one
// refund, and each answer lands on it or says it is still being processed.
func TestRefundDoubleSubmitAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		for round := range 3 {
			sale := a.pay(t, payment.KindSale, "50.00", cardtest.Visa, nil)
			_, page := b.get("/dashboard/transactions/" + sale)
			key := signintest.Field(t, page[strings.Index(page, `id="refund-form"`):], "key")
			form := url.Values{"csrf_token": {csrf}, "key": {key}, "amount": {"20.00"}, "confirm": {"yes"}}
			var wg sync.WaitGroup
			start := make(chan struct{})
			statuses, locations, bodies := make([]int, 2), make([]string, 2), make([]string, 2)
			for i := range statuses {
				wg.Go(func() {
					<-start
					resp, body := b.post("/dashboard/transactions/"+sale+"/refund", form)
					statuses[i], locations[i], bodies[i] = resp.StatusCode, resp.Header.Get("Location"), body
				})
			}
			close(start)
			wg.Wait()
			if sum, n := refunded(t, db, sale); sum != 2000 || n != 1 {
				t.Fatalf("round %d: two submits at once of one refund form made %d refunds of %d in all", round, n, sum)
			}
			var landed []string
			for i, st := range statuses {
				switch {
				case st == http.StatusSeeOther && strings.HasPrefix(locations[i], "/dashboard/transactions/"):
					landed = append(landed, locations[i])
				case st == http.StatusConflict: // the other one's refund is being made, and the page says so
					if !strings.Contains(bodies[i], "This refund is still being processed.") {
						t.Fatalf("round %d: the submit that found the refund being made: %s", round, bodies[i])
					}
				default:
					t.Fatalf("round %d: the submits answered %v %v", round, statuses, locations)
				}
			}
			if len(landed) == 2 && landed[0] != landed[1] {
				t.Fatalf("round %d: the submits land on %v", round, landed)
			}
			if len(landed) == 0 {
				t.Fatalf("round %d: neither submit landed on the refund: %v", round, statuses)
			}
			_, page = b.get("/dashboard/transactions/" + sale)
			if !strings.Contains(page, "CA$30.00 remains to refund") {
				t.Fatalf("round %d: the sale's page after the refund: %s", round, page)
			}
		}
	})
}

package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
	"github.com/kassapay/kassa/internal/vault"
)

// api calls the gateway API as one of the shop's client credentials: the vault's own customers,
// cards, plans and subscriptions, made as a merchant's server makes them.
type api struct {
	t     testing.TB
	srv   *servertest.Server
	token string
}

// api gets a client pair of merchantID a token from the token endpoint.
func (s *shop) api(t testing.TB, merchantID string) *api {
	t.Helper()
	creds := s.srv.NewClient(t, merchantID)
	tok, err := (&clientcredentials.Config{ClientID: creds.ClientID, ClientSecret: creds.ClientSecret, TokenURL: s.srv.URL + "/oauth/token"}).Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &api{t: t, srv: s.srv, token: tok.AccessToken}
}

// do sends a request with the api's token.
func (a *api) do(t testing.TB, method, path string, body any) servertest.Response {
	t.Helper()
	return a.srv.Do(t, method, path, body, "Authorization", "Bearer "+a.token)
}

// must sends a request and fails t unless the answer is 200.
func (a *api) must(t testing.TB, method, path string, body any) servertest.Response {
	t.Helper()
	r := a.do(t, method, path, body)
	if r.Status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return r
}

// call is must for the api's own test, returning the answer's body.
func (a *api) call(method, path string, body any) map[string]any {
	a.t.Helper()
	return a.must(a.t, method, path, body).Body
}

// customer creates a customer with fields and stores the cards given by number; it returns the
// customer's lookup id and its cards' lookup ids, in the order given.
func (a *api) customer(fields map[string]any, cards ...string) (string, []string) {
	a.t.Helper()
	id := a.call("POST", "/customer-service/customer", fields)["lookup_id"].(string)
	var out []string
	for _, number := range cards {
		c := a.call("POST", "/customer-service/customer/"+id+"/card", map[string]any{"card_number": number, "card_expiry_month": "12", "card_expiry_year": "40"})
		list := c["cards"].([]any)
		out = append(out, list[len(list)-1].(map[string]any)["lookup_id"].(string))
	}
	return id, out
}

// subscribeToNewPlan subscribes the customer to a new monthly plan named name, starting in a week, on card.
func (a *api) subscribeToNewPlan(customer, card, name string) string {
	a.t.Helper()
	plan := a.call("POST", "/plan-service/plan", map[string]any{"name": name, "amount": "9.50", "frequency": "MONTHLY"})["lookup_id"].(string)
	start := time.Now().Add(7 * 24 * time.Hour).UnixMilli()
	c := a.call("POST", "/customer-service/customer/"+customer+"/subscription", map[string]any{"plan_lookup_id": plan, "card_lookup_id": card, "start_date": start})
	subs := c["subscriptions"].([]any)
	return subs[len(subs)-1].(map[string]any)["lookup_id"].(string)
}

// rows are the texts of the rows of the table id in a page.
func rows(body, id string) []string {
	m := regexp.MustCompile(`(?s)<table id="` + id + `".*?</table>`).FindString(body)
	var out []string
	for _, r := range regexp.MustCompile(`(?s)<tbody>.*</tbody>`).FindAllString(m, -1) {
		for _, tr := range strings.Split(r, "<tr")[1:] {
			out = append(out, strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString("<tr"+tr, " ")), " "))
		}
	}
	return out
}

// The list finds a customer by e-mail (whole, any case), by a stored card's last 4 and by name, only
// among the merchant's own customers, and pages through them by cursor, newest first.
func TestCustomerSearch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		a.customer(map[string]any{"email": "jane@roe.example", "first_name": "Jane", "last_name": "Roe"}, cardtest.Visa)
		a.customer(map[string]any{"email": "john@smith.example", "first_name": "John", "last_name": "Smith", "company": "Smith & Co"}, cardtest.Mastercard)
		// Another merchant's customer, alike in every way.
		other := s.srv.NewMerchant(t)
		s.api(t, other.ID).customer(map[string]any{"email": "jane@roe.example", "first_name": "Jane", "last_name": "Roe"}, cardtest.Mastercard)

		b := s.browser(t)
		b.signIn("reporting@maple.example")
		for _, tc := range []struct{ q, want string }{
			{"Jane@Roe.example", "Jane Roe jane@roe.example Visa ending 4242 (default)"},
			{"4444", "John Smith john@smith.example Smith &amp; Co Mastercard ending 4444 (default)"},
			{"roe", "Jane Roe"},
			{"JOHN smith", "John Smith"},
			{"", "John Smith"},
		} {
			resp, body := b.get("/dashboard/customers?q=" + url.QueryEscape(tc.q))
			wantStatus(t, "search "+tc.q, resp, body, http.StatusOK)
			got := rows(body, "customers")
			want := 1
			if tc.q == "" {
				want = 2
			}
			if len(got) != want || !strings.HasPrefix(got[0], tc.want) {
				t.Errorf("search %q: %q, want %d rows, the first %q", tc.q, got, want, tc.want)
			}
		}
		for _, q := range []string{"nobody@roe.example", "0000", "Janet", "jane@roe"} {
			_, body := b.get("/dashboard/customers?q=" + url.QueryEscape(q))
			if len(rows(body, "customers")) != 0 || !strings.Contains(body, `id="customers-empty"`) {
				t.Errorf("search %q found customers", q)
			}
		}
		resp, body := b.get("/dashboard/customers?q=%ff")
		wantStatus(t, "a search that is not text", resp, body, http.StatusBadRequest)
		resp, body = b.get("/dashboard/customers?after=x")
		wantStatus(t, "a cursor that is not one", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "(after)") {
			t.Errorf("the bad cursor's message does not name it: %s", body)
		}

		// 52 more customers named Page: a page of 50, then 2 older, then back to the newer page.
		for i := range 52 {
			if _, err := s.srv.Vault().CreateCustomer(context.Background(), s.merchantID,
				url.Values{"email": {fmt.Sprintf("page%02d@page.example", i)}, "first_name": {"Page"}, "last_name": {strconv.Itoa(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		_, body = b.get("/dashboard/customers?q=Page")
		first := rows(body, "customers")
		older := regexp.MustCompile(`href="(/dashboard/customers\?[^"]+)">Older`).FindStringSubmatch(body)
		if len(first) != 50 || !strings.HasPrefix(first[0], "Page 51") || older == nil || strings.Contains(body, ">Newer<") {
			t.Fatalf("the first page: %d rows from %q, older %v", len(first), first[0], older)
		}
		_, body = b.get(strings.ReplaceAll(older[1], "&amp;", "&"))
		second := rows(body, "customers")
		newer := regexp.MustCompile(`href="(/dashboard/customers\?[^"]+)">Newer`).FindStringSubmatch(body)
		if len(second) != 2 || !strings.HasPrefix(second[0], "Page 1 ") || !strings.HasPrefix(second[1], "Page 0 ") || newer == nil {
			t.Fatalf("the second page: %q, newer %v", second, newer)
		}
		_, body = b.get(strings.ReplaceAll(newer[1], "&amp;", "&"))
		if back := rows(body, "customers"); len(back) != 50 || back[0] != first[0] || back[49] != first[49] {
			t.Fatalf("back to the newer page: %d rows from %q", len(back), back[0])
		}
	})
}

// A customer's page shows its fields, its cards (brand, first 6, last 4, expiry, the default), its
// subscriptions (status, next billing date, a link to each) and its payments: the charges of its
// stored cards and their refunds, newest first, each a link to the transaction, and no other payment
// of the same e-mail address. No card number appears in full.
func TestCustomerDetail(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		c, cards := a.customer(map[string]any{"email": "jane@roe.example", "first_name": "Jane", "last_name": "Roe", "city": "Halifax"},
			cardtest.Visa, cardtest.Amex)
		sub := a.subscribeToNewPlan(c, cards[1], "Coffee club")
		sale := a.call("POST", "/transaction-service/sale/customer/"+c+"/card/"+cards[0], map[string]any{"amount": "20.00"})
		refund := a.call("POST", "/transaction-service/refund/"+sale["id"].(json.Number).String(), map[string]any{"amount": "5.00"})
		// A sale with a card sent in the request, for the same e-mail: not a payment of the vault's customer.
		a.call("POST", "/transaction-service/sale", map[string]any{"amount": "7.00", "card_number": cardtest.Visa, "card_expiry_month": "12",
			"card_expiry_year": "40", "cvv2": "123", "email": "jane@roe.example"})

		b := s.browser(t)
		b.signIn("reporting@maple.example")
		resp, body := b.get("/dashboard/customers/" + c)
		wantStatus(t, "the customer's page", resp, body, http.StatusOK)
		for _, want := range []string{"<h1>Jane Roe</h1>", "<dt>City</dt><dd>Halifax</dd>", "<dt>E-mail</dt><dd>jane@roe.example</dd>"} {
			if !strings.Contains(body, want) {
				t.Errorf("the page lacks %q", want)
			}
		}
		if got := rows(body, "cards"); len(got) != 2 || got[0] != "Visa 424242 4242 12/40 Default" || got[1] != "American Express 378282 0005 12/40 no" {
			t.Errorf("cards %q", got)
		}
		next := time.Now().Add(7 * 24 * time.Hour).UTC().Format("2006-01-02")
		if got := rows(body, "subscriptions"); len(got) != 1 || got[0] != "Coffee club ACTIVE CA$9.50 "+next {
			t.Errorf("subscriptions %q, want the next billing on %s", got, next)
		}
		if !strings.Contains(body, `href="/dashboard/subscriptions/`+c+`/`+sub+`"`) {
			t.Error("no link to the subscription")
		}
		got := rows(body, "payments")
		if len(got) != 2 || !strings.HasPrefix(got[0], refund["transaction_id"].(string)) || !strings.Contains(got[0], "REFUND APPROVED CA$5.00 Visa ending 4242") ||
			!strings.HasPrefix(got[1], sale["transaction_id"].(string)) || !strings.Contains(got[1], "SALE APPROVED CA$20.00") {
			t.Errorf("payments %q", got)
		}
		if !strings.Contains(body, `href="/dashboard/transactions/`+sale["transaction_id"].(string)+`"`) {
			t.Error("no link to the sale")
		}
		for _, number := range []string{cardtest.Visa, cardtest.Amex, "42424242"} {
			if strings.Contains(body, number) {
				t.Errorf("the page shows %s", number)
			}
		}
		if strings.Contains(body, "/edit") || strings.Contains(body, "/charge") || strings.Contains(body, "/delete") {
			t.Error("a reporting user is offered changes")
		}
	})
}

// An owner creates a customer and edits it; a bad field (by the vault's rules) is shown next to the
// field, named, and nothing is saved.
func TestCustomerCreateAndEdit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		resp, body := b.get("/dashboard/customers/new")
		wantStatus(t, "the new customer's form", resp, body, http.StatusOK)
		form := url.Values{"csrf_token": {csrf}, "email": {"not an address"}, "first_name": {"Jane"}, "last_name": {"Roe"}, "city": {"Halifax"}}
		resp, body = b.post("/dashboard/customers", form)
		wantStatus(t, "a bad e-mail", resp, body, http.StatusBadRequest)
		if !regexp.MustCompile(`<input id="email"[^>]*aria-invalid="true" aria-describedby="email-error">\s*<p class="error" id="email-error">E-mail `).MatchString(body) ||
			!strings.Contains(body, `value="Halifax"`) {
			t.Fatalf("the bad e-mail is not shown at its field: %s", body)
		}
		form.Set("email", "jane@roe.example")
		form.Set("first_name", strings.Repeat("J", 101))
		resp, body = b.post("/dashboard/customers", form)
		wantStatus(t, "a long first name", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, `<p class="error" id="first_name-error">First name must be at most 100 characters</p>`) {
			t.Fatalf("the long first name: %s", body)
		}
		if list, _ := s.srv.Vault().ListCustomers(context.Background(), s.merchantID, vault.CustomerFilter{Limit: 100}); len(list) != 0 {
			t.Fatalf("a refused form saved %d customers", len(list))
		}
		form.Set("first_name", "Jane")
		resp, body = b.post("/dashboard/customers", form)
		wantStatus(t, "create", resp, body, http.StatusSeeOther)
		loc := resp.Header.Get("Location")
		id := strings.TrimSuffix(strings.TrimPrefix(loc, "/dashboard/customers/"), "?done=created")
		if _, body = b.get(loc); !strings.Contains(body, "The customer is saved.") || !strings.Contains(body, "<h1>Jane Roe</h1>") {
			t.Fatalf("after create: %s", body)
		}

		resp, body = b.get("/dashboard/customers/" + id + "/edit")
		wantStatus(t, "the edit form", resp, body, http.StatusOK)
		if !strings.Contains(body, `value="jane@roe.example"`) || !strings.Contains(body, `value="Halifax"`) {
			t.Fatalf("the edit form is not filled: %s", body)
		}
		edit := url.Values{"csrf_token": {csrf}, "email": {"jane@roe.example"}, "first_name": {"Jane"}, "last_name": {"Roe"}, "city": {""},
			"bcc_emails": {"books@roe.example, nope"}}
		resp, body = b.post("/dashboard/customers/"+id, edit)
		wantStatus(t, "a bad copy address", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, `id="bcc_emails-error">Receipt copies to must be e-mail addresses separated by commas`) {
			t.Fatalf("the bad copy address: %s", body)
		}
		edit.Set("bcc_emails", "books@roe.example")
		resp, body = b.post("/dashboard/customers/"+id, edit)
		wantStatus(t, "edit", resp, body, http.StatusSeeOther)
		c, err := s.srv.Vault().Get(context.Background(), s.merchantID, id)
		if err != nil || c.City != "" || c.BccEmails != "books@roe.example" || c.FirstName != "Jane" {
			t.Fatalf("after the edit: %+v %v", c.Details, err)
		}
	})
}

// Making a card the default, deleting a card and deleting a customer each ask first (a plain form);
// the vault's 409s — a card that bills a current subscription, a customer with one — are said in a
// sentence on the confirmation page, and change nothing.
func TestCustomerCardsAndDeletion(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		c, cards := a.customer(map[string]any{"email": "jane@roe.example", "first_name": "Jane", "last_name": "Roe"}, cardtest.Visa, cardtest.Mastercard)
		sub := a.subscribeToNewPlan(c, cards[0], "Coffee club")
		b := s.browser(t)
		csrf := b.signIn("admin@maple.example")
		base := "/dashboard/customers/" + c

		resp, body := b.get(base + "/cards/" + cards[1] + "/default")
		wantStatus(t, "confirm the default", resp, body, http.StatusOK)
		if !strings.Contains(body, "Make the Mastercard ending 4444 the default card of Jane Roe?") || !strings.Contains(body, `action="`+base+`/cards/`+cards[1]+`/default"`) {
			t.Fatalf("the default's confirmation: %s", body)
		}
		resp, body = b.post(base+"/cards/"+cards[1]+"/default", url.Values{"csrf_token": {csrf}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != base+"?done=default" {
			t.Fatalf("make default: %d %s", resp.StatusCode, body)
		}
		if got := rows(getBody(t, b, base), "cards"); len(got) != 2 || !strings.Contains(got[1], " Default ") || !strings.Contains(got[0], " no ") {
			t.Fatalf("after the default moved: %q", got)
		}

		resp, body = b.post(base+"/cards/"+cards[0]+"/delete", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "delete the subscription's card", resp, body, http.StatusConflict)
		if !strings.Contains(body, `role="alert">Card `+cards[0]+` bills subscription `+sub+`; move the subscription to another card first.</p>`) ||
			!strings.Contains(body, `<button class="danger" type="submit">Delete the card</button>`) {
			t.Fatalf("the card's 409: %s", body)
		}
		resp, body = b.post(base+"/delete", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "delete a subscribed customer", resp, body, http.StatusConflict)
		if !strings.Contains(body, "has a current subscription ("+sub+"); cancel it before deleting the customer.") {
			t.Fatalf("the customer's 409: %s", body)
		}
		if got := rows(getBody(t, b, base), "cards"); len(got) != 2 {
			t.Fatalf("a refused deletion changed the cards: %q", got)
		}

		a.call("PATCH", "/customer-service/customer/"+c+"/subscription/"+sub, map[string]any{"status": "CANCELED"})
		resp, body = b.get(base + "/cards/" + cards[0] + "/delete")
		wantStatus(t, "confirm the card's deletion", resp, body, http.StatusOK)
		resp, body = b.post(base+"/cards/"+cards[0]+"/delete", url.Values{"csrf_token": {csrf}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != base+"?done=card-deleted" {
			t.Fatalf("delete the card: %d %s", resp.StatusCode, body)
		}
		if got := rows(getBody(t, b, base), "cards"); len(got) != 1 || !strings.HasPrefix(got[0], "Mastercard") {
			t.Fatalf("after the deletion: %q", got)
		}
		resp, body = b.get(base + "/delete")
		wantStatus(t, "confirm the customer's deletion", resp, body, http.StatusOK)
		if !strings.Contains(body, "Delete Jane Roe (jane@roe.example) and the customer&#39;s stored cards?") {
			t.Fatalf("the customer's confirmation: %s", body)
		}
		resp, body = b.post(base+"/delete", url.Values{"csrf_token": {csrf}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/customers?deleted=1" {
			t.Fatalf("delete the customer: %d %s", resp.StatusCode, body)
		}
		resp, body = b.get(base)
		wantStatus(t, "the deleted customer", resp, body, http.StatusNotFound)
		resp, body = b.post(base+"/cards/"+cards[1]+"/default", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "a card of the deleted customer", resp, body, http.StatusNotFound)
	})
}

// getBody is the body of a page that must answer 200.
func getBody(t *testing.T, b *browser, path string) string {
	t.Helper()
	resp, body := b.get(path)
	wantStatus(t, path, resp, body, http.StatusOK)
	return body
}

// A stored card charged from the customer's page: a sale through the vault's path, recorded as the
// dashboard user's; the same form sent twice charges once and lands both times on the transaction; an
// authorization too; a bad amount is shown at its field and charges nothing.
func TestChargeStoredCard(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		c, cards := s.api(t, s.merchantID).customer(map[string]any{"email": "jane@roe.example", "first_name": "Jane"}, cardtest.Visa)
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		path := "/dashboard/customers/" + c + "/cards/" + cards[0] + "/charge"
		resp, body := b.get(path)
		wantStatus(t, "the charge form", resp, body, http.StatusOK)
		key := signintest.Field(t, body, "key")
		if !strings.Contains(body, "Visa ending 4242 (default), expires 12/40, of Jane") {
			t.Fatalf("the form does not say which card: %s", body)
		}
		form := url.Values{"csrf_token": {csrf}, "key": {key}, "kind": {"SALE"}, "amount": {"12.345"}, "currency": {"CAD"}}
		resp, body = b.post(path, form)
		wantStatus(t, "a bad amount", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, `<p class="error" id="amount-error">Amount `) || signintest.Field(t, body, "key") != key {
			t.Fatalf("the bad amount: %s", body)
		}
		form.Set("amount", "12.34")
		var locations []string
		for range 2 {
			resp, body = b.post(path, form)
			wantStatus(t, "charge", resp, body, http.StatusSeeOther)
			locations = append(locations, resp.Header.Get("Location"))
		}
		sale := onlyPayment(t, s, c)
		if locations[0] != "/dashboard/transactions/"+sale.TransactionID || locations[1] != locations[0] {
			t.Fatalf("the charges went to %q, the sale is %s", locations, sale.TransactionID)
		}
		if sale.Kind != payment.KindSale || sale.Amount != 1234 || sale.Currency.Code != "CAD" || sale.Status != payment.StatusApproved ||
			sale.ClientID != "dashboard/"+s.users[user.Owner].ID || sale.Email != "jane@roe.example" {
			t.Fatalf("the sale: %+v", sale)
		}

		// Another rendering of the form is another charge: an authorization in USD.
		_, body = b.get(path)
		form = url.Values{"csrf_token": {csrf}, "key": {signintest.Field(t, body, "key")}, "kind": {"AUTHORIZATION"}, "amount": {"3"}, "currency": {"USD"}}
		resp, body = b.post(path, form)
		wantStatus(t, "authorize", resp, body, http.StatusSeeOther)
		list, _ := s.srv.Ledger().List(context.Background(), s.merchantID, payment.Filter{CustomerLookupID: c})
		if len(list.Transactions) != 2 || list.Transactions[0].Kind != payment.KindAuthorization || list.Transactions[0].Amount != 300 ||
			list.Transactions[0].Currency.Code != "USD" {
			t.Fatalf("after the authorization: %+v", list.Transactions)
		}
		// The same form again with another amount charges nothing and offers a new form.
		form.Set("amount", "4")
		resp, body = b.post(path, form)
		wantStatus(t, "the used form with another amount", resp, body, http.StatusUnprocessableEntity)
		if signintest.Field(t, body, "key") == form.Get("key") || !strings.Contains(body, "This form has already charged the card.") {
			t.Fatalf("the used form: %s", body)
		}
		for _, f := range []url.Values{{"kind": {"REFUND"}, "key": {"k"}}, {"kind": {"SALE"}}} {
			f.Set("csrf_token", csrf)
			f.Set("amount", "1")
			resp, body = b.post(path, f)
			wantStatus(t, "a bad form "+f.Encode(), resp, body, http.StatusBadRequest)
		}
		if list, _ = s.srv.Ledger().List(context.Background(), s.merchantID, payment.Filter{CustomerLookupID: c}); len(list.Transactions) != 2 {
			t.Fatalf("refused forms charged: %d transactions", len(list.Transactions))
		}
	})
}

// onlyPayment is the one payment of customer c, failing the test if it has another.
func onlyPayment(t *testing.T, s *shop, c string) payment.Transaction {
	t.Helper()
	list, err := s.srv.Ledger().List(context.Background(), s.merchantID, payment.Filter{CustomerLookupID: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Transactions) != 1 {
		t.Fatalf("customer %s has %d payments, want one", c, len(list.Transactions))
	}
	return list.Transactions[0]
}

// Reporting reads customers and changes none: every POST is a 403, and so are the forms. Sales staff
// do not see customers. Another merchant's customer is a 404 to everyone, for every page and action.
func TestCustomerRoles(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		c, cards := s.api(t, s.merchantID).customer(map[string]any{"email": "jane@roe.example"}, cardtest.Visa)
		other := s.srv.NewMerchant(t)
		oc, ocards := s.api(t, other.ID).customer(map[string]any{"email": "jane@roe.example"}, cardtest.Visa)
		posts := func(c, card string) []string {
			base := "/dashboard/customers/" + c
			return []string{"/dashboard/customers", base, base + "/delete", base + "/cards/" + card + "/default", base + "/cards/" + card + "/delete",
				base + "/cards/" + card + "/charge"}
		}
		gets := func(c, card string) []string {
			base := "/dashboard/customers/" + c
			return []string{"/dashboard/customers/new", base + "/edit", base + "/delete", base + "/cards/" + card + "/default",
				base + "/cards/" + card + "/delete", base + "/cards/" + card + "/charge"}
		}
		form := func(csrf string) url.Values {
			return url.Values{"csrf_token": {csrf}, "email": {"x@roe.example"}, "kind": {"SALE"}, "amount": {"1"}, "key": {"k1"}}
		}

		reporting := s.browser(t)
		csrf := reporting.signIn("reporting@maple.example")
		for _, p := range []string{"/dashboard/customers", "/dashboard/customers/" + c} {
			resp, body := reporting.get(p)
			wantStatus(t, "reporting: GET "+p, resp, body, http.StatusOK)
		}
		for _, p := range posts(c, cards[0]) {
			resp, body := reporting.post(p, form(csrf))
			wantStatus(t, "reporting: POST "+p, resp, body, http.StatusForbidden)
		}
		for _, p := range gets(c, cards[0]) {
			resp, body := reporting.get(p)
			wantStatus(t, "reporting: GET "+p, resp, body, http.StatusForbidden)
		}
		resp, body := reporting.get("/dashboard/customers/" + oc)
		wantStatus(t, "reporting: another merchant's customer", resp, body, http.StatusNotFound)

		sales := s.browser(t)
		csrf = sales.signIn("sales@maple.example")
		resp, body = sales.get("/dashboard/customers")
		wantStatus(t, "sales: the list", resp, body, http.StatusForbidden)
		if strings.Contains(getBody(t, sales, "/dashboard"), `href="/dashboard/customers"`) {
			t.Error("sales is shown the Customers section")
		}
		for _, p := range posts(c, cards[0]) {
			resp, body := sales.post(p, form(csrf))
			wantStatus(t, "sales: POST "+p, resp, body, http.StatusForbidden)
		}

		owner := s.browser(t)
		csrf = owner.signIn("owner@maple.example")
		for _, p := range append(gets(oc, ocards[0])[1:], "/dashboard/customers/"+oc) {
			resp, body := owner.get(p)
			wantStatus(t, "owner: GET another merchant's "+p, resp, body, http.StatusNotFound)
		}
		for _, p := range posts(oc, ocards[0])[1:] {
			resp, body := owner.post(p, form(csrf))
			wantStatus(t, "owner: POST another merchant's "+p, resp, body, http.StatusNotFound)
		}
		// The merchant's own card under another merchant's customer, and the other's card under its own.
		for _, p := range []string{"/dashboard/customers/" + oc + "/cards/" + cards[0] + "/charge", "/dashboard/customers/" + c + "/cards/" + ocards[0] + "/charge"} {
			resp, body := owner.post(p, form(csrf))
			wantStatus(t, "owner: POST "+p, resp, body, http.StatusNotFound)
		}
		if list, _ := s.srv.Ledger().List(context.Background(), other.ID, payment.Filter{}); len(list.Transactions) != 0 {
			t.Fatalf("another merchant's card was charged: %+v", list.Transactions)
		}
		if oc2, err := s.srv.Vault().Get(context.Background(), other.ID, oc); err != nil || oc2.Email != "jane@roe.example" || len(oc2.Cards) != 1 {
			t.Fatalf("another merchant's customer changed: %+v %v", oc2, err)
		}
	})
}

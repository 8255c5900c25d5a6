package dashboard_test

import (
	"context"
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

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/event/eventtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// customer makes a customer with a card and returns their lookup ids.
func (a *api) customerWithCard(t *testing.T, email, pan string) (string, string) {
	t.Helper()
	c, cards := a.customer(map[string]any{"email": email, "first_name": "Ada", "last_name": strings.Split(email, "@")[0]}, pan)
	return c, cards[0]
}

// subscribe subscribes a customer to a plan and returns the subscription's lookup id.
func (a *api) subscribe(t *testing.T, customer, plan string) string {
	t.Helper()
	r := a.must(t, "POST", "/customer-service/customer/"+customer+"/subscription", map[string]any{"plan_lookup_id": plan})
	subs := r.Body["subscriptions"].([]any)
	return subs[len(subs)-1].(map[string]any)["lookup_id"].(string)
}

// otherMerchant is a second merchant of the shop's server, with its API.
func otherMerchant(t *testing.T, s *shop) *api {
	t.Helper()
	m := s.srv.NewMerchant(t)
	return &api{t: t, srv: s.srv, token: m.Token}
}

// forbidden checks that reporting and sales staff get 403 on each POST, and that nothing changed.
func forbidden(t *testing.T, s *shop, paths []string) {
	t.Helper()
	for _, role := range []user.Role{user.Reporting, user.Sales} {
		b := s.browser(t)
		csrf := b.signIn(string(role) + "@maple.example")
		for _, p := range paths {
			resp, body := b.post(p, url.Values{"csrf_token": {csrf}, "name": {"Hijack"}, "amount": {"1.00"}, "currency": {"USD"},
				"frequency": {"DAILY"}, "cycle": {"0"}, "failed": {"1"}})
			wantStatus(t, string(role)+" POST "+p, resp, body, http.StatusForbidden)
		}
	}
}

// Plans from the dashboard, by the plan service's rules: a bad amount refused beside its field, a
// plan made and edited (the receipt box cleared) as the API then shows it, a duplicate name refused,
// and a plan in use refused deletion with a sentence that says why and what to do, then deleted once
// its subscription is canceled. Reporting sees the plans without the forms; reporting and sales get
// 403 on every POST; another merchant's plan is 404.
func TestPlansCreateEditDelete(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		a := s.api(t, s.merchantID)
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		resp, body := b.get("/dashboard/plans")
		wantStatus(t, "plans", resp, body, http.StatusOK)
		if !strings.Contains(body, `id="plans-empty"`) || !strings.Contains(body, `href="/dashboard/plans/new"`) {
			t.Fatalf("the plans of a new merchant: %s", body)
		}
		form := url.Values{"csrf_token": {csrf}, "name": {"Gold"}, "amount": {"12.345"}, "currency": {"USD"}, "frequency": {"MONTHLY"},
			"number_of_payments": {""}, "send_receipt": {"true"}}
		resp, body = b.post("/dashboard/plans/new", form)
		wantStatus(t, "a plan with 3 decimals", resp, body, http.StatusBadRequest)
		if !regexp.MustCompile(`<p class="error" id="error-amount">(?i)[^<]*amount[^<]*</p>`).MatchString(body) || !strings.Contains(body, `value="Gold"`) {
			t.Fatalf("the refused amount is not shown beside its field: %s", body)
		}
		form.Set("amount", "12.50")
		resp, body = b.post("/dashboard/plans/new", form)
		wantStatus(t, "make a plan", resp, body, http.StatusSeeOther)
		id := strings.TrimSuffix(strings.TrimPrefix(resp.Header.Get("Location"), "/dashboard/plans/"), "?saved=created")
		if p := a.must(t, "GET", "/plan-service/plan/"+id, nil); p.Num("amount") != "12.50" || p.Str("currency") != "USD" || !p.Bool("send_receipt") ||
			p.Str("frequency") != "MONTHLY" || p.Str("name") != "Gold" {
			t.Fatalf("the plan made in the dashboard, through the API: %s", p.Raw)
		}
		form.Set("name", "Gold plus")
		form.Set("amount", "15")
		form.Del("send_receipt")
		resp, body = b.post("/dashboard/plans/"+id, form)
		wantStatus(t, "edit the plan", resp, body, http.StatusSeeOther)
		if p := a.must(t, "GET", "/plan-service/plan/"+id, nil); p.Num("amount") != "15.00" || p.Bool("send_receipt") || p.Str("name") != "Gold plus" {
			t.Fatalf("the edited plan, through the API: %s", p.Raw)
		}
		resp, body = b.get("/dashboard/plans/" + id + "?saved=changed")
		if !strings.Contains(body, `value="15.00"`) || strings.Contains(body, "checked") {
			t.Fatalf("the edited plan's page: %s", body)
		}
		form.Set("name", "GOLD PLUS")
		resp, body = b.post("/dashboard/plans/new", form)
		wantStatus(t, "a second plan of the same name", resp, body, http.StatusConflict)

		c, _ := a.customerWithCard(t, "ada@example.com", cardtest.Visa)
		sub := a.subscribe(t, c, id)
		resp, body = b.post("/dashboard/plans/"+id+"/delete", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "delete a plan in use", resp, body, http.StatusConflict)
		if !strings.Contains(body, "cannot be deleted while customers are subscribed to it: it has 1 subscription that") ||
			!strings.Contains(body, "Cancel them first") {
			t.Fatalf("the plan in use is not explained: %s", body)
		}

		// Reporting reads the plan without a form; reporting and sales may not change it.
		rep := s.browser(t)
		rep.signIn("reporting@maple.example")
		resp, body = rep.get("/dashboard/plans/" + id)
		wantStatus(t, "reporting reads the plan", resp, body, http.StatusOK)
		if strings.Contains(body, "<form method=\"post\" action=\"/dashboard/plans") || !strings.Contains(body, "$15.00") {
			t.Fatalf("reporting's plan page: %s", body)
		}
		forbidden(t, s, []string{"/dashboard/plans/new", "/dashboard/plans/" + id, "/dashboard/plans/" + id + "/delete"})
		resp, body = rep.get("/dashboard/plans/new")
		wantStatus(t, "reporting at the new plan form", resp, body, http.StatusForbidden)

		// Another merchant's plan is not found, to see or to delete.
		theirs := otherMerchant(t, s).must(t, "POST", "/plan-service/plan", map[string]any{"name": "Theirs", "amount": "1.00", "frequency": "DAILY"}).Str("lookup_id")
		resp, body = b.get("/dashboard/plans/" + theirs)
		wantStatus(t, "another merchant's plan", resp, body, http.StatusNotFound)
		resp, body = b.post("/dashboard/plans/"+theirs+"/delete", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "delete another merchant's plan", resp, body, http.StatusNotFound)
		resp, body = b.post("/dashboard/plans/"+theirs, form)
		wantStatus(t, "edit another merchant's plan", resp, body, http.StatusNotFound)

		a.must(t, "PATCH", "/customer-service/customer/"+c+"/subscription/"+sub, map[string]any{"status": "CANCELED"})
		resp, body = b.post("/dashboard/plans/"+id+"/delete", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "delete the plan no longer in use", resp, body, http.StatusSeeOther)
		_, body = b.get(resp.Header.Get("Location"))
		if !strings.Contains(body, "The plan Gold plus is deleted.") || !strings.Contains(body, `id="plans-empty"`) {
			t.Fatalf("after the deletion: %s", body)
		}
	})
}

// billingShop is a shop with a monthly plan, a customer billed on a good card and one whose card is
// declined, after the engine's first run: one ACTIVE subscription with a charge, one in RETRY.
type billingShop struct {
	*shop
	a                          *api
	plan                       string
	good, goodSub, bad, badSub string
}

func newBillingShop(t *testing.T, db *store.DB) *billingShop {
	t.Helper()
	s := &billingShop{shop: newShop(t, db, server.Config{NoBillingEngine: true})}
	s.a = s.api(t, s.merchantID)
	s.plan = s.a.must(t, "POST", "/plan-service/plan", map[string]any{"name": "Monthly box", "amount": "9.00", "currency": "USD",
		"frequency": "MONTHLY"}).Str("lookup_id")
	s.good, _ = s.a.customerWithCard(t, "grace@example.com", cardtest.Visa)
	s.goodSub = s.a.subscribe(t, s.good, s.plan)
	s.bad, _ = s.a.customerWithCard(t, "linus@example.com", cardtest.InsufficientFunds)
	s.badSub = s.a.subscribe(t, s.bad, s.plan)
	if _, err := s.srv.Billing().RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// recurring counts the merchant's RECURRING transactions of a result.
func (s *billingShop) recurring(t *testing.T, result string) int {
	t.Helper()
	n := 0
	for _, e := range s.a.must(t, "GET", "/transaction-service/transaction?limit=1000", nil).Body["entities"].([]any) {
		if e := e.(map[string]any); e["transaction_source"] == "RECURRING" && e["transaction_result"] == result {
			n++
		}
	}
	return n
}

// Subscriptions listed by status with their next billing date and failures; a subscription's page
// with its billed cycles and their transactions; its amount changed (a bad one refused beside the
// field) as the API then shows it; paused, resumed and canceled, after which it cannot change.
// Reporting and sales get 403 on every POST; another merchant's subscription is 404.
func TestSubscriptionsListDetailAndActions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newBillingShop(t, db)
		b := s.browser(t)
		csrf := b.signIn("admin@maple.example")
		resp, body := b.get("/dashboard/subscriptions?status=RETRY")
		wantStatus(t, "subscriptions in RETRY", resp, body, http.StatusOK)
		if !strings.Contains(body, "/dashboard/subscriptions/"+s.bad+"/"+s.badSub) || strings.Contains(body, s.goodSub) ||
			!strings.Contains(body, "<td>1</td>") {
			t.Fatalf("the RETRY list: %s", body)
		}
		_, body = b.get("/dashboard/subscriptions?status=ACTIVE")
		if !strings.Contains(body, "/dashboard/subscriptions/"+s.good+"/"+s.goodSub) || strings.Contains(body, s.badSub) {
			t.Fatalf("the ACTIVE list: %s", body)
		}
		_, body = b.get("/dashboard/subscriptions?status=PAUSED")
		if !strings.Contains(body, `id="subscriptions-empty"`) {
			t.Fatalf("the PAUSED list: %s", body)
		}
		resp, body = b.get("/dashboard/subscriptions?status=LATE")
		wantStatus(t, "a status that is none", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "Status must be one of ACTIVE, RETRY, SUSPENDED, PAUSED, CANCELED, EXPIRED.") {
			t.Fatalf("the refused status: %s", body)
		}

		page := "/dashboard/subscriptions/" + s.good + "/" + s.goodSub
		resp, body = b.get(page)
		wantStatus(t, "the subscription's page", resp, body, http.StatusOK)
		tx := regexp.MustCompile(`<a href="/dashboard/transactions/([^"]+)">`).FindStringSubmatch(body)
		if tx == nil || !strings.Contains(body, `<td><span class="badge badge-success">APPROVED</span></td><td>$9.00</td>`) {
			t.Fatalf("the billed cycle and its transaction: %s", body)
		}
		if r := s.a.must(t, "GET", "/transaction-service/transaction/"+tx[1], nil); r.Str("transaction_result") != "APPROVED" || r.Str("transaction_source") != "RECURRING" {
			t.Fatalf("the linked transaction: %s", r.Raw)
		}

		// The dashboard's changes record the API's events, with the subscription as the API shows it.
		events := &eventtest.Log{DB: db, MerchantID: s.merchantID}
		events.All(t) // the shop's setup
		resp, body = b.post(page+"/amount", url.Values{"csrf_token": {csrf}, "amount": {"twenty"}})
		wantStatus(t, "a bad amount", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, `id="error-amount"`) || !strings.Contains(body, `value="twenty"`) {
			t.Fatalf("the refused amount: %s", body)
		}
		resp, body = b.post(page+"/amount", url.Values{"csrf_token": {csrf}, "amount": {"20.00"}})
		wantStatus(t, "change the amount", resp, body, http.StatusOK)
		sub := "/customer-service/customer/" + s.good + "/subscription/" + s.goodSub
		r := s.a.must(t, "GET", sub, nil)
		if r.Num("amount") != "20.00" {
			t.Fatalf("the amount through the API: %s", r.Raw)
		}
		eventtest.Shows(t, events.Next(t, event.SubscriptionUpdated)[0], r.Body, "customer_lookup_id", s.good)
		for _, step := range []struct{ action, status, event string }{{"pause", "PAUSED", event.SubscriptionUpdated},
			{"resume", "ACTIVE", event.SubscriptionUpdated}, {"cancel", "CANCELED", event.SubscriptionCanceled}} {
			resp, body = b.post(page+"/"+step.action, url.Values{"csrf_token": {csrf}})
			wantStatus(t, step.action, resp, body, http.StatusOK)
			r := s.a.must(t, "GET", sub, nil)
			if r.Str("status") != step.status || !strings.Contains(body, `id="subscription-status">`+step.status+`<`) {
				t.Fatalf("after %s: %s", step.action, r.Raw)
			}
			eventtest.Shows(t, events.Next(t, step.event)[0], r.Body, "customer_lookup_id", s.good)
		}
		resp, body = b.post(page+"/pause", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "pause a canceled subscription", resp, body, http.StatusConflict)
		resp, body = b.post("/dashboard/subscriptions/"+s.bad+"/"+s.badSub+"/resume", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "resume a subscription in RETRY", resp, body, http.StatusConflict)
		events.Next(t) // refused: nothing recorded

		forbidden(t, s.shop, []string{page + "/pause", page + "/resume", page + "/cancel", page + "/amount",
			"/dashboard/subscriptions/" + s.bad + "/" + s.badSub + "/retry"})
		if r := s.a.must(t, "GET", "/customer-service/customer/"+s.bad+"/subscription/"+s.badSub, nil); r.Str("status") != "RETRY" {
			t.Fatalf("a refused POST changed the subscription: %s", r.Raw)
		}

		// Another merchant's subscription, and a subscription named under another customer, are not found.
		o := otherMerchant(t, s.shop)
		op := o.must(t, "POST", "/plan-service/plan", map[string]any{"name": "Theirs", "amount": "1.00", "frequency": "DAILY"}).Str("lookup_id")
		oc, _ := o.customerWithCard(t, "them@example.com", cardtest.Visa)
		theirs := "/dashboard/subscriptions/" + oc + "/" + o.subscribe(t, oc, op)
		for _, p := range []string{theirs, "/dashboard/subscriptions/" + s.bad + "/" + s.goodSub} {
			resp, body = b.get(p)
			wantStatus(t, "GET "+p, resp, body, http.StatusNotFound)
		}
		for _, action := range []string{"/pause", "/resume", "/cancel", "/amount", "/retry"} {
			resp, body = b.post(theirs+action, url.Values{"csrf_token": {csrf}, "amount": {"2.00"}, "cycle": {"0"}, "failed": {"0"}})
			wantStatus(t, "another merchant's subscription "+action, resp, body, http.StatusNotFound)
		}
	})
}

// "Retry now" on a subscription in RETRY, its card replaced with a good one: the same form sent four
// times at once and once more after (a double-click and a reload) charges the cycle once, through the
// engine; the subscription is ACTIVE with its next cycle scheduled, and the page says the later
// submits charged nothing.
func TestRetryNowChargesOnceUnderDoubleSubmit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newBillingShop(t, db)
		card := s.a.must(t, "POST", "/customer-service/customer/"+s.bad+"/card", map[string]any{"card_number": cardtest.Mastercard,
			"card_expiry_month": "12", "card_expiry_year": "2099"}).Body["cards"].([]any)
		sub := "/customer-service/customer/" + s.bad + "/subscription/" + s.badSub
		s.a.must(t, "PATCH", sub, map[string]any{"card_lookup_id": card[len(card)-1].(map[string]any)["lookup_id"]})
		if n := s.recurring(t, "DECLINED"); n != 1 {
			t.Fatalf("%d declined charges before the retry", n)
		}
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		page := "/dashboard/subscriptions/" + s.bad + "/" + s.badSub
		_, body := b.get(page)
		form := url.Values{"csrf_token": {csrf}, "cycle": {fieldValue(t, body, "cycle")}, "failed": {fieldValue(t, body, "failed")}}
		if form.Get("cycle") != "0" || form.Get("failed") != "1" {
			t.Fatalf("the retry form: %v", form)
		}
		var wg sync.WaitGroup
		statuses := make([]int, 4)
		for i := range statuses {
			wg.Go(func() {
				resp, _ := b.post(page+"/retry", form)
				statuses[i] = resp.StatusCode
			})
		}
		wg.Wait()
		for _, st := range statuses {
			if st != http.StatusOK {
				t.Fatalf("the submits answered %v", statuses)
			}
		}
		resp, body := b.post(page+"/retry", form)
		wantStatus(t, "the reload", resp, body, http.StatusOK)
		if !strings.Contains(body, "This retry was made already") {
			t.Fatalf("the reload's answer: %s", body)
		}
		if n := s.recurring(t, "APPROVED"); n != 2 { // the good customer's first cycle, and this retry
			t.Fatalf("%d approved recurring charges, want 2: the retry charged more than once", n)
		}
		if n := s.recurring(t, "DECLINED"); n != 1 {
			t.Fatalf("%d declined recurring charges, want the first one only", n)
		}
		r := s.a.must(t, "GET", sub, nil)
		if r.Str("status") != "ACTIVE" || r.Num("completed_cycles") != "1" || r.Num("failed_attempts") != "0" {
			t.Fatalf("after the retry: %s", r.Raw)
		}
		if got := strings.Count(body, `<a href="/dashboard/transactions/`); got != 2 {
			t.Fatalf("the history shows %d charges, want the decline and the retry: %s", got, body)
		}
		if _, err := s.srv.Billing().RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := s.recurring(t, "APPROVED"); n != 2 {
			t.Fatalf("the engine charged the retried cycle again: %d approved", n)
		}
	})
}

// fieldValue reads the value of the input named name in a page.
func fieldValue(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no field %s in %s", name, body)
	}
	return m[1]
}

// Payment intents and hosted-page sessions: listed newest first, filtered by status, and each with
// its attempts, last error, amount, mode and the ledger transactions they link to; a bad status
// filter is refused naming it; another merchant's are 404; reporting reads them. A declined intent
// shows the API's last error; a session a buyer tried a declined then a good card on shows both tries
// and both ledger attempts.
func TestPaymentIntentsAndSessions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		key := s.srv.NewAPIKey(t, "acct_"+s.merchantID, checkout.AllPermissions)
		v1 := func(method, path string, body any) servertest.Response {
			t.Helper()
			r := s.srv.Do(t, method, path, body, checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_"+s.merchantID)
			if r.Status != http.StatusOK {
				t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
			}
			return r
		}
		method := func(pan string) string {
			return v1("POST", "/v1/payment-methods", map[string]any{"type": "card", "card": map[string]any{"number": pan, "exp_month": 12,
				"exp_year": 2040, "cvc": "123"}}).Str("id")
		}
		declined := v1("POST", "/v1/payment-intents", map[string]any{"amount": 1250, "currency": "usd", "payment_method": method(cardtest.Declined)}).Str("id")
		v1("POST", "/v1/payment-intents/"+declined+"/confirm", nil)
		v1("POST", "/v1/payment-intents/"+declined+"/confirm", map[string]any{"payment_method": method(cardtest.Visa)})
		open := v1("POST", "/v1/payment-intents", map[string]any{"amount": 700, "currency": "usd"}).Str("id")
		session := v1("POST", "/v1/checkout/hosted-payment-page/sessions", map[string]any{"amount": 300, "currency": "usd"})

		b := s.browser(t)
		b.signIn("reporting@maple.example")
		resp, body := b.get("/dashboard/payments/intents")
		wantStatus(t, "the intents", resp, body, http.StatusOK)
		rows := regexp.MustCompile(`href="/dashboard/payments/intents/(pi_[^"]+)"`).FindAllStringSubmatch(body, -1)
		if len(rows) != 3 || rows[1][1] != open || rows[2][1] != declined {
			t.Fatalf("the intents, newest first: %v", rows)
		}
		_, body = b.get("/dashboard/payments/intents?status=succeeded")
		if rows := regexp.MustCompile(`href="/dashboard/payments/intents/(pi_[^"]+)"`).FindAllStringSubmatch(body, -1); len(rows) != 1 || rows[0][1] != declined {
			t.Fatalf("the succeeded intents: %v", rows)
		}
		resp, body = b.get("/dashboard/payments/intents?status=paid")
		wantStatus(t, "a status that is none", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "Status must be one of requires_payment_method") {
			t.Fatalf("the refused status: %s", body)
		}
		resp, body = b.get("/dashboard/payments/intents/" + declined)
		wantStatus(t, "the intent", resp, body, http.StatusOK)
		links := regexp.MustCompile(`<td><a href="/dashboard/transactions/([^"]+)">`).FindAllStringSubmatch(body, -1)
		if len(links) != 2 || !strings.Contains(body, "$12.50") || !strings.Contains(body, "test: nothing is charged") ||
			!strings.Contains(body, "DECLINED") || !strings.Contains(body, `id="intent-status">succeeded<`) {
			t.Fatalf("the intent's page: %s", body)
		}
		a := s.api(t, s.merchantID)
		for i, want := range []string{"DECLINED", "APPROVED"} {
			if got := a.must(t, "GET", "/transaction-service/transaction/"+links[i][1], nil); got.Str("transaction_result") != want {
				t.Fatalf("attempt %d links %s", i, got.Raw)
			}
		}
		_, body = b.get("/dashboard/payments/intents/" + open)
		if !strings.Contains(body, `id="attempts-empty"`) || !strings.Contains(body, `id="intent-error">none<`) {
			t.Fatalf("an intent without attempts: %s", body)
		}

		resp, body = b.get("/dashboard/payments/sessions?status=open")
		wantStatus(t, "the open sessions", resp, body, http.StatusOK)
		if !strings.Contains(body, session.Str("id")) {
			t.Fatalf("the open sessions: %s", body)
		}
		_, body = b.get("/dashboard/payments/sessions?status=completed")
		if !strings.Contains(body, `id="sessions-empty"`) {
			t.Fatalf("the completed sessions: %s", body)
		}
		resp, body = b.get("/dashboard/payments/sessions/" + session.Str("id"))
		wantStatus(t, "the session", resp, body, http.StatusOK)
		if !strings.Contains(body, `id="session-status">open<`) || !strings.Contains(body, "$3.00") || !strings.Contains(body, `id="page-attempts-empty"`) {
			t.Fatalf("the session's page: %s", body)
		}

		// A card form the dashboard opened to store a card has no intent: its page says so.
		owner := s.browser(t)
		owner.signIn("owner@maple.example")
		cust, _ := a.customer(map[string]any{"email": "ada@example.com"})
		resp, body = owner.get("/dashboard/customers/" + cust + "/cards/new")
		wantStatus(t, "the card form", resp, body, http.StatusOK)
		_, body = b.get("/dashboard/payments/sessions")
		ids := regexp.MustCompile(`href="/dashboard/payments/sessions/([^"?]+)"`).FindAllStringSubmatch(body, -1)
		if len(ids) != 2 || ids[1][1] != session.Str("id") {
			t.Fatalf("the sessions with the card form's, newest first: %v", ids)
		}
		resp, body = b.get("/dashboard/payments/sessions/" + ids[0][1])
		wantStatus(t, "the card form's session", resp, body, http.StatusOK)
		if !strings.Contains(body, `id="session-purpose"`) {
			t.Fatalf("the card form's session page: %s", body)
		}

		// Another merchant's intent and session are not found.
		other := s.srv.NewMerchant(t)
		okey := s.srv.NewAPIKey(t, "acct_"+other.ID, checkout.AllPermissions)
		theirs := s.srv.Do(t, "POST", "/v1/checkout/hosted-payment-page/sessions", map[string]any{"amount": 300, "currency": "usd"},
			checkout.HeaderAPIKey, okey.Key, checkout.HeaderAccount, "acct_"+other.ID)
		if theirs.Status != http.StatusOK {
			t.Fatalf("their session: %s", theirs.Raw)
		}
		for _, p := range []string{"/dashboard/payments/sessions/" + theirs.Str("id"), "/dashboard/payments/intents/" + theirs.Str("payment_intent")} {
			resp, body = b.get(p)
			wantStatus(t, "GET "+p, resp, body, http.StatusNotFound)
		}
		_, body = b.get("/dashboard/payments/sessions")
		if strings.Contains(body, theirs.Str("id")) {
			t.Fatal("another merchant's session is listed")
		}
		sales := s.browser(t)
		sales.signIn("sales@maple.example")
		for _, p := range []string{"/dashboard/payments/intents", "/dashboard/payments/sessions", "/dashboard/subscriptions", "/dashboard/plans"} {
			resp, body = sales.get(p)
			wantStatus(t, "sales at "+p, resp, body, http.StatusForbidden)
		}

		// An intent whose payment was declined: its page shows the API's last error, not "none", and
		// the declined attempt.
		failed := v1("POST", "/v1/payment-intents", map[string]any{"amount": 900, "currency": "usd", "payment_method": method(cardtest.Declined)}).Str("id")
		r := v1("POST", "/v1/payment-intents/"+failed+"/confirm", nil)
		lastErr, _ := r.Body["last_payment_error"].(map[string]any)
		if r.Str("status") != "requires_payment_method" || lastErr == nil || lastErr["message"] == "" {
			t.Fatalf("the declined intent through the API: %s", r.Raw)
		}
		_, body = b.get("/dashboard/payments/intents/" + failed)
		want := fmt.Sprintf(`id="intent-error">%s (%s, %s)<`, html.EscapeString(lastErr["message"].(string)), lastErr["code"], lastErr["decline_code"])
		if !strings.Contains(body, want) || !strings.Contains(body, `id="intent-status">requires_payment_method<`) {
			t.Fatalf("the declined intent's page lacks %s: %s", want, body)
		}
		if links := regexp.MustCompile(`<td><span class="badge badge-critical">DECLINED</span>[^<]*</td>`).FindAllString(body, -1); len(links) != 1 {
			t.Fatalf("the declined intent's attempts: %q", links)
		}

		// A session a buyer tried to pay on: a declined card, then a good one. Its page shows the tries
		// on the page with their errors and the ledger's attempts, declined then approved.
		paid := v1("POST", "/v1/checkout/hosted-payment-page/sessions", map[string]any{"amount": 450, "currency": "usd"})
		hpp := strings.Replace(paid.Str("url"), s.srv.URL, "", 1)
		card := func(number string) map[string]any {
			return map[string]any{"type": "card", "card": map[string]any{"number": number, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}
		}
		if got := s.srv.Do(t, "POST", hpp+"/pay", card(cardtest.Declined)); got.Str("outcome") != "failed" {
			t.Fatalf("a declined try on the page: %s", got.Raw)
		}
		sessionPage := "/dashboard/payments/sessions/" + paid.Str("id")
		_, body = b.get(sessionPage)
		tries := regexp.MustCompile(`<tr><td>[^<]*</td><td><span class="badge badge-[a-z]+">([^<]*)</span></td><td>([^<]*)</td></tr>`)
		if tried := tries.FindAllStringSubmatch(body, -1); len(tried) != 1 || tried[0][2] == "—" || strings.Contains(body, `id="page-attempts-empty"`) ||
			strings.Contains(body, `id="session-error">none<`) {
			t.Fatalf("the session after a declined try: tries %q: %s", tried, body)
		}
		if got := s.srv.Do(t, "POST", hpp+"/pay", card(cardtest.Visa)); got.Str("outcome") != "completed" {
			t.Fatalf("a good card on the page: %s", got.Raw)
		}
		_, body = b.get(sessionPage)
		tried := tries.FindAllStringSubmatch(body, -1)
		results := regexp.MustCompile(`<td><span class="badge badge-[a-z]+">(APPROVED|DECLINED)</span>[^<]*</td>`).FindAllStringSubmatch(body, -1)
		if len(tried) != 2 || tried[0][2] == tried[1][2] || !strings.Contains(body, `id="session-status">completed<`) ||
			len(results) != 2 || results[0][1] != "DECLINED" || results[1][1] != "APPROVED" {
			t.Fatalf("the paid session: tries %q, ledger attempts %q: %s", tried, results, body)
		}
	})
}

// The lists page newest first: 30 plans are two pages, older then newer again.
func TestPlansPaging(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{NoBillingEngine: true})
	a := s.api(t, s.merchantID)
	for i := range 30 {
		a.must(t, "POST", "/plan-service/plan", map[string]any{"name": "Plan " + time.Duration(i).String(), "amount": "1.00", "frequency": "DAILY"})
	}
	b := s.browser(t)
	b.signIn("owner@maple.example")
	_, body := b.get("/dashboard/plans")
	older := regexp.MustCompile(`<a href="\?after=(\d+)" rel="next">Older</a>`).FindStringSubmatch(body)
	if n := strings.Count(body, `<td><a href="/dashboard/plans/`); n != 25 || older == nil || strings.Contains(body, "Newer") {
		t.Fatalf("the first page: %d rows: %s", n, body)
	}
	_, body = b.get("/dashboard/plans?after=" + older[1])
	newer := regexp.MustCompile(`<a href="\?before=(\d+)" rel="prev">Newer</a>`).FindStringSubmatch(body)
	if n := strings.Count(body, `<td><a href="/dashboard/plans/`); n != 5 || newer == nil || strings.Contains(body, "Older") {
		t.Fatalf("the second page: %d rows: %s", n, body)
	}
	_, body = b.get("/dashboard/plans?before=" + newer[1])
	if n := strings.Count(body, `<td><a href="/dashboard/plans/`); n != 25 || strings.Contains(body, "Newer") || !strings.Contains(body, "Older") {
		t.Fatalf("back to the first page: %d rows: %s", n, body)
	}
	resp, body := b.get("/dashboard/plans?after=x")
	wantStatus(t, "a bad cursor", resp, body, http.StatusBadRequest)
}

// In Chromium, at a phone's width: from the Billing section, the RETRY filter, then a subscription
// paused and resumed through its confirmations (a disclosure and its button, without script), as the
// API then shows it.
func TestPauseAndResumeInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newBillingShop(t, db)
		ctx := browsertest.New(t)
		browsertest.Viewport(t, ctx, browsertest.Phone)
		signInInBrowser(t, ctx, s.srv.URL, "admin@maple.example", pw, "nav")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`details.menu summary`)), // the navigation is a menu at this width
			chromedp.Click(chromedp.CSS(`nav a[href="/dashboard/subscriptions"]`)),
			chromedp.Click(chromedp.CSS(`details.filter > summary`)), // the form waits behind the Filter disclosure
			chromedp.WaitVisible(chromedp.CSS("#filter-status")),
			chromedp.SetValue(chromedp.CSS("#filter-status"), "ACTIVE"),
			chromedp.Click(chromedp.CSS(`form.filters button`)),
			// The filtered page, not the list it replaces, which showed the subscription too: only the
			// server marks the chosen status selected.
			chromedp.WaitReady(chromedp.CSS(`#filter-status option[selected]`)),
			chromedp.WaitVisible(chromedp.CSS(`a[href="/dashboard/subscriptions/`+s.good+`/`+s.goodSub+`"]`)),
		)
		if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#subscriptions tbody tr').length`); n != 1 {
			t.Fatalf("%d ACTIVE subscriptions listed", n)
		}
		sub := "/customer-service/customer/" + s.good + "/subscription/" + s.goodSub
		for _, step := range []struct{ action, status string }{{"pause", "PAUSED"}, {"resume", "ACTIVE"}} {
			browsertest.Step(t, ctx, 30*time.Second,
				chromedp.Navigate(s.srv.URL+"/dashboard/subscriptions/"+s.good+"/"+s.goodSub),
				chromedp.WaitVisible(chromedp.CSS("#"+step.action+" summary")),
			)
			if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
				t.Fatalf("the subscription's page is %d px wide at 375", w)
			}
			if browsertest.Eval[bool](t, ctx, `document.querySelector('#`+step.action+` button').checkVisibility()`) {
				t.Fatalf("the %s button shows before its confirmation is opened", step.action)
			}
			browsertest.Step(t, ctx, 30*time.Second,
				chromedp.Click(chromedp.CSS("#"+step.action+" summary")),
				chromedp.WaitVisible(chromedp.CSS("#"+step.action+" button")),
				chromedp.Click(chromedp.CSS("#"+step.action+" button")),
				chromedp.WaitVisible(chromedp.CSS("[role=status]")),
			)
			if got := browsertest.Eval[string](t, ctx, `document.getElementById('subscription-status').textContent`); got != step.status {
				t.Fatalf("after %s the page shows %s", step.action, got)
			}
			if r := s.a.must(t, "GET", sub, nil); r.Str("status") != step.status {
				t.Fatalf("after %s, the API: %s", step.action, r.Raw)
			}
		}
	})
}

// Every page of Billing and Payments, checked with axe-core in light and dark, at desktop and phone
// widths (browsertest.CheckAccessibilityEverywhere), and no wider than the phone's 375 px; on
// SQLite.
func TestBillingAndPaymentsAccessible(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newBillingShop(t, db)
		key := s.srv.NewAPIKey(t, "acct_"+s.merchantID, checkout.AllPermissions)
		v1 := func(path string, body any) servertest.Response {
			r := s.srv.Do(t, "POST", path, body, checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_"+s.merchantID)
			if r.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", path, r.Status, r.Raw)
			}
			return r
		}
		pm := v1("/v1/payment-methods", map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Declined, "exp_month": 12,
			"exp_year": 2040, "cvc": "123"}}).Str("id")
		intent := v1("/v1/payment-intents", map[string]any{"amount": 1250, "currency": "usd", "payment_method": pm, "description": "A box of tea"}).Str("id")
		v1("/v1/payment-intents/"+intent+"/confirm", nil)
		session := v1("/v1/checkout/hosted-payment-page/sessions", map[string]any{"amount": 300, "currency": "usd",
			"billing_details": map[string]any{"name": "Ada Lovelace"}}).Str("id")

		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		visit := func(path, wait, name string, open ...string) {
			t.Helper()
			browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(wait)))
			for _, sel := range open {
				browsertest.Step(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(sel+" summary")))
			}
			browsertest.CheckAccessibilityEverywhere(t, ctx, name)
			browsertest.Viewport(t, ctx, browsertest.Phone)
			if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
				t.Errorf("%s is %d px wide at 375", name, w)
			}
			browsertest.Viewport(t, ctx, browsertest.Desktop)
		}
		visit("/dashboard/subscriptions", "#subscriptions", "subscriptions")
		visit("/dashboard/subscriptions?status=LATE", "[role=alert]", "subscriptions, a bad filter")
		visit("/dashboard/subscriptions/"+s.bad+"/"+s.badSub, "#history", "a subscription in RETRY", "#retry", "#pause", "#amount", "#cancel")
		visit("/dashboard/plans", "#plans", "plans")
		visit("/dashboard/plans/new", "#plan-name", "new plan")
		visit("/dashboard/plans/"+s.plan, "#plan-name", "a plan", "details.confirm")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.SetValue(chromedp.CSS("#plan-amount"), "1.234"),
			chromedp.Click(chromedp.CSS(`form[action="/dashboard/plans/`+s.plan+`"] button`)),
			chromedp.WaitVisible(chromedp.CSS("#error-amount")),
		)
		browsertest.CheckAccessibilityEverywhere(t, ctx, "a plan, a refused amount")
		visit("/dashboard/payments/intents", "#intents", "payment intents")
		visit("/dashboard/payments/intents/"+intent, "#attempts", "a payment intent")
		visit("/dashboard/payments/sessions", "#sessions", "hosted-page sessions")
		visit("/dashboard/payments/sessions/"+session, "#session", "a hosted-page session")
	})
}

// retryFromPage sends the "retry now" form of a subscription's page as the page shows it, and
// returns the answer's body.
func retryFromPage(t *testing.T, b *browser, csrf, page string) string {
	t.Helper()
	_, body := b.get(page)
	resp, body := b.post(page+"/retry", url.Values{"csrf_token": {csrf}, "cycle": {fieldValue(t, body, "cycle")},
		"failed": {fieldValue(t, body, "failed")}})
	wantStatus(t, "retry now", resp, body, http.StatusOK)
	return body
}

// suspend retries the shop's subscription in RETRY on its declined card from the dashboard until
// the engine has used up its retries, and checks that it is SUSPENDED: the way a real subscription
// gets there, without waiting the retry schedule's days.
func (s *billingShop) suspend(t *testing.T, b *browser, csrf, customer, sub string) {
	t.Helper()
	page, api := "/dashboard/subscriptions/"+customer+"/"+sub, "/customer-service/customer/"+customer+"/subscription/"+sub
	for range 3 { // billing.DefaultRetrySchedule: three retries after the first decline
		if r := s.a.must(t, "GET", api, nil); r.Str("status") != "RETRY" {
			t.Fatalf("before a retry on the declined card: %s", r.Raw)
		}
		if body := retryFromPage(t, b, csrf, page); !strings.Contains(body, "The retry is declined") {
			t.Fatalf("a retry on the declined card: %s", body)
		}
	}
	if r := s.a.must(t, "GET", api, nil); r.Str("status") != "SUSPENDED" || r.Num("failed_attempts") != "4" {
		t.Fatalf("after its retries were used up: %s", r.Raw)
	}
}

// "Retry now" on a SUSPENDED subscription (its retries used up on a declined card, then its card
// replaced with a good one): the form sent three times at once and once more after charges the unpaid
// cycle once, through the engine, and the subscription is ACTIVE again. The status filter lists it
// under SUSPENDED before and under ACTIVE after; CANCELED and EXPIRED list their own subscriptions.
func TestRetryNowSuspendedAndStatusFilter(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newBillingShop(t, db)
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		s.suspend(t, b, csrf, s.bad, s.badSub)

		// A canceled subscription, and one whose plan's single payment is made: EXPIRED.
		once := s.a.must(t, "POST", "/plan-service/plan", map[string]any{"name": "Once", "amount": "4.00", "currency": "USD",
			"frequency": "MONTHLY", "number_of_payments": 1}).Str("lookup_id")
		expired, _ := s.a.customerWithCard(t, "hedy@example.com", cardtest.Visa)
		expiredSub := s.a.subscribe(t, expired, once)
		canceled, _ := s.a.customerWithCard(t, "ken@example.com", cardtest.Visa)
		canceledSub := s.a.subscribe(t, canceled, s.plan)
		s.a.must(t, "PATCH", "/customer-service/customer/"+canceled+"/subscription/"+canceledSub, map[string]any{"status": "CANCELED"})
		if _, err := s.srv.Billing().RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := s.a.must(t, "GET", "/customer-service/customer/"+expired+"/subscription/"+expiredSub, nil); r.Str("status") != "EXPIRED" {
			t.Fatalf("the single payment's subscription after it: %s", r.Raw)
		}
		listed := func(status string) []string {
			t.Helper()
			resp, body := b.get("/dashboard/subscriptions?status=" + status)
			wantStatus(t, status+" subscriptions", resp, body, http.StatusOK)
			var subs []string
			for _, m := range regexp.MustCompile(`href="/dashboard/subscriptions/[^/"]+/([^"?]+)"`).FindAllStringSubmatch(body, -1) {
				if !slices.Contains(subs, m[1]) {
					subs = append(subs, m[1])
				}
			}
			return subs
		}
		for status, want := range map[string]string{"SUSPENDED": s.badSub, "CANCELED": canceledSub, "EXPIRED": expiredSub} {
			if got := listed(status); !slices.Equal(got, []string{want}) {
				t.Fatalf("the %s list holds %v, want only %s", status, got, want)
			}
		}

		card := s.a.must(t, "POST", "/customer-service/customer/"+s.bad+"/card", map[string]any{"card_number": cardtest.Mastercard,
			"card_expiry_month": "12", "card_expiry_year": "2099"}).Body["cards"].([]any)
		sub := "/customer-service/customer/" + s.bad + "/subscription/" + s.badSub
		s.a.must(t, "PATCH", sub, map[string]any{"card_lookup_id": card[len(card)-1].(map[string]any)["lookup_id"]})
		approved := s.recurring(t, "APPROVED") // the good customer's and the single payment
		page := "/dashboard/subscriptions/" + s.bad + "/" + s.badSub
		_, body := b.get(page)
		form := url.Values{"csrf_token": {csrf}, "cycle": {fieldValue(t, body, "cycle")}, "failed": {fieldValue(t, body, "failed")}}
		var wg sync.WaitGroup
		bodies := make([]string, 3)
		for i := range bodies {
			wg.Go(func() {
				resp, body := b.post(page+"/retry", form)
				if resp.StatusCode != http.StatusOK {
					t.Errorf("a submit of the retry answered %d: %s", resp.StatusCode, body)
				}
				bodies[i] = body
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		charged := 0
		for _, body := range bodies {
			if strings.Contains(body, "The retry is approved: $9.00 charged.") {
				charged++
			} else if !strings.Contains(body, "This retry was made already") {
				t.Fatalf("a submit's answer: %s", body)
			}
		}
		if charged != 1 {
			t.Fatalf("%d of the submits say they charged", charged)
		}
		resp, body := b.post(page+"/retry", form)
		wantStatus(t, "the reload", resp, body, http.StatusOK)
		if !strings.Contains(body, "This retry was made already") {
			t.Fatalf("the reload's answer: %s", body)
		}
		if n := s.recurring(t, "APPROVED"); n != approved+1 {
			t.Fatalf("%d approved recurring charges, want %d: the retry of the suspended subscription charged %d times", n, approved+1, n-approved)
		}
		if n := s.recurring(t, "DECLINED"); n != 4 {
			t.Fatalf("%d declined recurring charges, want the first and three retries", n)
		}
		r := s.a.must(t, "GET", sub, nil)
		if r.Str("status") != "ACTIVE" || r.Num("failed_attempts") != "0" || r.Num("completed_cycles") != "1" {
			t.Fatalf("after the retry: %s", r.Raw)
		}
		if got := listed("SUSPENDED"); len(got) != 0 {
			t.Fatalf("the SUSPENDED list after the retry: %v", got)
		}
		if got := listed("ACTIVE"); !slices.Contains(got, s.badSub) {
			t.Fatalf("the ACTIVE list after the retry lacks it: %v", got)
		}
		if _, err := s.srv.Billing().RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := s.recurring(t, "APPROVED"); n != approved+1 {
			t.Fatalf("the engine charged the retried cycle again: %d approved", n)
		}
	})
}

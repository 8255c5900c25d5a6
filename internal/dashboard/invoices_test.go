package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

const invoiceAPI = "/invoice-service/invoice"

// invoice makes an invoice through the API (send: and e-mails it) and returns its lookup id.
func (a *api) invoice(t *testing.T, send bool, fields map[string]any) string {
	t.Helper()
	fields["send_email"] = send
	return a.must(t, "POST", invoiceAPI, fields).Str("lookup_id")
}

// oneLine is an invoice of one line of price in currency to email.
func oneLine(number, currency, price, email string) map[string]any {
	return map[string]any{"invoice_number": number, "currency": currency, "customer_email": email,
		"items": []map[string]any{{"description": "Work", "unit_price": price}}}
}

// readmeForm is the README's invoice (176.98 CAD) as the dashboard's form posts it, with an empty
// third line as the form always ends with.
func readmeForm(csrf, key string) url.Values {
	return url.Values{"csrf_token": {csrf}, "key": {key}, "action": {"save"}, "customer_lookup_id": {""},
		"customer_email": {"bob@example.com"}, "customer_first_name": {"Bob"}, "customer_last_name": {""}, "customer_company": {""},
		"invoice_number": {"2026-001"}, "currency": {"CAD"}, "due_date": {"2030-01-31"},
		"items[0].description": {"Widgets"}, "items[0].quantity": {"2"}, "items[0].unit_price": {"49.99"}, "items[0].sku": {"W-1"},
		"items[1].description": {"Consulting hours"}, "items[1].quantity": {"1.5"}, "items[1].unit_price": {"33.33"}, "items[1].sku": {""},
		"items[2].description": {""}, "items[2].quantity": {""}, "items[2].unit_price": {""}, "items[2].sku": {""},
		"tax_rate": {"13"}, "discount_amount": {"5.00"}, "shipping_amount": {"12.50"}, "notes": {""}, "terms": {"Net 30"}}
}

// inputValue is the value of the input name on page.
func inputValue(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no field %s in %s", name, page)
	}
	return m[1]
}

// formKeyOf is the key of the form whose action is action on page.
func formKeyOf(t *testing.T, page, action string) string {
	t.Helper()
	i := strings.Index(page, `action="`+action+`"`)
	if i < 0 {
		t.Fatalf("no form to %s in %s", action, page)
	}
	return signintest.Field(t, page[i:], "key")
}

// invoiceCount is how many invoices the merchant has.
func invoiceCount(t *testing.T, db *store.DB, merchantID string) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM invoices WHERE merchant_id = $1`, merchantID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// mails are the subjects of the outbox's e-mails to addr.
func mails(t *testing.T, db *store.DB, addr string) []string {
	t.Helper()
	var out []string
	for _, e := range billingtest.Outbox(t, db) {
		if e.To == addr {
			out = append(out, e.Subject)
		}
	}
	return out
}

// The list: tabs by status, each with the count and sum of its invoices per currency, as the API
// lists them; a search by invoice number or by customer e-mail (any case) narrowed by the tab; newest
// first, 25 a page, with Older and Newer links; a status that is none refused naming it.
func TestInvoiceListTotalsAndSearch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		a := s.api(t, s.merchantID)
		b := s.browser(t)
		b.signIn("owner@maple.example")
		resp, body := b.get("/dashboard/invoices")
		wantStatus(t, "no invoices", resp, body, http.StatusOK)
		if !strings.Contains(body, `id="invoices-empty"`) || !strings.Contains(body, `href="/dashboard/invoices/new"`) {
			t.Fatalf("the invoices of a new merchant: %s", body)
		}
		draft := a.invoice(t, false, oneLine("A-1", "CAD", "176.98", "bob@example.com"))
		a.invoice(t, true, oneLine("A-2", "USD", "10.00", "ann@example.com"))
		a.invoice(t, true, oneLine("A-3", "CAD", "20.00", "Bob@Example.com"))
		gone := a.invoice(t, false, oneLine("A-4", "USD", "5.50", "cy@example.com"))
		a.must(t, "PUT", invoiceAPI+"/"+gone, map[string]any{"status": "CANCELLED"})
		a.invoice(t, false, oneLine("A-5", "CAD", "1.01", "bob@example.com"))
		for _, tc := range []struct {
			query      string
			sums, list []string
		}{
			{"", []string{"CAD 3 CA$197.99", "USD 2 $15.50"}, []string{"A-5", "A-4", "A-3", "A-2", "A-1"}},
			{"?status=DRAFT", []string{"CAD 2 CA$177.99"}, []string{"A-5", "A-1"}},
			{"?status=SENT", []string{"CAD 1 CA$20.00", "USD 1 $10.00"}, []string{"A-3", "A-2"}},
			{"?status=CANCELLED", []string{"USD 1 $5.50"}, []string{"A-4"}},
			{"?status=PAID", nil, nil},
			{"?q=BOB%40example.com", []string{"CAD 3 CA$197.99"}, []string{"A-5", "A-3", "A-1"}},
			{"?q=bob%40example.com&status=SENT", []string{"CAD 1 CA$20.00"}, []string{"A-3"}},
			{"?q=A-2", []string{"USD 1 $10.00"}, []string{"A-2"}},
			{"?q=A-", nil, nil},
		} {
			resp, body := b.get("/dashboard/invoices" + tc.query)
			wantStatus(t, tc.query, resp, body, http.StatusOK)
			if got := rows(body, "invoice-sums"); strings.Join(got, "|") != strings.Join(tc.sums, "|") {
				t.Errorf("%s: the sums %q, want %q", tc.query, got, tc.sums)
			}
			var numbers []string
			for _, r := range rows(body, "invoices") {
				numbers = append(numbers, strings.Fields(r)[0])
			}
			if strings.Join(numbers, " ") != strings.Join(tc.list, " ") {
				t.Errorf("%s: the list %q, want %q", tc.query, numbers, tc.list)
			}
			if len(tc.list) == 0 && !strings.Contains(body, `id="invoices-empty"`) {
				t.Errorf("%s: an empty list does not say so", tc.query)
			}
		}
		if _, body := b.get("/dashboard/invoices?status=SENT&q=bob%40example.com"); !strings.Contains(body, `href="/dashboard/invoices?q=bob%40example.com&amp;status=PAID"`) ||
			!strings.Contains(body, `href="/dashboard/invoices?q=bob%40example.com&amp;status=SENT" aria-current="page"`) {
			t.Errorf("the tabs do not keep the search: %s", body)
		}
		if _, body := b.get("/dashboard/invoices/" + draft); !strings.Contains(body, "CA$176.98") {
			t.Errorf("the draft's page: %s", body)
		}
		resp, body = b.get("/dashboard/invoices?status=LOST")
		wantStatus(t, "a status that is none", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "Status must be one of DRAFT, SENT, OVERDUE, PAID, CANCELLED.") {
			t.Errorf("the refused status: %s", body)
		}

		// 25 a page, newest first; the older page links back.
		for i := range 22 {
			a.invoice(t, false, oneLine(fmt.Sprintf("B-%02d", i), "CAD", "1.00", "many@example.com"))
		}
		_, body = b.get("/dashboard/invoices")
		first := rows(body, "invoices")
		older := regexp.MustCompile(`href="(\?after=[0-9]+)" rel="next"`).FindStringSubmatch(body)
		if len(first) != 25 || !strings.HasPrefix(first[0], "B-21 ") || older == nil || strings.Contains(body, `rel="prev"`) {
			t.Fatalf("the first page: %d rows from %q, older %v", len(first), first[0], older)
		}
		if got := rows(body, "invoice-sums"); strings.Join(got, "|") != "CAD 25 CA$219.99|USD 2 $15.50" {
			t.Errorf("the sums count every page: %q", got)
		}
		_, body = b.get("/dashboard/invoices" + strings.ReplaceAll(older[1], "&amp;", "&"))
		second := rows(body, "invoices")
		if len(second) != 2 || !strings.HasPrefix(second[0], "A-2 ") || !strings.Contains(body, `rel="prev"`) || strings.Contains(body, `rel="next"`) {
			t.Fatalf("the second page: %q", second)
		}
	})
}

// postTotals asks the form's totals as its script does.
func postTotals(t *testing.T, b *browser, form url.Values) map[string]any {
	t.Helper()
	resp, body := b.post("/dashboard/invoices/totals", form)
	wantStatus(t, "the totals", resp, body, http.StatusOK)
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the totals' answer %s: %v", body, err)
	}
	return out
}

// An invoice made from the form, with two lines: "Recalculate" and the script's totals endpoint show
// the totals the API then shows for it, line by line; a line's bad price is refused beside its field,
// the form kept; the number is suggested after the newest; a number taken is refused beside it; the
// vault customer is found by e-mail. Edited, a line removed (left empty) and a quantity changed, the
// API shows the new totals.
func TestInvoiceCreateAndEdit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		a := s.api(t, s.merchantID)
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		resp, page := b.get("/dashboard/invoices/new")
		wantStatus(t, "the new invoice form", resp, page, http.StatusOK)
		if inputValue(t, page, "invoice_number") != "INV-0001" || !strings.Contains(page, "<option selected>CAD</option>") ||
			!strings.Contains(page, `name="items[0].description"`) || strings.Contains(page, `name="items[1].description"`) {
			t.Fatalf("the new invoice form: %s", page)
		}
		key := formKeyOf(t, page, "/dashboard/invoices/new")

		form := readmeForm(csrf, key)
		form.Set("action", "recalculate")
		resp, page = b.post("/dashboard/invoices/new", form)
		wantStatus(t, "recalculate", resp, page, http.StatusOK)
		if got := rows(page, "invoice-totals"); strings.Join(got, "|") != "Subtotal CA$149.98|Tax CA$19.50|Discount -CA$5.00|Shipping CA$12.50|Total CA$176.98" {
			t.Errorf("the recalculated totals: %q", got)
		}
		for i, want := range []string{"CA$99.98, tax CA$13.00", "CA$50.00, tax CA$6.50"} {
			if !strings.Contains(page, fmt.Sprintf(`id="line-%d-amount">%s</p>`, i, want)) {
				t.Errorf("line %d does not come to %s: %s", i+1, want, page)
			}
		}
		if inputValue(t, page, "items[1].unit_price") != "33.33" || !strings.Contains(page, `name="items[2].description" value=""`) ||
			strings.Contains(page, `name="items[3].description"`) || formKeyOf(t, page, "/dashboard/invoices/new") != key {
			t.Errorf("the recalculated form does not keep its lines, one empty line and its key: %s", page)
		}
		if n := invoiceCount(t, db, s.merchantID); n != 0 {
			t.Fatalf("recalculating made %d invoices", n)
		}
		// The script's question, with an empty line between two: the answer is by the form's rows.
		js := readmeForm(csrf, key)
		for _, f := range []string{"description", "quantity", "unit_price", "sku"} {
			js.Set("items[2]."+f, js.Get("items[1]."+f))
			js.Set("items[1]."+f, "")
		}
		js.Set("items[3].description", "Half done")
		tot := postTotals(t, b, js)
		if lines := fmt.Sprint(tot["lines"]); lines != "[CA$99.98, tax CA$13.00  CA$50.00, tax CA$6.50 Not counted: Line 3 unit price is required.]" {
			t.Errorf("the script's lines: %s", lines)
		}
		if last := tot["totals"].([]any)[4].(map[string]any); last["id"] != "total-total" || last["value"] != "CA$176.98" ||
			!strings.Contains(tot["note"].(string), "Line 3 is not counted") {
			t.Errorf("the script's totals: %v", tot)
		}

		form.Set("items[1].unit_price", "33.333")
		form.Set("action", "save")
		resp, page = b.post("/dashboard/invoices/new", form)
		wantStatus(t, "a price of 3 decimals", resp, page, http.StatusBadRequest)
		if !regexp.MustCompile(`<p class="error" id="line-1-unit_price-error">Line 2 unit price [^<]+</p>`).MatchString(page) ||
			!strings.Contains(page, `id="line-1-unit_price" name="items[1].unit_price" value="33.333"`) ||
			!strings.Contains(page, `aria-invalid="true" aria-describedby="line-1-unit_price-error"`) || inputValue(t, page, "customer_email") != "bob@example.com" {
			t.Fatalf("the refused price is not shown beside its field: %s", page)
		}
		form.Set("items[1].unit_price", "33.33")
		resp, page = b.post("/dashboard/invoices/new", form)
		wantStatus(t, "save", resp, page, http.StatusSeeOther)
		id := strings.TrimSuffix(strings.TrimPrefix(resp.Header.Get("Location"), "/dashboard/invoices/"), "?done=created")
		inv := a.must(t, "GET", invoiceAPI+"/"+id, nil)
		fields := map[string]string{"status": "DRAFT", "invoice_number": "2026-001", "currency": "CAD", "customer_email": "bob@example.com",
			"subtotal_amount": "149.98", "tax_amount": "19.50", "total_amount": "176.98", "tax_rate": "13", "due_date": "2030-01-31", "terms": "Net 30"}
		for k, v := range fields {
			if got := inv.Str(k) + inv.Num(k); got != v {
				t.Errorf("the invoice made from the form, through the API: %s = %q, want %q (%s)", k, got, v, inv.Raw)
			}
		}
		items := inv.Body["items"].([]any)
		if len(items) != 2 || items[1].(map[string]any)["total_amount"].(json.Number) != "50.00" || items[0].(map[string]any)["sku"] != "W-1" {
			t.Errorf("the lines through the API: %s", inv.Raw)
		}
		_, page = b.get("/dashboard/invoices/" + id + "?done=created")
		if !strings.Contains(page, "The invoice is saved as a draft.") || !strings.Contains(page, "CA$176.98") ||
			!strings.Contains(page, `data-copy="pay-link"`) || !strings.Contains(page, inv.Str("payment_url")) ||
			!strings.Contains(page, `href="`+strings.TrimSuffix(inv.Str("payment_url"), "/pay")+`/pdf"`) {
			t.Errorf("the invoice's page: %s", page)
		}

		// The next number follows; a number taken is refused beside the field.
		_, page = b.get("/dashboard/invoices/new")
		if n := inputValue(t, page, "invoice_number"); n != "2026-002" {
			t.Errorf("the next number suggested: %q", n)
		}
		taken := readmeForm(csrf, formKeyOf(t, page, "/dashboard/invoices/new"))
		resp, page = b.post("/dashboard/invoices/new", taken)
		wantStatus(t, "a number taken", resp, page, http.StatusConflict)
		if !strings.Contains(page, `<p class="error" id="invoice_number-error">Another invoice of yours has this number`) {
			t.Errorf("the number taken: %s", page)
		}
		// A vault customer named by e-mail: the invoice names the customer, whose fields fill the empty ones.
		c, _ := a.customer(map[string]any{"email": "carol@example.com", "first_name": "Carol", "company": "Carol & Co"})
		taken.Set("invoice_number", "2026-002")
		taken.Set("customer_lookup_id", "Carol@Example.com")
		taken.Set("customer_email", "")
		taken.Set("customer_first_name", "")
		resp, page = b.post("/dashboard/invoices/new", taken)
		wantStatus(t, "a vault customer's invoice", resp, page, http.StatusSeeOther)
		carol := strings.TrimSuffix(strings.TrimPrefix(resp.Header.Get("Location"), "/dashboard/invoices/"), "?done=created")
		if r := a.must(t, "GET", invoiceAPI+"/"+carol, nil); r.Str("customer_lookup_id") != c || r.Str("customer_email") != "carol@example.com" ||
			r.Str("customer_company") != "Carol & Co" {
			t.Errorf("the vault customer's invoice: %s", r.Raw)
		}
		_, page = b.get("/dashboard/invoices/new?customer=" + c)
		if inputValue(t, page, "customer_lookup_id") != c {
			t.Errorf("the customer's page's link does not fill in the customer: %s", page)
		}
		nobody := readmeForm(csrf, formKeyOf(t, page, "/dashboard/invoices/new"))
		nobody.Set("invoice_number", "2026-003")
		nobody.Set("customer_lookup_id", "nobody@example.com")
		resp, page = b.post("/dashboard/invoices/new", nobody)
		wantStatus(t, "an unknown vault customer", resp, page, http.StatusBadRequest)
		if !strings.Contains(page, `id="customer_lookup_id-error">Vault customer: No customer has the e-mail nobody@example.com.`) {
			t.Errorf("the unknown vault customer: %s", page)
		}

		// Edit: the form as the API shows the invoice; line 1 left empty, line 2 two hours.
		resp, page = b.get("/dashboard/invoices/" + id + "/edit")
		wantStatus(t, "the edit form", resp, page, http.StatusOK)
		if inputValue(t, page, "items[1].quantity") != "1.5" || inputValue(t, page, "tax_rate") != "13" ||
			inputValue(t, page, "discount_amount") != "5.00" || !strings.Contains(page, `name="items[2].description"`) {
			t.Fatalf("the edit form: %s", page)
		}
		edit := readmeForm(csrf, formKeyOf(t, page, "/dashboard/invoices/"+id+"/edit"))
		for _, f := range []string{"description", "quantity", "unit_price", "sku"} {
			edit.Set("items[0]."+f, "")
		}
		edit.Set("items[1].quantity", "2")
		edit.Set("terms", "")
		resp, page = b.post("/dashboard/invoices/"+id+"/edit", edit)
		wantStatus(t, "save the changes", resp, page, http.StatusSeeOther)
		// 2 × 33.33 = 66.66, tax 8.6658 → 8.67; less 5.00, plus 12.50: 82.83.
		if r := a.must(t, "GET", invoiceAPI+"/"+id, nil); r.Num("total_amount") != "82.83" || len(r.Body["items"].([]any)) != 1 || r.Str("terms") != "" {
			t.Errorf("the edited invoice through the API: %s", r.Raw)
		}
	})
}

// Send, send again, cancel and delete, each a form of the invoice's page acting once: the e-mail is
// in the outbox once per form however often the form is sent, to the address of the form; a bad
// address is refused beside its field; a cancelled invoice offers no form; a deleted draft is gone,
// and a sent invoice is not deleted.
func TestInvoiceSendCancelDelete(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		a := s.api(t, s.merchantID)
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		id := a.invoice(t, false, oneLine("S-1", "CAD", "40.00", "dana@example.com"))
		path := "/dashboard/invoices/" + id
		_, page := b.get(path)
		send := url.Values{"csrf_token": {csrf}, "key": {formKeyOf(t, page, path+"/send")}, "email": {"not an address"}, "subject": {"Your invoice"},
			"message": {"Thank you!"}}
		resp, page := b.post(path+"/send", send)
		wantStatus(t, "a bad address", resp, page, http.StatusBadRequest)
		if !strings.Contains(page, `<p class="error" id="send-email-error">E-mail to `) || !strings.Contains(page, `value="not an address"`) {
			t.Fatalf("the bad address: %s", page)
		}
		send.Set("email", "dana@example.com")
		for range 2 { // the form, then the same form again (a reload)
			resp, page = b.post(path+"/send", send)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path+"?done=sent" {
				t.Fatalf("send: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), page)
			}
		}
		if got := mails(t, db, "dana@example.com"); len(got) != 1 || got[0] != "Your invoice" {
			t.Fatalf("the e-mails sent: %q", got)
		}
		if r := a.must(t, "GET", invoiceAPI+"/"+id, nil); r.Str("status") != "SENT" {
			t.Fatalf("after sending: %s", r.Raw)
		}
		_, page = b.get(path + "?done=sent")
		if !strings.Contains(page, "The invoice is e-mailed with its payment link.") || !strings.Contains(page, "Send it again") {
			t.Fatalf("the sent invoice's page: %s", page)
		}
		// Send again, as a reminder: another form, another e-mail.
		resp, page = b.post(path+"/send", url.Values{"csrf_token": {csrf}, "key": {formKeyOf(t, page, path+"/send")}, "email": {"dana@example.com"}})
		wantStatus(t, "send again", resp, page, http.StatusSeeOther)
		if got := mails(t, db, "dana@example.com"); len(got) != 2 || got[1] != "Invoice S-1 from Maple & Birch Goods" {
			t.Fatalf("the e-mails after a reminder: %q", got)
		}
		// A sent invoice is not deleted: it is cancelled.
		resp, page = b.post(path+"/delete", url.Values{"csrf_token": {csrf}, "key": {"DELETEKEY1"}})
		wantStatus(t, "delete a sent invoice", resp, page, http.StatusConflict)
		if !strings.Contains(page, "only a DRAFT can be deleted") {
			t.Errorf("deleting a sent invoice: %s", page)
		}
		_, page = b.get(path)
		cancel := url.Values{"csrf_token": {csrf}, "key": {formKeyOf(t, page, path+"/cancel")}}
		for range 2 {
			resp, page = b.post(path+"/cancel", cancel)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path+"?done=cancelled" {
				t.Fatalf("cancel: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), page)
			}
		}
		if r := a.must(t, "GET", invoiceAPI+"/"+id, nil); r.Str("status") != "CANCELLED" {
			t.Fatalf("after cancelling: %s", r.Raw)
		}
		_, page = b.get(path + "?done=cancelled")
		if strings.Contains(page, `action="`+path+`/send"`) || strings.Contains(page, `action="`+path+`/cancel"`) || strings.Contains(page, "/edit") {
			t.Errorf("a cancelled invoice offers forms: %s", page)
		}
		resp, page = b.get(path + "/edit")
		wantStatus(t, "edit a cancelled invoice", resp, page, http.StatusConflict)
		// The audit trail names the owner for each thing done once.
		var trail []audit.Entry
		if err := db.Read(context.Background(), func(q store.Querier) error {
			var err error
			trail, err = audit.List(context.Background(), q, s.merchantID, audit.Filter{UserID: s.users[user.Owner].ID})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, e := range trail {
			if e.Resource == "invoice/"+id && e.Address == "127.0.0.1" {
				ops = append(ops, e.Operation)
			}
		}
		if strings.Join(ops, " ") != "invoice.cancel invoice.send invoice.send" {
			t.Errorf("the owner's audit records of the invoice, newest first: %q", ops)
		}

		draft := a.invoice(t, false, oneLine("S-2", "CAD", "3.00", "dana@example.com"))
		_, page = b.get("/dashboard/invoices/" + draft)
		del := url.Values{"csrf_token": {csrf}, "key": {formKeyOf(t, page, "/dashboard/invoices/"+draft+"/delete")}}
		for range 2 {
			resp, page = b.post("/dashboard/invoices/"+draft+"/delete", del)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/invoices?deleted=S-2" {
				t.Fatalf("delete the draft: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), page)
			}
		}
		if r := a.do(t, "GET", invoiceAPI+"/"+draft, nil); r.Status != http.StatusNotFound {
			t.Errorf("the deleted draft through the API: %d", r.Status)
		}
		if _, page = b.get("/dashboard/invoices?deleted=S-2"); !strings.Contains(page, "Invoice S-2 is deleted.") {
			t.Errorf("the list after the deletion: %s", page)
		}
	})
}

// The create form sent twice — one after the other (a reload), then twice at the same moment (a double
// click) — makes one invoice each time, and every submission lands on it; the same form with other
// values is refused and offers a new form.
func TestInvoiceDoubleSubmitCreatesOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		b := s.browser(t)
		csrf := b.signIn("admin@maple.example")
		_, page := b.get("/dashboard/invoices/new")
		form := readmeForm(csrf, formKeyOf(t, page, "/dashboard/invoices/new"))
		var first string
		for i := range 2 {
			resp, body := b.post("/dashboard/invoices/new", form)
			wantStatus(t, fmt.Sprintf("submit %d", i+1), resp, body, http.StatusSeeOther)
			if i == 0 {
				first = resp.Header.Get("Location")
			} else if resp.Header.Get("Location") != first {
				t.Fatalf("the second submit lands on %s, the first on %s", resp.Header.Get("Location"), first)
			}
		}
		if n := invoiceCount(t, db, s.merchantID); n != 1 {
			t.Fatalf("a form sent twice made %d invoices", n)
		}
		form.Set("invoice_number", "2026-009")
		resp, body := b.post("/dashboard/invoices/new", form)
		wantStatus(t, "the form again with another number", resp, body, http.StatusUnprocessableEntity)
		if !strings.Contains(body, "This form has already saved an invoice, with other values") || formKeyOf(t, body, "/dashboard/invoices/new") == form.Get("key") {
			t.Fatalf("the used form with other values: %s", body)
		}

		for round := range 3 {
			_, page := b.get("/dashboard/invoices/new")
			form := readmeForm(csrf, formKeyOf(t, page, "/dashboard/invoices/new"))
			form.Set("invoice_number", fmt.Sprintf("R-%d", round))
			var wg sync.WaitGroup
			start := make(chan struct{})
			statuses, locations, bodies := make([]int, 2), make([]string, 2), make([]string, 2)
			for i := range statuses {
				wg.Go(func() {
					<-start
					resp, body := b.post("/dashboard/invoices/new", form)
					statuses[i], locations[i], bodies[i] = resp.StatusCode, resp.Header.Get("Location"), body
				})
			}
			close(start)
			wg.Wait()
			if n := invoiceCount(t, db, s.merchantID); n != round+2 {
				t.Fatalf("round %d: two submits at once made %d invoices in all", round, n)
			}
			if statuses[0] != http.StatusSeeOther || statuses[1] != http.StatusSeeOther || locations[0] != locations[1] {
				t.Fatalf("round %d: the submits answered %v %v\n%s", round, statuses, locations, bodies)
			}
		}
	})
}

// A vault customer's sent invoice is charged from its page on the customer's stored card, once for a
// form sent twice: PAID, with the payment linked to its transaction's page.
func TestInvoiceChargeStoredCard(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		a := s.api(t, s.merchantID)
		c, cards := a.customer(map[string]any{"email": "erin@example.com", "first_name": "Erin"}, cardtest.Visa)
		id := a.invoice(t, true, map[string]any{"invoice_number": "P-1", "customer_lookup_id": c,
			"items": []map[string]any{{"description": "Retainer", "unit_price": "250.00"}}})
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		path := "/dashboard/invoices/" + id
		_, page := b.get(path)
		if !strings.Contains(page, `<option value="`+cards[0]+`">Visa ending 4242`) || !strings.Contains(page, "Charge CA$250.00") {
			t.Fatalf("the charge form: %s", page)
		}
		charge := url.Values{"csrf_token": {csrf}, "key": {formKeyOf(t, page, path+"/charge")}, "card": {cards[0]}}
		for range 2 {
			resp, body := b.post(path+"/charge", charge)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path+"?done=paid" {
				t.Fatalf("charge: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), body)
			}
		}
		r := a.must(t, "GET", invoiceAPI+"/"+id, nil)
		info, _ := r.Body["payment_info"].(map[string]any)
		if r.Str("status") != "PAID" || info == nil {
			t.Fatalf("the charged invoice: %s", r.Raw)
		}
		list, err := s.srv.Ledger().List(context.Background(), s.merchantID, payment.Filter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Transactions) != 1 || list.Transactions[0].TransactionID != info["transaction_id"] || list.Transactions[0].Amount != 25000 {
			t.Fatalf("the ledger after a charge form sent twice: %+v, the invoice's payment %v", list.Transactions, info)
		}
		_, page = b.get(path + "?done=paid")
		if !strings.Contains(page, `href="/dashboard/transactions/`+info["transaction_id"].(string)+`"`) || !strings.Contains(page, "Visa ending 4242") ||
			strings.Contains(page, `action="`+path+`/charge"`) || strings.Contains(page, `action="`+path+`/send"`) {
			t.Fatalf("the paid invoice's page: %s", page)
		}
	})
}

// Roles: owners and admins see every form; reporting sees the invoices, the list and the invoice as
// its customer sees it, and no form, and its POSTs are refused; sales staff see no invoice at all.
// Another merchant's invoice is not found, to see or to act on.
func TestInvoiceRolesAndOtherMerchant(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		a := s.api(t, s.merchantID)
		id := a.invoice(t, false, oneLine("R-1", "CAD", "12.00", "fay@example.com"))
		path := "/dashboard/invoices/" + id
		posts := []string{"/dashboard/invoices/new", "/dashboard/invoices/totals", path + "/edit", path + "/send", path + "/cancel",
			path + "/delete", path + "/charge"}

		rep := s.browser(t)
		rep.signIn("reporting@maple.example")
		for _, p := range []string{"/dashboard", "/dashboard/invoices", path} {
			resp, body := rep.get(p)
			wantStatus(t, "reporting at "+p, resp, body, http.StatusOK)
			if !strings.Contains(body, `href="/dashboard/invoices"`) || strings.Contains(body, `<form method="post" action="/dashboard/invoices`) ||
				strings.Contains(body, `href="/dashboard/invoices/new"`) || strings.Contains(body, "/edit") {
				t.Errorf("reporting's %s offers a change: %s", p, body)
			}
		}
		for _, p := range []string{"/dashboard/invoices/new", path + "/edit"} {
			resp, body := rep.get(p)
			wantStatus(t, "reporting at "+p, resp, body, http.StatusForbidden)
		}
		sales := s.browser(t)
		sales.signIn("sales@maple.example")
		if _, body := sales.get("/dashboard"); strings.Contains(body, `href="/dashboard/invoices"`) {
			t.Errorf("sales staff see Invoices: %s", body)
		}
		for _, p := range []string{"/dashboard/invoices", path} {
			resp, body := sales.get(p)
			wantStatus(t, "sales at "+p, resp, body, http.StatusForbidden)
		}
		for _, role := range []user.Role{user.Reporting, user.Sales} {
			b := s.browser(t)
			csrf := b.signIn(string(role) + "@maple.example")
			for _, p := range posts {
				form := readmeForm(csrf, "ROLEKEY")
				form.Set("email", "fay@example.com")
				resp, body := b.post(p, form)
				wantStatus(t, string(role)+" POST "+p, resp, body, http.StatusForbidden)
			}
		}
		if n := invoiceCount(t, db, s.merchantID); n != 1 || len(mails(t, db, "fay@example.com")) != 0 {
			t.Fatalf("refused POSTs changed something: %d invoices", n)
		}

		other := otherMerchant(t, s)
		theirs := other.must(t, "POST", invoiceAPI, oneLine("T-1", "CAD", "9.00", "them@example.com")).Str("lookup_id")
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		for _, p := range []string{"/dashboard/invoices/" + theirs, "/dashboard/invoices/" + theirs + "/edit"} {
			resp, body := b.get(p)
			wantStatus(t, "another merchant's "+p, resp, body, http.StatusNotFound)
		}
		for _, action := range []string{"edit", "send", "cancel", "delete", "charge"} {
			form := readmeForm(csrf, "OTHERKEY"+action)
			form.Set("email", "them@example.com")
			resp, body := b.post("/dashboard/invoices/"+theirs+"/"+action, form)
			wantStatus(t, "another merchant's invoice, "+action, resp, body, http.StatusNotFound)
		}
		if r := other.must(t, "GET", invoiceAPI+"/"+theirs, nil); r.Str("status") != "DRAFT" || r.Num("total_amount") != "9.00" ||
			len(mails(t, db, "them@example.com")) != 0 {
			t.Fatalf("acting on another merchant's invoice changed it: %s", r.Raw)
		}
	})
}

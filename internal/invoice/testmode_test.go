package invoice_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// What a customer of a merchant on the simulator sees of an invoice says it is a test: the card form
// its link opens ("Test mode"), its page once paid ("Test payment — no money moved"), and the receipt
// e-mailed (subject, text and HTML). Nothing of the kind shows for an invoice paid on a live acquirer
// account, nor on the page of one still to pay there; and an invoice paid on the simulator still
// says so after the merchant went live.
func TestInvoiceTestMode(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{Connectors: []processor.Kind{&processortest.Journal{}}})
		m := srv.NewMerchant(t)
		m.Update(t, merchant.Update{Currencies: []string{"CAD"}})
		ctx := context.Background()
		use := func(config string) {
			t.Helper()
			if err := db.Write(ctx, func(tx *store.Tx) error {
				_, err := srv.Accounts().Set(ctx, tx, m.ID, "journal", []byte(config))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := srv.Accounts().Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		const (
			formBadge = `<strong>Test mode</strong> — a test payment page: no money moves.`
			paidLine  = `<p id="test-mode"><strong>Test payment</strong> — no money moved.</p>`
			draftLine = `<p id="test-mode"><strong>Test mode</strong> — a test invoice: paying it moves no money.</p>`
			notice    = "Test payment — no money moved"
		)
		// pay sends an invoice, opens its card form, says whether it carries the badge, pays it, and
		// returns its payment_url, its page after and the receipt it queued.
		pay := func(number string) (link string, badge bool, page string, receipt mail) {
			t.Helper()
			inv := sentInvoice(t, m, number)
			form, _, status := openForm(t, inv.Str("payment_url"))
			if status != 303 {
				t.Fatalf("%s's page: %d, want a redirect to the card form", number, status)
			}
			body, _ := getPage(t, srv.URL+form)
			if r := srv.Do(t, "POST", form+"/pay", cardBody); r.Status != 200 || r.Str("outcome") != "completed" {
				t.Fatalf("pay %s: %d %s", number, r.Status, r.Raw)
			}
			_, page, _ = openForm(t, inv.Str("payment_url"))
			rs := receipts(t, srv, m.ID)
			return inv.Str("payment_url"), strings.Contains(body, formBadge), page, rs[len(rs)-1]
		}
		isTest := func(r mail) bool {
			return strings.HasSuffix(r.subject, "("+notice+")") && strings.Contains(r.text, notice) && strings.Contains(r.html, notice)
		}
		mentions := func(r mail) bool {
			return strings.Contains(r.subject+r.text+r.html, "Test payment") || strings.Contains(r.subject+r.text+r.html, "no money")
		}

		testLink, badge, testPage, receipt := pay("SIM-1")
		if !badge || !strings.Contains(testPage, paidLine) || !isTest(receipt) {
			t.Errorf("paid on the simulator: form badge %v, receipt %+v, page:\n%s", badge, receipt, testPage)
		}
		draft := m.Do(t, "POST", base, map[string]any{"invoice_number": "SIM-DRAFT", "currency": "CAD",
			"items": []map[string]any{{"description": "Draft", "quantity": 1, "unit_price": "5.00"}}})
		want(t, "a draft", draft, 200)
		if _, page, _ := openForm(t, draft.Str("payment_url")); !strings.Contains(page, draftLine) {
			t.Errorf("a draft on the simulator:\n%s", page)
		}

		use(`{"name":"live","test":false}`)
		_, badge, livePage, receipt := pay("LIVE-1")
		if badge || strings.Contains(livePage, `id="test-mode"`) || mentions(receipt) {
			t.Errorf("paid on a live account: form badge %v, receipt %+v, page:\n%s", badge, receipt, livePage)
		}
		if _, page, _ := openForm(t, draft.Str("payment_url")); strings.Contains(page, `id="test-mode"`) {
			t.Errorf("a draft on a live account:\n%s", page)
		}
		if _, page, _ := openForm(t, testLink); !strings.Contains(page, paidLine) {
			t.Errorf("paid on the simulator, the merchant live since:\n%s", page)
		}
	})
}

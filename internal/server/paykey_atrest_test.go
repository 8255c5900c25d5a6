package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// An invoice's pay key, the secret of its public page and PDF links, is nowhere in the database in a
// form that opens them, on both backends. Invoices are created through the API (one sent at once,
// under an Idempotency-Key), updated, sent and sent again (e-mails with both links in the outbox, and
// their events), listed; their pages are viewed (a card form is made) and their PDFs read. Afterwards
// the raw database holds no pay key, in any encoding, and the links still open their invoices.
func TestInvoicePayKeysLeaveNoSecretsAtRest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		m := srv.NewMerchant(t)
		must := func(method, path string, body any, hdr ...string) servertest.Response {
			t.Helper()
			r := m.Do(t, method, path, body, hdr...)
			if r.Status != http.StatusOK {
				t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
			}
			return r
		}
		const base = "/invoice-service/invoice"
		items := []map[string]any{{"description": "Consulting day", "unit_price": "100.00"}}
		must("POST", base, map[string]any{"invoice_number": "AR-1", "customer_email": "ar@example.com", "send_email": true,
			"items": items}, "Idempotency-Key", "invoice-1")
		draft := must("POST", base, map[string]any{"invoice_number": "AR-2", "items": items}).Str("lookup_id")
		must("PUT", base+"/"+draft, map[string]any{"notes": "Thank you", "customer_email": "ar2@example.com"})
		must("POST", base+"/"+draft+"/send", map[string]any{"send_copy": true})
		must("POST", base+"/"+draft+"/send", map[string]any{"message": "A reminder"})

		list := must("GET", base, nil)
		entities, _ := list.Body["entities"].([]any)
		if len(entities) != 2 {
			t.Fatalf("the invoice list: %s", list.Raw)
		}
		secrets := map[string]string{}
		for _, e := range entities {
			inv := e.(map[string]any)
			number, pay := inv["invoice_number"].(string), inv["payment_url"].(string)
			_, key, _ := strings.Cut(strings.TrimSuffix(pay, "/pay"), "/invoice/")
			pdf := srv.URL + "/invoice/" + key + "/pdf"
			if len(key) != 26 || pay != srv.URL+"/invoice/"+key+"/pay" || inv["pdf_url"] != pdf {
				t.Fatalf("%s: payment_url %q, pdf_url %v", number, pay, inv["pdf_url"])
			}
			secrets["the pay key of "+number] = key
			for link, want := range map[string]string{pay: "text/html", pdf: "application/pdf"} {
				resp, err := http.Get(link) // the page follows to its card form
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) ||
					(want == "text/html" && !strings.Contains(string(body), "Invoice "+number)) {
					t.Fatalf("%s: %d %q %.200s", link, resp.StatusCode, resp.Header.Get("Content-Type"), body)
				}
			}
		}

		after := storetest.RawData(t, db)
		if !strings.Contains(after, "ar2@example.com") || !strings.Contains(after, "Consulting day") {
			t.Fatal("the raw data does not hold the customer's e-mail or the invoice's line: the scan reads nothing")
		}
		storetest.NotStored(t, after, secrets)
	})
}

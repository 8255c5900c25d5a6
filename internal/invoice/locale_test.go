package invoice_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// An invoice reads its amounts in the merchant's locale wherever its customer reads them: the e-mail
// (fr-CA: "113,00 $", the symbol after, a no-break space between), its card form and its PDF.
// ja-JP writes yen with CLDR's fullwidth sign, which the PDF's core font lacks: it prints the "¥" it
// stands for, never a "?".
func TestInvoiceInMerchantLocale(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, storetest.SQLite(t), server.Config{MerchantCacheTTL: time.Nanosecond})
	m := srv.NewMerchant(t)
	frCA, jaJP := "fr-CA", "ja-JP"
	m.Update(t, merchant.Update{Currencies: []string{"CAD", "JPY"}, Locale: &frCA})

	cad := m.Do(t, "POST", base, map[string]any{"currency": "CAD", "tax_rate": 13, "customer_email": "pay@example.com", "send_email": true,
		"items": []map[string]any{{"description": "Consulting day", "quantity": 2, "unit_price": "50.00"}}})
	want(t, "create CAD", cad, 200)
	mails := outbox(t, srv, m.ID)
	if len(mails) != 1 || !strings.Contains(mails[0].text, "Consulting day  2 × 50,00\u00a0$  100,00\u00a0$\n") ||
		!strings.Contains(mails[0].text, "Total: 113,00\u00a0$\n") || !strings.Contains(mails[0].html, "<td>113,00\u00a0$</td>") {
		t.Fatalf("the fr-CA e-mail: %+v", mails)
	}
	if page, status := getPage(t, cad.Str("payment_url")); status != 200 || !strings.Contains(page, "113,00\u00a0$") {
		t.Fatalf("the fr-CA card form of the invoice (%d):\n%s", status, page)
	}

	m.Update(t, merchant.Update{Locale: &jaJP})
	jpy := m.Do(t, "POST", base, map[string]any{"currency": "JPY", "customer_company": "Kaisha", "discount_amount": 100,
		"items": []map[string]any{{"description": "Pot", "unit_price": "1505"}}})
	want(t, "create JPY", jpy, 200)
	text := invoicePDF(t, jpy)
	lines(t, "the ja-JP PDF", text, []string{"Pot", "1", "¥1,505", "¥0", "¥1,505"}, []string{"Discount", "-¥100"}, []string{"Total", "¥1,405"})
	if strings.Contains(text, "?") {
		t.Errorf("the ja-JP PDF has a character its font lacks:\n%s", text)
	}
}

package invoice_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// pdfText is the text of a PDF as pdftotext (Debian's poppler-utils) reads it with its layout, a form
// feed after each page. A PDF that pdftotext fails on, or complains of, fails t. Without pdftotext t
// skips, and fails under KASSA_REQUIRE_ALL=1.
func pdfText(t *testing.T, doc []byte) string {
	t.Helper()
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		storetest.Unavailable(t, "pdftotext is not installed (Debian: apt-get install poppler-utils)")
	}
	path := filepath.Join(t.TempDir(), "invoice.pdf")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-enc", "UTF-8", "-layout", path, "-")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("pdftotext: %v\n%s", err, stderr.Bytes())
	}
	return string(out)
}

// getPDF reads a pdf_url: the answer and its body.
func getPDF(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// invoicePDF reads an invoice's pdf_url, checks that it is a PDF kept by no shared cache, and returns
// its text.
func invoicePDF(t *testing.T, inv servertest.Response) string {
	t.Helper()
	resp, doc := getPDF(t, inv.Str("pdf_url"))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/pdf" || !bytes.HasPrefix(doc, []byte("%PDF-")) {
		t.Fatalf("%s: %d %q %.40q", inv.Str("pdf_url"), resp.StatusCode, resp.Header.Get("Content-Type"), doc)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") || !strings.Contains(cc, "private") {
		t.Errorf("Cache-Control %q", cc)
	}
	text := pdfText(t, doc)
	cardtest.Check(t, "the invoice's PDF", text)
	return text
}

// lines fails t unless, for each of rows, a line of text holds its parts in order, separated by
// spaces (a row of the PDF's layout: a line of the table, a total and its label).
func lines(t *testing.T, what, text string, rows ...[]string) {
	t.Helper()
	for _, parts := range rows {
		quoted := make([]string, len(parts))
		for i, p := range parts {
			quoted[i] = regexp.QuoteMeta(p)
		}
		if !regexp.MustCompile(`(?m)` + strings.Join(quoted, `\s+`)).MatchString(text) {
			t.Errorf("%s: no line with %q in:\n%s", what, parts, text)
		}
	}
}

func day(ms any) string {
	n, _ := ms.(interface{ Int64() (int64, error) }).Int64()
	return time.UnixMilli(n).UTC().Format(time.DateOnly)
}

// pdf_url, on both backends: the invoice as a PDF, with the merchant, the customer, every line, the
// totals in CAD and in JPY, the dates, notes and terms and the pay link, its state as it changes
// (DRAFT, then none once sent, PAID with its date and transaction once paid, CANCELLED); under a file
// name made of the number; no card data. A key that is no invoice's — the lookup id among them — is
// the 404 page.
func TestInvoicePDF(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		m := f.m
		cad := m.Do(t, "POST", base, map[string]any{"invoice_number": "2026/001 ü", "currency": "CAD", "tax_rate": 13,
			"due_date": "2030-01-31", "customer_email": "zoe@example.com", "customer_first_name": "Zoë", "customer_last_name": "Ünal",
			"customer_company": "Ünal & Co", "customer_telephone": "+1 416 555 0100", "customer_address1": "1 King St W",
			"customer_address2": "Suite 5", "customer_city": "Toronto", "customer_province": "ON", "customer_postal_code": "M5V 2T6",
			"customer_country": "Canada", "notes": "Thank you, Zoë — €5 off next time.", "terms": "Net 30",
			"discount_amount": "5", "shipping_amount": "12.50", "items": []map[string]any{
				{"description": "Widgets", "quantity": 2, "unit_price": "49.99", "sku": "W-1"},
				{"description": "Hours", "quantity": "1.5", "unit_price": "33.33", "sku": "H-7"},
				{"description": "Delivery box", "unit_price": "10.50"},
			}})
		want(t, "create CAD", cad, 200)
		resp, _ := getPDF(t, cad.Str("pdf_url"))
		if cd := resp.Header.Get("Content-Disposition"); cd != `inline; filename="invoice-2026_001__.pdf"` {
			t.Errorf("Content-Disposition %q", cd)
		}
		text := invoicePDF(t, cad)
		lines(t, "the CAD draft", text, []string{"Test Shop", "Invoice 2026/001 ü"}, []string{"Issued", day(cad.Body["created_at"])},
			[]string{"Due", "2030-01-31"}, []string{"DRAFT"}, []string{"Bill to"}, []string{"Zoë Ünal"}, []string{"Ünal & Co"},
			[]string{"1 King St W"}, []string{"Suite 5"}, []string{"Toronto, ON M5V 2T6"}, []string{"Canada"}, []string{"zoe@example.com"},
			[]string{"+1 416 555 0100"},
			[]string{"Description", "SKU", "Quantity", "Unit price", "Tax", "Amount"},
			[]string{"Widgets", "W-1", "2", "CA$49.99", "CA$13.00", "CA$99.98"},
			[]string{"Hours", "H-7", "1.5", "CA$33.33", "CA$6.50", "CA$50.00"},
			[]string{"Delivery box", "1", "CA$10.50", "CA$1.37", "CA$10.50"},
			[]string{"Subtotal", "CA$160.48"}, []string{"Tax (13%)", "CA$20.87"}, []string{"Discount", "-CA$5.00"},
			[]string{"Shipping", "CA$12.50"}, []string{"Total", "CA$188.85"},
			[]string{"Notes"}, []string{"Thank you, Zoë — €5 off next time."}, []string{"Terms"}, []string{"Net 30"},
			[]string{"View this invoice online:"}, []string{cad.Str("payment_url")})

		// Sent: payable, no state; then paid on the card form its page opens: PAID, the date, the
		// transaction, and no card.
		id := cad.Str("lookup_id")
		want(t, "send", m.Do(t, "POST", base+"/"+id+"/send", nil), 200)
		text = invoicePDF(t, cad)
		lines(t, "the sent invoice", text, []string{"Pay this invoice online:"}, []string{cad.Str("payment_url")})
		if strings.Contains(text, "DRAFT") || strings.Contains(text, "PAID") {
			t.Errorf("the sent invoice's PDF has a state:\n%s", text)
		}
		form, _, _ := openForm(t, cad.Str("payment_url"))
		if r := f.srv.Do(t, "POST", form+"/pay", cardBody); r.Str("outcome") != "completed" {
			t.Fatalf("pay: %d %s", r.Status, r.Raw)
		}
		paid := m.Do(t, "GET", base+"/"+id, nil)
		text = invoicePDF(t, paid)
		info := paid.Body["payment_info"].(map[string]any)
		lines(t, "the paid invoice", text, []string{"PAID " + day(paid.Body["paid_at"])}, []string{"Transaction", info["transaction_id"].(string)},
			[]string{"Total", "CA$188.85"}, []string{"View this invoice online:"}, []string{cad.Str("payment_url")})
		if strings.Contains(text, "4242") || strings.Contains(text, "VISA") {
			t.Errorf("the paid invoice's PDF shows the card:\n%s", text)
		}

		// JPY, no decimals: 3 × ¥333 = ¥999 (tax 100), ¥1505 (tax 151); ¥2504 + ¥251 − ¥100 + ¥800.
		jpy := m.Do(t, "POST", base, map[string]any{"invoice_number": "J-1", "currency": "JPY", "tax_rate": "10", "customer_company": "Kaisha",
			"discount_amount": 100, "shipping_amount": "800",
			"items": []map[string]any{{"description": "Tea", "quantity": 3, "unit_price": 333}, {"description": "Pot", "unit_price": "1505"}}})
		want(t, "create JPY", jpy, 200)
		lines(t, "the JPY invoice", invoicePDF(t, jpy), []string{"Kaisha"}, []string{"Tea", "3", "¥333", "¥100", "¥999"},
			[]string{"Pot", "1", "¥1,505", "¥151", "¥1,505"}, []string{"Subtotal", "¥2,504"}, []string{"Tax (10%)", "¥251"},
			[]string{"Discount", "-¥100"}, []string{"Shipping", "¥800"}, []string{"Total", "¥3,455"})
		want(t, "cancel", m.Do(t, "PUT", base+"/"+jpy.Str("lookup_id"), map[string]any{"status": "CANCELLED"}), 200)
		lines(t, "the cancelled invoice", invoicePDF(t, jpy), []string{"CANCELLED"}, []string{"Total", "¥3,455"})

		// No invoice: an unknown key, the lookup id in its place, a key of another length.
		key := strings.TrimSuffix(strings.TrimPrefix(cad.Str("pdf_url"), f.srv.URL+"/invoice/"), "/pdf")
		for _, k := range []string{strings.Repeat("A", len(key)), id, jpy.Str("lookup_id"), key + "A", strings.ToLower(key)} {
			resp, body := getPDF(t, f.srv.URL+"/invoice/"+k+"/pdf")
			if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "Invoice not found") {
				t.Errorf("the PDF of key %q: %d %q\n%s", k, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		}
	})
}

// A long invoice breaks over pages, the table's header again on each, and loses no line: 80 lines
// make more than one page, each line in the text, the totals after the last.
func TestInvoicePDFPages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		items := make([]map[string]any, 80)
		for i := range items {
			items[i] = map[string]any{"description": fmt.Sprintf("Item number %02d", i+1), "sku": fmt.Sprintf("SKU-%02d", i+1),
				"unit_price": fmt.Sprintf("%d.00", i+1)}
		}
		inv := f.m.Do(t, "POST", base, map[string]any{"invoice_number": "LONG-1", "currency": "CAD", "items": items})
		want(t, "create", inv, 200)
		text := invoicePDF(t, inv)
		pages := strings.Split(strings.TrimSuffix(text, "\f"), "\f")
		if len(pages) < 2 {
			t.Fatalf("80 lines on %d page:\n%s", len(pages), text)
		}
		for i := range items {
			lines(t, "the long invoice", text, []string{fmt.Sprintf("Item number %02d", i+1), fmt.Sprintf("SKU-%02d", i+1), "1",
				fmt.Sprintf("CA$%d.00", i+1), "CA$0.00", fmt.Sprintf("CA$%d.00", i+1)})
		}
		for i, p := range pages {
			lines(t, fmt.Sprintf("page %d", i+1), p, []string{fmt.Sprintf("Invoice LONG-1 · page %d of %d", i+1, len(pages))})
			if i > 0 && strings.Contains(p, "Item number") {
				lines(t, fmt.Sprintf("page %d", i+1), p, []string{"Description", "SKU", "Quantity", "Unit price", "Tax", "Amount"})
			}
		}
		lines(t, "the last page", pages[len(pages)-1], []string{"Total", "CA$3,240.00"}, []string{inv.Str("payment_url")})
	})
}

// Text the core font cannot show does not break the PDF: what cp1252 lacks is a "?", invisible
// formatting characters go, control characters are spaces, a combining mark joins its letter, and
// PDF syntax in a description stays text. pdftotext reads it without complaint.
func TestInvoicePDFOddText(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		odd := []struct{ in, out string }{
			{"Zoe\u0308 combined", "Zoë combined"},
			{"emoji 😀 and 🇨🇦 flag", "emoji ? and ?? flag"},
			{"bidi \u202eevil\u202c text", "bidi evil text"},
			{"zero\u200bwidth\ufeffjoin\u200d", "zerowidthjoin"},
			{"ctrl\x01\x07\x1b[31m red\x7f", "ctrl [31m red"},
			{"tab\there", "tab here"},
			{"CJK 漢字 and שלום مرحبا", "CJK ?? and ???? ?????"},
			{"math −∑∞≠ but ± and ×", "math ???? but ± and ×"},
			{`paren ( ) \ backslash (( \) \\`, `paren ( ) \ backslash (( \) \\`},
			{"%PDF-1.4 endstream endobj trailer <<>>", "%PDF-1.4 endstream endobj trailer <<>>"},
			{"first line\nsecond line\r\nthird", "second line"},
			{strings.Repeat("W", 400), strings.Repeat("W", 20)},
		}
		items := make([]map[string]any, len(odd))
		for i, o := range odd {
			items[i] = map[string]any{"description": o.in, "sku": "Ü-😀", "unit_price": "1.00"}
		}
		inv := f.m.Do(t, "POST", base, map[string]any{"invoice_number": "ODD-😀-\u202e1", "currency": "CAD", "items": items,
			"customer_first_name": "Zoë 😀", "customer_company": "Ltd \u2028 Co", "notes": strings.Repeat("Lorem ipsum 😀 ", 300),
			"terms": "Net 30\n\n\n\u0085end", "custom_fields": map[string]string{"po": "😀"}})
		want(t, "create", inv, 200)
		text := invoicePDF(t, inv)
		for _, o := range odd {
			lines(t, fmt.Sprintf("the line %q", o.in), text, strings.Fields(o.out))
		}
		lines(t, "the odd invoice", text, []string{"Invoice ODD-?-1"}, []string{"Zoë", "?"}, []string{"Ltd", "?", "Co"}, []string{"Ü-?"},
			[]string{"Net 30"}, []string{"end"}, []string{"Total", "CA$12.00"})
		if n := strings.Count(text, "W"); n < 400 {
			t.Errorf("%d of the 400 W of the long word", n)
		}
		resp, _ := getPDF(t, inv.Str("pdf_url"))
		if cd := resp.Header.Get("Content-Disposition"); cd != `inline; filename="invoice-ODD-_-_1.pdf"` {
			t.Errorf("Content-Disposition %q", cd)
		}
	})
}

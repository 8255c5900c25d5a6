package invoice

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-pdf/fpdf"

	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
)

// Whatever text an invoice holds, its PDF is made: the text the core font is given has no control
// character but the line breaks a block may hold, and nothing cp1252 lacks (the translator's "." for
// what it does not know never stands for anything but a "."). The PDF's text as pdftotext reads it is
// TestInvoicePDFOddText's.
func FuzzInvoicePDF(f *testing.F) {
	for _, s := range []string{"Widgets", "Zoë € × —", "Zoe\u0308", "😀 🇨🇦", "\u202eevil\u202c", "zero\u200bwidth\ufeff", "\x01\x07\x1b[31m\x7f",
		"a\nb\r\nc\u0085d\u2028e", `( ) \ (( \) \\`, "%PDF-1.4 endstream endobj", strings.Repeat("W", 500), "漢字 שלום مرحبا", "\xff\xfe", ""} {
		f.Add(s, s)
	}
	cad, _ := money.Lookup("CAD")
	at := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, text, number string) {
		d := &pdfDoc{Fpdf: fpdf.New("P", "mm", "A4", "")}
		d.tr = d.UnicodeTranslatorFromDescriptor("")
		for _, lines := range []bool{false, true} {
			safe := d.safe(text, lines)
			if !utf8.ValidString(safe) {
				t.Fatalf("safe(%q) = %q: not UTF-8", text, safe)
			}
			for _, r := range safe {
				if (unicode.IsControl(r) && !(lines && r == '\n')) || unicode.Is(unicode.Cf, r) || (r >= 0x80 && d.tr(string(r)) == ".") {
					t.Fatalf("safe(%q, %v) = %q keeps %U", text, lines, safe, r)
				}
			}
		}
		inv := Invoice{Number: number, Status: Paid, PayKey: strings.Repeat("A", payKeyLength), Currency: cad, DueDate: "2030-01-31",
			Items: []Item{{Description: text, SKU: text, Quantity: 1000, UnitPrice: 100}}, Notes: text, Terms: text,
			Customer: Customer{FirstName: text, Company: text, Address1: text, City: text}, CreatedAt: at, UpdatedAt: at, PaidAt: at,
			Payment: &Payment{TransactionID: text}}
		compute(&inv)
		doc, err := renderPDF(inv, merchant.Merchant{Name: text, Email: text}, "http://127.0.0.1/invoice/"+inv.PayKey+"/pay", branding.Branding{}, nil)
		if err != nil {
			t.Fatalf("renderPDF(%q, %q): %v", text, number, err)
		}
		if !bytes.HasPrefix(doc, []byte("%PDF-")) || !bytes.HasSuffix(bytes.TrimSpace(doc), []byte("%%EOF")) {
			t.Fatalf("renderPDF(%q, %q) is not a PDF: %.40q…", text, number, doc)
		}
		if again, _ := renderPDF(inv, merchant.Merchant{Name: text, Email: text}, "http://127.0.0.1/invoice/"+inv.PayKey+"/pay", branding.Branding{}, nil); !bytes.Equal(doc, again) {
			t.Fatalf("renderPDF(%q, %q) made two different PDFs of one invoice", text, number)
		}
	})
}

package invoice

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/go-pdf/fpdf"
	"golang.org/x/text/unicode/norm"

	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
)

// The invoice as a PDF: pdf_url, <public URL>/invoice/{key}/pdf, under the same
// secret as the invoice's page, since a customer opens it from the same e-mail without a token. It is
// made on each request from the invoice as it stands (paid, cancelled), never stored.
//
// The document uses the PDF core font Helvetica in the cp1252 encoding (fpdf's translator), so that it
// embeds no font file and the Latin names and symbols invoices carry ("Zoë", "€", "×") show as they
// are; what cp1252 lacks is a "?" (pdfDoc.safe). Amounts are the page's own strings (pageLines,
// totalRows): formatted from integers of minor units, never through a float.

// handlePDF serves pdf_url: the invoice as a PDF, shown in the browser (inline) under the name
// invoice-<number>.pdf, and kept by no cache, since it names a customer. A key that leads to no invoice
// is the page that says so, a 404. Its requests count against the same limits as the page's (admit).
func (s *Service) handlePDF(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if !s.admit(w, r, key) {
		return
	}
	inv, m, err := s.byKey(r.Context(), key)
	if err != nil {
		noInvoice(w, r, err, "invoice PDF")
		return
	}
	var brand branding.Branding
	var logo []byte
	err = s.db.Read(r.Context(), func(q store.Querier) error {
		var err error
		if brand, err = branding.Get(r.Context(), q, m.ID); err == nil {
			logo, err = branding.Image(r.Context(), q, m.ID)
		}
		return err
	})
	var doc []byte
	if err == nil {
		doc, err = renderPDF(inv, m, inv.PaymentURL(s.publicURL), brand, logo)
	}
	if err != nil {
		noInvoice(w, r, fmt.Errorf("invoice %s: %w", inv.LookupID, err), "invoice PDF") // a 500, logged
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/pdf")
	h.Set("Content-Disposition", `inline; filename="`+pdfFilename(inv.Number)+`"`)
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer") // the URL is the secret: a link followed from the PDF must not carry it
	w.Write(doc)
}

// pdfFilename is the PDF's file name, invoice-<number>.pdf, with every character of the number but
// ASCII letters, digits, "-", "_" and "." made a "_", so that the header needs no quoting rules and
// no file system refuses it.
func pdfFilename(number string) string {
	b := []byte("invoice-")
	for _, r := range number {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-', r == '_', r == '.':
			b = append(b, byte(r))
		default:
			b = append(b, '_')
		}
	}
	return string(b) + ".pdf"
}

// The page: A4 portrait in millimetres, 15 mm margins, the table's columns filling the 180 mm between.
const (
	pdfMargin    = 15.0
	pdfBottom    = 20.0 // the footer's room
	pdfPageWidth = 180.0
	pdfLine      = 5.0  // a line of 9 and 10 pt text
	pdfHeadLeft  = 95.0 // the header's left column, the merchant's; the invoice's takes the rest
	pdfHeadRight = pdfPageWidth - pdfHeadLeft
	pdfTotalsW   = 45.0 // each of the totals' two columns, ending at the right margin
	pdfTotalsX   = pdfMargin + pdfPageWidth - 2*pdfTotalsW
)

// pdfColumns are the lines' table: header, width, alignment.
var pdfColumns = []struct {
	head  string
	width float64
	align string
}{{"Description", 66, "L"}, {"SKU", 24, "L"}, {"Quantity", 18, "R"}, {"Unit price", 22, "R"}, {"Tax", 20, "R"}, {"Amount", 30, "R"}}

// pdfDoc is a PDF being written, with its text translator.
type pdfDoc struct {
	*fpdf.Fpdf
	tr func(string) string
}

// safe returns s as the core font can show it: composed (NFC, so that an "e" followed by a combining
// diaeresis is the "ë" cp1252 has), without invisible formatting characters (zero-width spaces,
// direction marks), each other control character a space — but a line break where lines may break
// the text —, each character cp1252 lacks its compatibility form (NFKC) where cp1252 has that (the
// fullwidth yen sign CLDR gives ja-JP is "¥", a narrow no-break space a space), and any other a "?".
// It is still UTF-8: text() translates it.
func (d *pdfDoc) safe(s string, lines bool) string {
	var b strings.Builder
	for _, r := range norm.NFC.String(s) {
		switch {
		case r == '\n' && lines:
		case unicode.Is(unicode.Cf, r):
			continue
		case unicode.IsControl(r):
			r = ' '
		case r >= 0x80 && d.tr(string(r)) == ".": // the translator's mark of a character it has not
			if k := norm.NFKC.String(string(r)); d.cp1252(k) {
				b.WriteString(k)
				continue
			}
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// cp1252 reports whether the translator has every character of s.
func (d *pdfDoc) cp1252(s string) bool {
	for _, r := range s {
		if r >= 0x80 && d.tr(string(r)) == "." {
			return false
		}
	}
	return true
}

// text is s in the PDF's encoding, on one line.
func (d *pdfDoc) text(s string) string { return d.tr(d.safe(s, false)) }

// cell writes one line of text in a cell of width w at the current position, then moves right.
func (d *pdfDoc) cell(w float64, s, align string) {
	d.CellFormat(w, pdfLine, d.text(s), "", 0, align, false, 0, "")
}

// block writes s, which may hold lines, across the page's width, breaking pages as it needs.
func (d *pdfDoc) block(s string) {
	d.MultiCell(0, pdfLine, d.tr(d.safe(s, true)), "", "L", false)
}

// wrap splits s, which may hold lines, into the lines that fit a cell of width w in the current font;
// at least one, so that an empty cell keeps its row.
func (d *pdfDoc) wrap(s string, w float64) []string {
	var out []string
	for _, l := range d.SplitLines([]byte(d.tr(d.safe(s, true))), w) {
		out = append(out, string(l))
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out
}

// renderPDF writes inv, of merchant m, as a PDF: the merchant and "Invoice <number>" with its dates and
// state, whom it bills, a table of its lines (its header again on each page the table continues on),
// the totals right-aligned, its notes and terms, and the link to its page (payURL). It holds no card
// data: a paid invoice says when it was paid and the transaction, not with which card. The merchant's
// branding shows as its logo (a PNG branding.Logo made, nil for none) above its name, and its accent
// colour on the title and the link.
func renderPDF(inv Invoice, m merchant.Merchant, payURL string, brand branding.Branding, logo []byte) ([]byte, error) {
	f := fpdf.New("P", "mm", "A4", "")
	d := &pdfDoc{Fpdf: f, tr: f.UnicodeTranslatorFromDescriptor("")}
	loc := m.Location()
	title := "Invoice " + inv.Number
	d.SetTitle(d.safe(title, false), true)
	d.SetAuthor(d.safe(m.Name, false), true)
	d.SetCreator("Kassa", false)
	d.SetCreationDate(inv.CreatedAt)
	d.SetModificationDate(inv.UpdatedAt)
	d.SetCatalogSort(true) // the same invoice, the same bytes
	d.SetMargins(pdfMargin, pdfMargin, pdfMargin)
	d.SetAutoPageBreak(true, pdfBottom)
	d.AliasNbPages("")
	d.SetFooterFunc(func() {
		d.SetY(-pdfBottom + 5)
		d.SetFont("Helvetica", "", 8)
		d.SetTextColor(110, 110, 110)
		d.cell(0, title+" · page "+strconv.Itoa(d.PageNo())+" of {nb}", "C") // {nb}: the number of pages (AliasNbPages)
	})
	d.AddPage()

	accent := func() {
		if r, g, b, ok := brand.RGB(); ok {
			d.SetTextColor(r, g, b)
		} else {
			d.SetTextColor(0, 70, 170)
		}
	}
	if logo != nil {
		// The logo fits 60×15 mm, its proportions kept, above the header.
		info := d.RegisterImageOptionsReader("logo", fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(logo))
		if info != nil {
			w, h := info.Extent()
			scale := min(60/w, 15/h)
			d.ImageOptions("logo", pdfMargin, d.GetY(), w*scale, h*scale, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
			d.SetY(d.GetY() + h*scale + 3)
		}
	}

	// The header: the merchant on the left; the invoice's number, dates and state on the right.
	top := d.GetY()
	d.SetFont("Helvetica", "B", 16)
	d.MultiCell(pdfHeadLeft, 8, d.text(m.Name), "", "L", false)
	d.SetFont("Helvetica", "", 9)
	if m.Email != "" {
		d.MultiCell(pdfHeadLeft, pdfLine, d.text(m.Email), "", "L", false)
	}
	left := d.GetY()
	d.SetXY(pdfMargin+pdfHeadLeft, top)
	d.SetFont("Helvetica", "B", 16)
	if _, _, _, ok := brand.RGB(); ok {
		accent()
	}
	d.MultiCell(pdfHeadRight, 8, d.text(title), "", "R", false)
	d.SetTextColor(0, 0, 0)
	d.SetFont("Helvetica", "", 9)
	dates := [][2]string{{"Issued", inv.CreatedAt.In(loc).Format(time.DateOnly)}}
	if inv.DueDate != "" {
		dates = append(dates, [2]string{"Due", inv.DueDate})
	}
	for _, row := range dates {
		d.SetX(pdfMargin + pdfHeadLeft)
		d.cell(pdfHeadRight-25, row[0], "R")
		d.cell(25, row[1], "R")
		d.Ln(pdfLine)
	}
	if state, red := pdfState(inv, loc); state != "" {
		d.SetX(pdfMargin + pdfHeadLeft)
		d.SetFont("Helvetica", "B", 14)
		if red {
			d.SetTextColor(170, 0, 0)
		} else {
			d.SetTextColor(0, 110, 0)
		}
		d.MultiCell(pdfHeadRight, 7, d.text(state), "", "R", false)
		d.SetTextColor(0, 0, 0)
		if p := inv.Payment; p != nil && inv.Status == Paid {
			d.SetFont("Helvetica", "", 9)
			d.SetX(pdfMargin + pdfHeadLeft)
			d.MultiCell(pdfHeadRight, pdfLine, d.text("Transaction "+p.TransactionID), "", "R", false)
		}
	}
	d.SetY(max(left, d.GetY()) + 6)

	// Whom it bills.
	if lines := billTo(inv.Customer); len(lines) > 0 {
		d.SetFont("Helvetica", "B", 9)
		d.cell(0, "Bill to", "L")
		d.Ln(pdfLine)
		d.SetFont("Helvetica", "", 10)
		for _, l := range lines {
			d.MultiCell(pdfHeadLeft, pdfLine, d.text(l), "", "L", false)
		}
		d.Ln(4)
	}

	// The lines.
	_, pageHeight := d.GetPageSize()
	tableHeader := func() {
		d.SetFont("Helvetica", "B", 9)
		d.SetFillColor(235, 235, 235)
		for _, c := range pdfColumns {
			d.CellFormat(c.width, pdfLine+1, c.head, "", 0, c.align, true, 0, "")
		}
		d.Ln(pdfLine + 1)
		d.SetFont("Helvetica", "", 9)
	}
	tableHeader()
	for _, l := range pageLines(inv, m.Language()) {
		texts := []string{l.Description, l.SKU, l.Quantity, l.UnitPrice, l.Tax, l.Total} // pdfColumns' order
		cells := make([][]string, len(pdfColumns))
		rows := 0
		for i, c := range pdfColumns {
			cells[i] = d.wrap(texts[i], c.width)
			rows = max(rows, len(cells[i]))
		}
		// A row is written line by line, so that one taller than what is left of the page goes on
		// over the next, under the table's header again.
		for k := range rows {
			if d.GetY()+pdfLine > pageHeight-pdfBottom {
				d.AddPage()
				tableHeader()
			}
			for i, c := range cells {
				s := ""
				if k < len(c) {
					s = c[k]
				}
				d.CellFormat(pdfColumns[i].width, pdfLine, s, "", 0, pdfColumns[i].align, false, 0, "")
			}
			d.Ln(pdfLine)
		}
		d.SetDrawColor(210, 210, 210)
		d.Line(pdfMargin, d.GetY(), pdfMargin+pdfPageWidth, d.GetY())
	}
	d.Ln(3)

	// The totals, right-aligned; the total in bold under a rule.
	rows := totalRows(inv, m.Language())
	for i, row := range rows {
		last := i == len(rows)-1
		if d.GetY()+pdfLine+2 > pageHeight-pdfBottom {
			d.AddPage()
		}
		d.SetX(pdfTotalsX)
		if last {
			d.SetDrawColor(0, 0, 0)
			d.Line(pdfTotalsX, d.GetY(), pdfMargin+pdfPageWidth, d.GetY())
			d.SetFont("Helvetica", "B", 10)
		} else {
			d.SetFont("Helvetica", "", 10)
		}
		d.cell(pdfTotalsW, row[0], "R")
		d.cell(pdfTotalsW, row[1], "R")
		d.Ln(pdfLine + 1)
	}
	d.Ln(4)

	// Notes, terms, and the link to the invoice's page.
	for _, part := range [][2]string{{"Notes", inv.Notes}, {"Terms", inv.Terms}} {
		if part[1] == "" {
			continue
		}
		d.SetFont("Helvetica", "B", 9)
		d.cell(0, part[0], "L")
		d.Ln(pdfLine)
		d.SetFont("Helvetica", "", 10)
		d.block(part[1])
		d.Ln(3)
	}
	label := "View this invoice online:"
	if payable(inv) == nil {
		label = "Pay this invoice online:"
	}
	d.SetFont("Helvetica", "B", 10)
	d.cell(0, label, "L")
	d.Ln(pdfLine)
	d.SetFont("Helvetica", "U", 10)
	accent()
	for _, l := range d.wrap(payURL, pdfPageWidth) {
		d.CellFormat(0, pdfLine, l, "", 1, "L", false, 0, payURL)
	}
	d.SetTextColor(0, 0, 0)

	var out bytes.Buffer
	if err := d.Output(&out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// pdfState is the state an invoice's PDF says beside its number, and whether it is a warning: PAID
// with the date (in the merchant's time zone), CANCELLED, OVERDUE, or DRAFT; nothing for a SENT one.
func pdfState(inv Invoice, loc *time.Location) (string, bool) {
	switch inv.Status {
	case Paid:
		return "PAID " + inv.PaidAt.In(loc).Format(time.DateOnly), false
	case Cancelled:
		return "CANCELLED", true
	case Overdue:
		return "OVERDUE", true
	case Draft:
		return "DRAFT (not sent)", true
	}
	return "", false
}

// billTo are the lines of the customer's name, company, contact and address that it has.
func billTo(cu Customer) []string {
	var out []string
	add := func(parts ...string) {
		var kept []string
		for _, p := range parts {
			if p != "" {
				kept = append(kept, p)
			}
		}
		if len(kept) > 0 {
			out = append(out, strings.Join(kept, " "))
		}
	}
	add(cu.name())
	add(cu.Company)
	add(cu.Address1)
	add(cu.Address2)
	city := cu.City
	if city != "" && (cu.Province != "" || cu.PostalCode != "") {
		city += ","
	}
	add(city, cu.Province, cu.PostalCode)
	add(cu.Country)
	add(cu.Email)
	add(cu.Telephone)
	return out
}

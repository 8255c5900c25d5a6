package invoice

import (
	"context"
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/store"
)

// SendBody is the body of POST /invoice-service/invoice/{id}/send.
type SendBody struct {
	Email    field.Value `json:"email"`
	Subject  field.Value `json:"subject"`
	Message  field.Value `json:"message"`
	SendCopy field.Value `json:"send_copy"`
}

// SendRequest is a checked SendBody: the address, and what the merchant adds.
type SendRequest struct {
	To       string
	Subject  string
	Message  string
	SendCopy bool // a copy to the merchant's own address
}

// request checks b; the address defaults to the invoice's customer_email.
func (b SendBody) request(inv Invoice) (SendRequest, error) {
	var r SendRequest
	var err error
	if r.To, err = b.Email.Text("email", 254); err != nil {
		return r, err
	}
	if r.To == "" {
		r.To = inv.Customer.Email
	}
	if r.To == "" {
		return r, fault.Invalid("email", "email is required: the invoice has no customer_email")
	}
	if err := merchant.ValidateEmail(r.To); err != nil {
		return r, fault.Invalid("email", "email %s", err)
	}
	if r.Subject, err = b.Subject.Text("subject", 200); err != nil {
		return r, err
	}
	if strings.ContainsAny(r.Subject, "\r\n") {
		return r, fault.Invalid("subject", "subject must be one line")
	}
	if r.Message, err = b.Message.Text("message", 5000); err != nil {
		return r, err
	}
	r.SendCopy, err = b.SendCopy.Flag("send_copy")
	return r, err
}

// Send e-mails one of the merchant's invoices, with its payment link, through the outbox; a DRAFT
// becomes SENT. A SENT or OVERDUE invoice may be sent again (a reminder); a PAID or CANCELLED one not.
func (s *Service) Send(ctx context.Context, m merchant.Merchant, ref string, b SendBody) (Invoice, error) {
	var inv Invoice
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if inv, err = s.Get(ctx, tx, m.ID, ref); err != nil {
			return err
		}
		r, err := b.request(inv)
		if err != nil {
			return err
		}
		if err := s.send(ctx, tx, m, &inv, r); err != nil {
			return err
		}
		return audit.Change(ctx, tx, m.ID, "invoice.send", "invoice/"+inv.LookupID, s.now())
	})
	return inv, err
}

// send queues the invoice's e-mail in tx, sealed since it carries the invoice's links
// (billing.Queue, which seals it), and marks it SENT, with its event; its reminders go to the same address.
func (s *Service) send(ctx context.Context, tx *store.Tx, m merchant.Merchant, inv *Invoice, r SendRequest) error {
	switch inv.Status {
	case Draft, Sent, Overdue:
	default:
		return fault.Conflict("invoice_not_sendable", "Invoice %s is %s: only a DRAFT, SENT or OVERDUE invoice is sent.", inv.LookupID, inv.Status)
	}
	now := s.now().Truncate(time.Millisecond)
	brand, err := branding.Get(ctx, tx, m.ID)
	if err != nil {
		return err
	}
	msg := s.message(m, brand, *inv, r)
	msg.Kind = billing.KindInvoice
	if r.SendCopy && m.Email != "" {
		msg.Bcc = []string{m.Email}
	}
	if err := billing.Queue(ctx, tx, m.ID, msg, now); err != nil {
		return err
	}
	if inv.Status == Draft {
		inv.Status = Sent
	}
	inv.SentAt, inv.UpdatedAt, inv.SentTo = now, now, r.To
	// "An invoice sent after a reminder date does not get that past reminder" (overdue.go): the
	// e-mail that leaves now says what it would have.
	inv.RemindedUntil = passedOver(*inv, now)
	if err := save(ctx, tx, *inv, m.Location()); err != nil {
		return err
	}
	return s.record(ctx, tx, event.InvoiceSent, *inv, now)
}

// message is the invoice's e-mail: the merchant's message, the lines, the totals, the due date, the
// payment link and the PDF's link (a link, not an attachment: the outbox's messages are text and HTML).
// Its HTML carries the merchant's branding: the logo from its absolute URL (branding.LogoURL), and the
// accent colour on the title and the links.
func (s *Service) message(m merchant.Merchant, brand branding.Branding, inv Invoice, r SendRequest) billing.Message {
	subject := r.Subject
	if subject == "" {
		subject = fmt.Sprintf("Invoice %s from %s", inv.Number, m.Name)
	}
	c, lang := inv.Currency, m.Language()
	amt := func(v int64) string { return money.Display(v, c, lang) }
	url := inv.PaymentURL(s.publicURL)
	var t, h strings.Builder
	esc := html.EscapeString
	if r.Message != "" {
		t.WriteString(r.Message + "\n\n")
		h.WriteString("<p>" + strings.ReplaceAll(esc(r.Message), "\n", "<br>") + "</p>\n")
	}
	fmt.Fprintf(&t, "Invoice %s from %s\n\n", inv.Number, m.Name)
	accent := ""
	if brand.Accent != "" {
		accent = ` style="color: ` + esc(brand.Accent) + `"`
	}
	if logo := brand.LogoURL(s.publicURL); logo != "" {
		fmt.Fprintf(&h, "<p><img src=\"%s\" alt=\"%s\" style=\"max-height: 60px; max-width: 200px\"></p>\n", esc(logo), esc(m.Name))
	}
	fmt.Fprintf(&h, "<h1%s>Invoice %s from %s</h1>\n<table>\n", accent, esc(inv.Number), esc(m.Name))
	for _, it := range inv.Items {
		q := formatDecimal(it.Quantity, QuantityScale)
		fmt.Fprintf(&t, "%s  %s × %s  %s\n", it.Description, q, amt(it.UnitPrice), amt(it.Total))
		fmt.Fprintf(&h, "<tr><td>%s</td><td>%s × %s</td><td>%s</td></tr>\n", esc(it.Description), q, esc(amt(it.UnitPrice)), esc(amt(it.Total)))
	}
	rows := totalRows(inv, lang)
	if inv.DueDate != "" {
		rows = append(rows, [2]string{"Due", inv.DueDate})
	}
	t.WriteString("\n")
	for _, row := range rows {
		fmt.Fprintf(&t, "%s: %s\n", row[0], row[1])
		fmt.Fprintf(&h, "<tr><th colspan=\"2\">%s</th><td>%s</td></tr>\n", esc(row[0]), esc(row[1]))
	}
	h.WriteString("</table>\n")
	if inv.Terms != "" {
		t.WriteString("\n" + inv.Terms + "\n")
		h.WriteString("<p>" + esc(inv.Terms) + "</p>\n")
	}
	pdf := inv.PDFURL(s.publicURL)
	fmt.Fprintf(&t, "\nView and pay the invoice: %s\nDownload the invoice (PDF): %s\n", url, pdf)
	fmt.Fprintf(&h, "<p><a href=\"%s\"%s>View and pay the invoice</a> · <a href=\"%s\"%s>Download the invoice (PDF)</a></p>\n",
		esc(url), accent, esc(pdf), accent)
	return billing.Message{To: r.To, Subject: subject, Text: t.String(), HTML: h.String()}
}

package invoice

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"

	"golang.org/x/text/language"
)

// Routes registers the invoice service; protect wraps each API route (a bearer token with the invoice
// scope). The invoice's public page and its PDF need no token: their URL's secret is the key.
func (s *Service) Routes(r *httpapi.Router, protect func(http.Handler) http.Handler) {
	r.Handle("POST", "/invoice-service/invoice", protect(http.HandlerFunc(s.handleCreate)))
	r.Handle("GET", "/invoice-service/invoice", protect(http.HandlerFunc(s.handleList)))
	r.Handle("GET", "/invoice-service/invoice/{id}", protect(http.HandlerFunc(s.handleGet)))
	r.Handle("PUT", "/invoice-service/invoice/{id}", protect(http.HandlerFunc(s.handleUpdate)))
	r.Handle("DELETE", "/invoice-service/invoice/{id}", protect(http.HandlerFunc(s.handleDelete)))
	r.Handle("POST", "/invoice-service/invoice/{id}/send", protect(http.HandlerFunc(s.handleSend)))
	r.Handle("POST", "/invoice-service/invoice/{id}/pay", protect(http.HandlerFunc(s.handlePay)))
	r.HandleFunc("GET", "/invoice/{key}/pay", s.handlePage)
	r.HandleFunc("GET", "/invoice/{key}/pdf", s.handlePDF)
}

// body reads the request's invoice body.
func body(r *http.Request) (Body, error) {
	raw, err := readBody(r)
	if err != nil {
		return Body{}, err
	}
	return ParseBody(raw)
}

func readBody(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, httpapi.BodyError(err)
	}
	return raw, nil
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) {
	_, m, err := payment.Who(r.Context(), s.merchants)
	var b Body
	if err == nil {
		b, err = body(r)
	}
	var inv Invoice
	if err == nil {
		inv, err = s.Create(r.Context(), m, b)
	}
	s.write(w, r, inv, err)
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var inv Invoice
	if err == nil {
		inv, err = s.get(r.Context(), who.MerchantID, r.PathValue("id"))
	}
	s.write(w, r, inv, err)
}

func (s *Service) handleUpdate(w http.ResponseWriter, r *http.Request) {
	_, m, err := payment.Who(r.Context(), s.merchants)
	var b Body
	if err == nil {
		b, err = body(r)
	}
	var inv Invoice
	if err == nil {
		inv, err = s.Update(r.Context(), m, r.PathValue("id"), b)
	}
	s.write(w, r, inv, err)
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var inv Invoice
	if err == nil {
		inv, err = s.Remove(r.Context(), who.MerchantID, r.PathValue("id"))
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"id": inv.ID, "lookup_id": inv.LookupID, "deleted": true})
}

func (s *Service) handleSend(w http.ResponseWriter, r *http.Request) {
	_, m, err := payment.Who(r.Context(), s.merchants)
	var b SendBody
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var inv Invoice
	if err == nil {
		inv, err = s.Send(r.Context(), m, r.PathValue("id"), b)
	}
	s.write(w, r, inv, err)
}

func (s *Service) write(w http.ResponseWriter, r *http.Request, inv Invoice, err error) {
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, inv.Wire(s.publicURL))
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	invs, err := s.list(r.Context(), who.MerchantID, f)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := httpapi.Page[Wire]{Entities: make([]Wire, len(invs))}
	for i, inv := range invs {
		out.Entities[i] = inv.Wire(s.publicURL)
	}
	if n := len(invs); n > 0 {
		out.SetCursors(invs[0].ID, invs[n-1].ID)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// ParseFilter reads the list's query parameters; each bad one is a 400 naming it. start_date and
// end_date (YYYY-MM-DD, UTC, end_date included) bound created_at, as from_date and to_date bound the
// transaction list; amount_min and amount_max bound total_amount.
func ParseFilter(q url.Values) (Filter, error) {
	f := Filter{AmountMin: -1, AmountMax: -1}
	var err error
	if f.Limit, f.Before, f.After, err = httpapi.PageParams(q, payment.DefaultLimit, payment.MaxLimit); err != nil {
		return f, err
	}
	if v := q.Get("status"); v != "" {
		st, ok := ParseStatus(v)
		if !ok {
			return f, fault.Invalid("status", "status must be DRAFT, SENT, PAID, OVERDUE or CANCELLED")
		}
		f.Status = st
	}
	f.CustomerEmail, f.CustomerLookupID, f.InvoiceNumber = q.Get("customer_email"), q.Get("customer_lookup_id"), q.Get("invoice_number")
	if v := q.Get("currency"); v != "" {
		c, ok := money.Lookup(strings.ToUpper(v))
		if !ok {
			return f, fault.Invalid("currency", "currency %q is not an ISO 4217 currency code", v)
		}
		f.Currency = c.Code
	}
	for _, a := range []struct {
		name string
		dst  *int64
	}{{"amount_min", &f.AmountMin}, {"amount_max", &f.AmountMax}} {
		if v := q.Get(a.name); v != "" {
			if *a.dst, err = parseDecimal(v, amountScale); err != nil {
				return f, fault.Invalid(a.name, "%s %s", a.name, err)
			}
		}
	}
	if f.AmountMin >= 0 && f.AmountMax >= 0 && f.AmountMin > f.AmountMax {
		return f, fault.Invalid("amount_max", "amount_max must not be below amount_min")
	}
	for _, d := range []struct {
		name string
		dst  *time.Time
		add  int
	}{{"start_date", &f.From, 0}, {"end_date", &f.To, 1}} {
		if v := q.Get(d.name); v != "" {
			t, err := time.Parse(time.DateOnly, v)
			if err != nil {
				return f, fault.Invalid(d.name, "%s must be a date as YYYY-MM-DD", d.name)
			}
			*d.dst = t.AddDate(0, 0, d.add) // end_date includes its whole day
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, fault.Invalid("end_date", "end_date must not be before start_date")
	}
	return f, nil
}

// pageCSP allows the page nothing beyond its own markup: no script, no style sheet, no frame.
const pageCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// brandedCSP is pageCSP for an invoice's own page, which shows its merchant's branding: its one
// <style>, by the response's nonce (no style attribute), and the logo, from Kassa.
func brandedCSP(nonce string) string {
	return "default-src 'none'; style-src 'nonce-" + nonce + "'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

var page = template.Must(template.New("invoice").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{{.Title}}</title>
{{if .Nonce}}<style nonce="{{.Nonce}}">
:root { --accent: {{with .Brand.Accent}}{{.}}{{else}}#1f5fbf{{end}}; --muted: #57606a; }
body { font: 16px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1b1f24; background: #ffffff; margin: 0; }
main { max-width: 640px; margin: 0 auto; padding: 16px; }
a { color: var(--accent); }
.logo { display: block; max-width: 100%; height: auto; max-height: 60px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .2rem .3rem; }
.receipt dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; }
.receipt dt { color: var(--muted); }
.receipt dd { margin: 0; overflow-wrap: anywhere; }
</style>{{end}}</head>
<body>
<main>
{{if .Found}}
{{with .Brand.LogoPath}}<img class="logo" id="brand-logo" src="{{.}}" alt="">{{end}}
<h1>Invoice {{.Number}} from {{.Merchant}}</h1>
{{if .Test}}<p id="test-mode"><strong>{{if .Paid}}Test payment</strong> — no money moved.{{else}}Test mode</strong> — a test invoice: paying it moves no money.{{end}}</p>{{end}}
{{if .Customer}}<p>Billed to {{.Customer}}</p>{{end}}
<table>
<thead><tr><th scope="col">Item</th><th scope="col">Quantity</th><th scope="col">Unit price</th><th scope="col">Amount</th></tr></thead>
<tbody>
{{range .Lines}}<tr><td>{{.Description}}</td><td>{{.Quantity}}</td><td>{{.UnitPrice}}</td><td>{{.Total}}</td></tr>
{{end}}</tbody>
<tfoot>
{{range .Totals}}<tr><th scope="row" colspan="3">{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</tfoot>
</table>
{{if .Due}}<p>Due {{.Due}}</p>{{end}}
<p role="status">{{.State}}</p>
{{with .Receipt}}{{.HTML}}{{end}}
<p><a id="pdf-link" href="pdf">Download the invoice (PDF)</a></p>
{{else}}
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
{{end}}
</main>
</body>
</html>
`))

// pageLine is a line of an invoice as its page and its PDF show it: the unit price, the tax and the
// line's total as people read amounts in the merchant's locale (money.Display).
type pageLine struct{ Description, SKU, Quantity, UnitPrice, Tax, Total string }

// pageLines are the lines of inv as its page and its PDF show them, amounts in lang.
func pageLines(inv Invoice, lang language.Tag) []pageLine {
	c := inv.Currency
	out := make([]pageLine, len(inv.Items))
	for i, it := range inv.Items {
		out[i] = pageLine{Description: it.Description, SKU: it.SKU, Quantity: formatDecimal(it.Quantity, QuantityScale),
			UnitPrice: money.Display(it.UnitPrice, c, lang), Tax: money.Display(it.Tax, c, lang), Total: money.Display(it.Total, c, lang)}
	}
	return out
}

// pageView is what the invoice's page shows: the invoice when Found, else Title and Message.
type pageView struct {
	Found                   bool
	Title, Number, Merchant string
	Customer, Due, State    string
	Lines                   []pageLine
	Totals                  [][2]string
	Message                 string
	// Test: the invoice's payment moves, or moved, no money (payment.Ledger.Test: its charge's
	// test_mode once paid, else the merchant's account); Paid: it is paid.
	Test, Paid bool
	// Receipt is the receipt of a paid invoice's payment (receipt), nil for others.
	Receipt *billing.Receipt
	// Nonce is the response's style nonce (brandedCSP), "" for the pages that find no invoice;
	// Brand the merchant's branding.
	Nonce string
	Brand branding.Branding
}

// byKey reads the invoice whose public URLs carry key, and its merchant: a key that names no invoice is
// a 404 (what cannot be a key is one without a query).
func (s *Service) byKey(ctx context.Context, key string) (Invoice, merchant.Merchant, error) {
	if len(key) != payKeyLength || !httpapi.Storable(key) {
		return Invoice{}, merchant.Merchant{}, fault.NotFound("No such invoice.")
	}
	var inv Invoice
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		inv, err = byPayKey(ctx, q, key)
		return err
	})
	if err != nil {
		return inv, merchant.Merchant{}, err
	}
	m, err := s.merchants.Get(ctx, inv.MerchantID)
	return inv, m, err
}

// admit counts r, a request of the public link whose key is key, against the public links' limits
// per link and per client address (velocity.Limiter.PublicLink), before anything is read. A refused
// request is answered with a page a person can read, a 429 with the limit's headers (Retry-After
// among them): admit then reports false.
func (s *Service) admit(w http.ResponseWriter, r *http.Request, key string) bool {
	err := s.velocity.PublicLink(keyHash(key), s.proxies.ClientAddr(r))
	if err == nil {
		return true
	}
	httpapi.SetPageHeaders(w.Header(), pageCSP)
	wait := "1 second"
	var fe *fault.Error
	if errors.As(err, &fe) && fe.Limit != nil {
		httpapi.WriteRateLimit(w.Header(), fe.Limit)
		if n := fe.Limit.ResetSeconds(); n > 1 {
			wait = fmt.Sprintf("%d seconds", n)
		}
	}
	w.WriteHeader(http.StatusTooManyRequests)
	page.Execute(w, pageView{Title: "Too many requests",
		Message: "This invoice's link has been opened too often just now. Wait " + wait + ", then reload this page."})
	return false
}

// noInvoice answers a public URL of an invoice that byKey did not find with the page that says so: a
// 404, or a 500 when the invoice could not be read (logged as what).
func noInvoice(w http.ResponseWriter, r *http.Request, err error, what string) {
	httpapi.SetPageHeaders(w.Header(), pageCSP)
	status := http.StatusNotFound
	if fe, ok := err.(*fault.Error); !ok || fe.Status != http.StatusNotFound {
		status = http.StatusInternalServerError
		httpapi.Logger(r.Context()).ErrorContext(r.Context(), what, "err", err)
	}
	w.WriteHeader(status)
	page.Execute(w, pageView{Title: "Invoice not found",
		Message: "This link does not lead to an invoice. Check the link in the e-mail you received."})
}

// receipt is the receipt a paid invoice's page shows: its payment as the receipt e-mail told it, to
// the invoice's customer's address. The link is the page's credential and never expires, so the card
// (brand and last four digits only) and the address show only within billing.ReceiptWindow of the
// payment, as on the card form's own page; later the page shows what its PDF does. Nil when the
// payment's charge cannot be read: the page then says only that the invoice is paid.
func (s *Service) receipt(ctx context.Context, m merchant.Merchant, inv Invoice) *billing.Receipt {
	if inv.Payment == nil || s.ledger == nil {
		return nil
	}
	t, err := s.ledger.Get(ctx, m.ID, inv.Payment.TransactionID)
	if err != nil {
		httpapi.Logger(ctx).ErrorContext(ctx, "invoice page: read the payment for the receipt", "invoice", inv.LookupID, "err", err)
		return nil
	}
	r := billing.ReceiptOf(m, t, "Invoice "+inv.Number, t.CreatedAt, m.Location()).ForPage(t.CreatedAt, s.now(), inv.Customer.Email)
	return &r
}

// handlePage serves the invoice's public page (payment_url). A payable invoice (SENT or OVERDUE)
// redirects to a card form that pays it and shows the merchant, the invoice's number, its lines and
// totals: the invoice's hosted-page session of purpose invoice, on its one live intent, handed out
// again while it serves (pay.go). Any other shows the invoice and its state: paid, cancelled, or not
// sent yet. Its requests are limited per link and per client address (admit).
func (s *Service) handlePage(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if !s.admit(w, r, key) {
		return
	}
	httpapi.SetPageHeaders(w.Header(), pageCSP)
	inv, m, err := s.byKey(r.Context(), key)
	if err != nil {
		noInvoice(w, r, err, "invoice page")
		return
	}
	v := pageView{Found: true, Title: "Invoice " + inv.Number, Number: inv.Number, Merchant: m.Name, Due: inv.DueDate,
		Customer: inv.Customer.name(), Lines: pageLines(inv, m.Language()), Totals: totalRows(inv, m.Language()), Nonce: rand.Text()}
	if err := s.db.Read(r.Context(), func(q store.Querier) (err error) { v.Brand, err = branding.Get(r.Context(), q, m.ID); return err }); err != nil {
		noInvoice(w, r, fmt.Errorf("invoice %s: branding: %w", inv.LookupID, err), "invoice page") // a 500, logged
		return
	}
	httpapi.SetPageHeaders(w.Header(), brandedCSP(v.Nonce))
	if v.Customer == "" {
		v.Customer = inv.Customer.Company
	}
	var charge string
	if inv.Payment != nil {
		charge = inv.Payment.TransactionID
	}
	v.Test, v.Paid = s.ledger.Test(r.Context(), m.ID, charge), inv.Status == Paid
	switch inv.Status {
	case Paid:
		v.State, v.Receipt = "This invoice is paid.", s.receipt(r.Context(), m, inv)
	case Cancelled:
		v.State = "This invoice was cancelled: there is nothing to pay."
	case Draft:
		v.State = "This invoice has not been sent yet: it can be paid once " + m.Name + " sends it."
	default:
		// Payable: the card form, on the invoice's one live intent (pay.go).
		path, err := s.openPage(r.Context(), m, inv.LookupID, key)
		if err == nil {
			http.Redirect(w, r, path, http.StatusSeeOther)
			return
		}
		var fe *fault.Error
		if errors.As(err, &fe) && fe.Code == "invoice_paid" {
			v.State, v.Paid = "This invoice is paid.", true
			break
		}
		if !errors.As(err, &fe) {
			httpapi.Logger(r.Context()).ErrorContext(r.Context(), "invoice page: open the card form", "invoice", inv.LookupID, "err", err)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		v.State = "The payment form could not be opened just now. Reload this page to try again."
	}
	page.Execute(w, v)
}

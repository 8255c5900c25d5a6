package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/invoice"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/store"

	"golang.org/x/text/language"
)

// Invoices: the list by status with totals; create with line items and live totals, send, cancel,
// copy the pay link, download the PDF; by role, reporting read-only. The roles are the customers'
// and plans': readers (owner, admin, reporting) see the
// invoices, managers (owner, admin) make, change, send, cancel, delete and charge them; sales staff,
// who take payments at the terminal, have no part in the merchant's billing. Every change goes
// through the invoice service's own operations (invoice.Service), so the dashboard and the API keep
// one set of rules, messages and audit records, and every form that changes something carries its
// own key and acts once (Handler.once). The form is invoice_form.go.

const invoicesPath = "/dashboard/invoices"

// invoiceRoutes registers the Invoices section.
func (h *Handler) invoiceRoutes(r *httpapi.Router) {
	r.Handle("GET", invoicesPath, h.requireRole(readers, h.invoices))
	r.Handle("GET", invoicesPath+"/new", h.requireRole(managers, h.newInvoice))
	r.Handle("POST", invoicesPath+"/new", h.requireRole(managers, h.saveInvoice))
	r.Handle("POST", invoicesPath+"/totals", h.requireRole(managers, h.invoiceTotals))
	r.Handle("GET", invoicesPath+"/{invoice}", h.requireRole(readers, h.showInvoice))
	r.Handle("GET", invoicesPath+"/{invoice}/edit", h.requireRole(managers, h.editInvoice))
	r.Handle("POST", invoicesPath+"/{invoice}/edit", h.requireRole(managers, h.saveInvoice))
	r.Handle("POST", invoicesPath+"/{invoice}/send", h.requireRole(managers, h.sendInvoice))
	r.Handle("POST", invoicesPath+"/{invoice}/cancel", h.requireRole(managers, h.cancelInvoice))
	r.Handle("POST", invoicesPath+"/{invoice}/delete", h.requireRole(managers, h.deleteInvoice))
	r.Handle("POST", invoicesPath+"/{invoice}/charge", h.requireRole(managers, h.chargeInvoice))
}

// invoiceStatuses are the list's tabs after "All", in the order of an invoice's life.
var invoiceStatuses = []invoice.Status{invoice.Draft, invoice.Sent, invoice.Overdue, invoice.Paid, invoice.Cancelled}

// invoicesPage is the list: its tabs, the search, the totals of what they select, and a page of it.
type invoicesPage struct {
	Status     string // the tab: a status, or "" for all
	Tabs       []invoiceTab
	Q, Matched string // the search, and what it was taken for
	Sums       []invoiceSum
	Count      int64 // the invoices the tab and the search select
	Rows       []invoiceRow
	Pager      pager
	CanEdit    bool
	Filtered   bool
	Chips      []filterChip // the search applied, removable (the tabs say the status)
	Empty      *emptyState  // in place of the table when there is no row
}

// invoiceTab is a tab of the list: a status, with the search kept.
type invoiceTab struct {
	Label, Href string
	Current     bool
}

// invoiceSum is what the list's invoices in one currency come to.
type invoiceSum struct {
	Currency, Total string
	Count           int64
}

// invoiceRow is an invoice in the list.
type invoiceRow struct {
	LookupID, Number, Customer, Email, Status, Total, Due, Created string
}

// allInvoices is the filter of every invoice, limit at a time (no amount bounds: -1).
func allInvoices(limit int) invoice.Filter {
	return invoice.Filter{Limit: limit, AmountMin: -1, AmountMax: -1}
}

// invoiceSearch reads the search box into f: an e-mail address (it has an @) is the customer's, else
// an invoice number; each matched whole, as the API's filters match. It says what q was taken for.
func invoiceSearch(q string, f *invoice.Filter) string {
	switch {
	case q == "":
		return ""
	case strings.Contains(q, "@"):
		f.CustomerEmail = q
		return "customer e-mail"
	}
	f.InvoiceNumber = q
	return "invoice number"
}

// invoices lists the merchant's invoices, newest first, of a status or all, with a search, and what
// those it selects come to per currency.
func (h *Handler) invoices(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	q := r.URL.Query()
	c := cursorsOf(q)
	pg := &invoicesPage{Status: strings.ToUpper(q.Get("status")), Q: strings.TrimSpace(q.Get("q")), CanEdit: isManager(sess.Role)}
	f := allInvoices(pageSize + 1)
	var err error
	if f.After, f.Before, err = c.rowIDs(); err == nil && pg.Status != "" {
		st, ok := invoice.ParseStatus(pg.Status)
		if !ok {
			err = fault.Invalid("status", "Status must be one of %s.", statusList())
		}
		f.Status, pg.Status = st, string(st)
	}
	if !httpapi.Storable(pg.Q) {
		pg.Q, err = "", fault.Invalid("q", "The search must be text.")
	}
	pg.Matched = invoiceSearch(pg.Q, &f)
	pg.Filtered = pg.Q != "" || pg.Status != ""
	pg.Tabs = invoiceTabs(pg.Status, pg.Q)
	pg.Chips = chipsOf(invoicesPath, url.Values{"status": {pg.Status}, "q": {pg.Q}}, []filterParam{{"q", "Search"}}, nil)
	var list []invoice.Invoice
	var sums []invoice.Sum
	if err == nil {
		err = h.cfg.DB.Read(r.Context(), func(qr store.Querier) error {
			var err error
			if list, err = invoice.List(r.Context(), qr, sess.MerchantID, f); err != nil {
				return err
			}
			sums, err = invoice.Sums(r.Context(), qr, sess.MerchantID, f)
			return err
		})
	}
	if h.listRefused(w, r, "invoices", "Invoices", pg, err) {
		return
	}
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, s := range sums {
		pg.Count += s.Count
		pg.Sums = append(pg.Sums, invoiceSum{Currency: s.Currency.Code, Total: money.Display(s.Total, s.Currency, m.Language()), Count: s.Count})
	}
	list, more := trimPage(list, c)
	for _, inv := range list {
		pg.Rows = append(pg.Rows, invoiceRow{LookupID: inv.LookupID, Number: inv.Number, Customer: billedName(inv.Customer),
			Email: inv.Customer.Email, Status: string(inv.Status), Total: amountOf(inv, inv.Totals.Total, m.Language()), Due: inv.DueDate,
			Created: inv.CreatedAt.In(m.Location()).Format(time.DateOnly)})
	}
	switch {
	case len(list) == 0 && pg.Filtered:
		pg.Empty = noMatch("invoices-empty", "No invoice matches the status and search asked for.", invoicesPath)
	case len(list) == 0:
		pg.Empty = &emptyState{ID: "invoices-empty", Heading: "No invoices yet",
			About:  "An invoice is e-mailed to a customer with a link to pay it by card.",
			Action: actionIf(pg.CanEdit, link{"Create an invoice", invoicesPath + "/new"})}
	}
	if n := len(list); n > 0 {
		pg.Pager = c.links(q, strconv.FormatInt(list[0].ID, 10), strconv.FormatInt(list[n-1].ID, 10), more)
	}
	v := view{Title: "Invoices", Wide: true, Data: pg}
	if d := q.Get("deleted"); d != "" && httpapi.Storable(d) {
		v.Notice = "Invoice " + d + " is deleted."
	}
	h.render(w, r, http.StatusOK, "invoices", v)
}

// statusList names the statuses a list may show.
func statusList() string {
	names := make([]string, len(invoiceStatuses))
	for i, s := range invoiceStatuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// invoiceTabs are the list's tabs, the search q kept in each.
func invoiceTabs(current, q string) []invoiceTab {
	tab := func(label, status string) invoiceTab {
		v := url.Values{}
		if status != "" {
			v.Set("status", status)
		}
		if q != "" {
			v.Set("q", q)
		}
		href := invoicesPath
		if len(v) > 0 {
			href += "?" + v.Encode()
		}
		return invoiceTab{Label: label, Href: href, Current: status == current}
	}
	tabs := []invoiceTab{tab("All", "")}
	for _, s := range invoiceStatuses {
		tabs = append(tabs, tab(string(s[:1])+strings.ToLower(string(s[1:])), string(s)))
	}
	return tabs
}

// billedName is whom an invoice bills as a person reads it: the name, else the company, else the
// e-mail address.
func billedName(c invoice.Customer) string {
	if n := strings.TrimSpace(c.FirstName + " " + c.LastName); n != "" {
		return n
	}
	if c.Company != "" {
		return c.Company
	}
	return c.Email
}

// amountOf formats minor units of the invoice's currency in lang: "CA$176.98" in en-US.
func amountOf(inv invoice.Invoice, minor int64, lang language.Tag) string {
	return money.Display(minor, inv.Currency, lang)
}

// invoicePage is an invoice's page: the invoice as its customer sees it, its state, and the forms of
// what may be done with it.
type invoicePage struct {
	Inv      invoice.Invoice
	Wire     invoice.Wire
	Merchant string
	BilledTo []string // the customer's name, company, e-mail and address, a line each
	Totals   [][2]string
	Total    string // what the invoice comes to, for the charge form
	Loc      *time.Location
	// PayURL is the invoice's payment_url, PDFURL its pdf_url.
	PayURL, PDFURL string
	Paid           *paidView
	CanEdit        bool // a manager: the forms below are offered
	Editable       bool // DRAFT or SENT: the invoice may change
	Sendable       bool // DRAFT, SENT or OVERDUE
	Deletable      bool // DRAFT
	Send           sendForm
	// Cards are the vault customer's cards a SENT or OVERDUE invoice may be charged on.
	Cards                           []cardOption
	CancelKey, DeleteKey, ChargeKey string // the forms' keys (formKey)
}

// paidView is how a PAID invoice was paid.
type paidView struct {
	TransactionID, Card, Amount, When string
}

// sendForm is the form that e-mails the invoice, as typed.
type sendForm struct {
	Key, Email, Subject, Message string
	Copy                         bool
	Field, FieldError            string // the field a refusal names, and why
}

// cardOption is a stored card the charge form offers.
type cardOption struct{ ID, Label string }

// invoiceNotices are what an invoice's page says after a change, by the change's name in its query.
var invoiceNotices = map[string]string{
	"created":   "The invoice is saved as a draft. Send it when it is ready: its customer can pay it once it is sent.",
	"saved":     "The changes are saved. Its payment link shows them; a sent invoice's customer is e-mailed them only when it is sent again.",
	"sent":      "The invoice is e-mailed with its payment link.",
	"cancelled": "The invoice is cancelled: its payment link no longer takes a payment.",
	"paid":      "The card is charged: the invoice is paid.",
}

// showInvoice shows one of the merchant's invoices.
func (h *Handler) showInvoice(w http.ResponseWriter, r *http.Request) {
	v := view{Notice: invoiceNotices[r.URL.Query().Get("done")]}
	if r.URL.Query().Get("done") == "declined" {
		v.Error = "The card was declined: nothing was charged, and the invoice is unchanged. The attempt is in Transactions."
	}
	h.renderInvoice(w, r, http.StatusOK, v, sendForm{})
}

// readInvoice reads the merchant's invoice of the request's path: another merchant's, or none, is a
// 404 page. It reports false when it answered.
func (h *Handler) readInvoice(w http.ResponseWriter, r *http.Request) (invoice.Invoice, bool) {
	var inv invoice.Invoice
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		inv, err = h.cfg.Invoices.Get(r.Context(), q, signedIn(r).MerchantID, r.PathValue("invoice"))
		return err
	})
	if h.invoiceRefused(w, r, err) {
		return inv, false
	}
	return inv, true
}

// invoiceRefused answers err, if any: an invoice not found (another merchant's, or none) is the 404
// page; any other refusal the page that says it. It reports whether it answered.
func (h *Handler) invoiceRefused(w http.ResponseWriter, r *http.Request, err error) bool {
	return h.answerRefusal(w, r, err, func(status int, msg string) {
		h.notFoundOr(w, r, status, "No such invoice", msg)
	})
}

// renderInvoice shows the invoice of the request's path with v's message, its send form as sf holds it
// (fresh when sf has no key).
func (h *Handler) renderInvoice(w http.ResponseWriter, r *http.Request, status int, v view, sf sendForm) {
	sess := signedIn(r)
	inv, ok := h.readInvoice(w, r)
	if !ok {
		return
	}
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	public := strings.TrimRight(h.cfg.PublicURL, "/")
	pg := &invoicePage{Inv: inv, Wire: inv.Wire(public), Merchant: m.Name, Totals: inv.TotalRows(m.Language()),
		Total: amountOf(inv, inv.Totals.Total, m.Language()), Loc: m.Location(),
		PayURL: inv.PaymentURL(public), PDFURL: inv.PDFURL(public), CanEdit: isManager(sess.Role),
		Editable: inv.Status == invoice.Draft || inv.Status == invoice.Sent, Deletable: inv.Status == invoice.Draft,
		Sendable: inv.Status == invoice.Draft || inv.Status == invoice.Sent || inv.Status == invoice.Overdue}
	cu := inv.Customer
	for _, line := range []string{strings.TrimSpace(cu.FirstName + " " + cu.LastName), cu.Company, cu.Email, cu.Telephone, cu.Address1,
		cu.Address2, strings.TrimSpace(strings.Join([]string{cu.City, cu.Province, cu.PostalCode}, " ")), cu.Country} {
		if line != "" {
			pg.BilledTo = append(pg.BilledTo, line)
		}
	}
	if p := inv.Payment; p != nil {
		pg.Paid = &paidView{TransactionID: p.TransactionID, Amount: amountOf(inv, p.Amount, m.Language()),
			When: time.UnixMilli(p.Date).In(m.Location()).Format("2006-01-02 15:04")}
		if p.CardLast4 != "" {
			pg.Paid.Card = brandName(p.CardType) + " ending " + p.CardLast4
		}
	}
	if pg.CanEdit {
		if sf.Key == "" {
			sf = sendForm{Key: formKey(), Email: cu.Email}
		}
		pg.Send, pg.CancelKey, pg.DeleteKey, pg.ChargeKey = sf, formKey(), formKey(), formKey()
		if cu.LookupID != "" && (inv.Status == invoice.Sent || inv.Status == invoice.Overdue) {
			c, err := h.cfg.Vault.Get(r.Context(), m.ID, cu.LookupID)
			var f *fault.Error
			if err != nil && !(errors.As(err, &f) && f.Status == http.StatusNotFound) { // a customer deleted since has no cards
				h.fail(w, r, err)
				return
			}
			for _, cd := range c.Cards {
				pg.Cards = append(pg.Cards, cardOption{ID: cd.LookupID, Label: cardLabel(cd) + ", expires " + cd.Expiry.String()})
			}
		}
	}
	v.Title, v.Data, v.Wide = "Invoice "+inv.Number, pg, true
	h.render(w, r, status, "invoice", v)
}

// invoiceAction answers the POST of a form of the invoice's page: do runs once per form (h.once) and
// the browser goes to the page it names; a refusal is said on the invoice's page, with sf as typed
// when it is the send form's.
func (h *Handler) invoiceAction(w http.ResponseWriter, r *http.Request, sf sendForm, do func(m merchant.Merchant) (string, error)) {
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	path, err := h.once(r, func() (string, error) { return do(m) })
	var f *fault.Error
	switch {
	case err == nil:
		http.Redirect(w, r, path, http.StatusSeeOther)
	case errors.As(err, &f):
		// Said on the invoice's page, with new forms but for a send form refused for a field of its
		// own; an invoice not found (another merchant's, or deleted meanwhile) is a 404 page there.
		msg := fault.Sentence(f.Message)
		switch {
		case f.Code == "idempotency_key_reused":
			msg, sf.Key = "This form was already used with other values, so nothing more was done. Check the invoice below and use its forms again.", ""
		case sendLabels[f.Field] != "" && sf.Key != "":
			sf.Field, sf.FieldError = f.Field, named(f, sendLabels[f.Field])
			msg = "The invoice is not sent. Check the field marked below."
		default:
			sf.Key = ""
		}
		h.renderInvoice(w, r, f.Status, view{Error: msg}, sf)
	default:
		h.fail(w, r, err)
	}
}

// sendLabels are the send form's fields as the page names them.
var sendLabels = map[string]string{"email": "E-mail to", "subject": "Subject", "message": "Message", "send_copy": "Send me a copy"}

// invoicePath is an invoice's page, with the notice of what was done (invoiceNotices).
func invoicePath(ref, done string) string {
	return invoicesPath + "/" + url.PathEscape(ref) + "?done=" + done
}

// sendInvoice e-mails the invoice with its payment link: a DRAFT becomes SENT, a SENT or OVERDUE one
// is sent again as a reminder.
func (h *Handler) sendInvoice(w http.ResponseWriter, r *http.Request) {
	sf := sendForm{Key: r.PostFormValue("key"), Email: strings.TrimSpace(r.PostFormValue("email")), Subject: r.PostFormValue("subject"),
		Message: r.PostFormValue("message"), Copy: r.PostFormValue("send_copy") == "true"}
	h.invoiceAction(w, r, sf, func(m merchant.Merchant) (string, error) {
		b := invoice.SendBody{Email: field.Form(sf.Email), Subject: field.Form(sf.Subject), Message: field.Form(sf.Message),
			SendCopy: field.Form(strconv.FormatBool(sf.Copy))}
		inv, err := h.cfg.Invoices.Send(r.Context(), m, r.PathValue("invoice"), b)
		return invoicePath(inv.LookupID, "sent"), err
	})
}

// cancelInvoice cancels the invoice (after the page's confirmation), through the service's PUT
// status CANCELLED: its payment intent is stopped first, so no form opened before can pay it.
func (h *Handler) cancelInvoice(w http.ResponseWriter, r *http.Request) {
	h.invoiceAction(w, r, sendForm{}, func(m merchant.Merchant) (string, error) {
		inv, err := h.cfg.Invoices.Update(r.Context(), m, r.PathValue("invoice"), invoice.Body{Status: field.Form(string(invoice.Cancelled))})
		return invoicePath(inv.LookupID, "cancelled"), err
	})
}

// deleteInvoice deletes a DRAFT (after the page's confirmation); the list says so.
func (h *Handler) deleteInvoice(w http.ResponseWriter, r *http.Request) {
	h.invoiceAction(w, r, sendForm{}, func(m merchant.Merchant) (string, error) {
		inv, err := h.cfg.Invoices.Remove(r.Context(), m.ID, r.PathValue("invoice"))
		return invoicesPath + "?" + url.Values{"deleted": {inv.Number}}.Encode(), err
	})
}

// chargeInvoice charges a vault customer's SENT or OVERDUE invoice on one of the customer's stored
// cards (the API's POST …/pay): the charge that succeeds marks it PAID. A decline is what the form
// did, kept as its result like a payment (the page says so; another try is another form).
func (h *Handler) chargeInvoice(w http.ResponseWriter, r *http.Request) {
	h.invoiceAction(w, r, sendForm{}, func(m merchant.Merchant) (string, error) {
		ref := r.PathValue("invoice")
		inv, err := h.cfg.Invoices.PayWithCard(r.Context(), m, ref, invoice.PayBody{CardLookupID: r.PostFormValue("card")})
		var f *fault.Error
		if errors.As(err, &f) && f.Code == "card_declined" {
			return invoicePath(ref, "declined"), nil
		}
		return invoicePath(inv.LookupID, "paid"), err
	})
}

// lastDigits finds the last run of digits of an invoice number.
var lastDigits = regexp.MustCompile(`[0-9]+`)

// nextNumber suggests the number of the merchant's next invoice: the newest invoice's number with its
// last run of digits counted up in the same width ("2026-009" → "2026-010"), the first of the next
// few that no invoice has; INV-0001 for a first invoice; "" (Kassa's default, INV- and the lookup id)
// when the newest number has no digits or none of those is free.
func nextNumber(r *http.Request, q store.Querier, merchantID string) (string, error) {
	newest, err := invoice.List(r.Context(), q, merchantID, allInvoices(1))
	if err != nil || len(newest) == 0 {
		return "INV-0001", err
	}
	n := newest[0].Number
	for range 5 {
		loc := lastDigits.FindAllStringIndex(n, -1)
		if loc == nil {
			return "", nil
		}
		at := loc[len(loc)-1]
		d, err := strconv.ParseUint(n[at[0]:at[1]], 10, 63)
		if err != nil {
			return "", nil
		}
		next := strconv.FormatUint(d+1, 10)
		if pad := at[1] - at[0] - len(next); pad > 0 {
			next = strings.Repeat("0", pad) + next
		}
		n = n[:at[0]] + next + n[at[1]:]
		f := allInvoices(1)
		f.InvoiceNumber = n
		taken, err := invoice.List(r.Context(), q, merchantID, f)
		if err != nil || len(taken) == 0 {
			return n, err
		}
	}
	return "", nil
}

// vaultCustomer resolves the form's vault customer, typed as its id or its e-mail address, to its id
// ("" for none): an unknown one, or an e-mail that several customers have, is refused naming the
// field.
func (h *Handler) vaultCustomer(r *http.Request, merchantID, typed string) (string, error) {
	if typed == "" {
		return "", nil
	}
	c, err := h.cfg.Vault.FindCustomer(r.Context(), merchantID, typed)
	var f *fault.Error
	if errors.As(err, &f) && f.Status < http.StatusInternalServerError {
		return "", fault.Invalid("customer_lookup_id", "customer_lookup_id: %s", f.Message)
	}
	return c.LookupID, err
}

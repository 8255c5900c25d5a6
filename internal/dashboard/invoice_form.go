package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/invoice"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/store"
)

// The invoice form, new or an invoice's changes: line items, with totals kept up to date as the user
// types. Its fields carry the API's names (items[1].unit_price) and are read into the service's
// own body (invoice.Body), so a refusal names the field the API would, and is shown beside it. The
// totals are the invoice service's, never the page's: a "Recalculate" submit shows the form again with
// them (invoice.Preview, the arithmetic that saving uses), and with script the page asks the same
// question of /dashboard/invoices/totals as the user types, so what the page shows cannot disagree
// with what is saved. A line left empty is dropped; the form always ends with an empty line, so that
// a line is added without script by filling it in and recalculating; with script, lines are added and
// removed in place.

// invoiceSpec are the invoice's own fields on the form, by group, in the form's order.
var invoiceSpec = []struct {
	group                   int // 0 customer, 1 invoice, 2 amounts, 3 texts
	name, label, typ, mode  string
	max                     int
	help                    string
	keepSpaces, emptyIsZero bool
	wide                    bool // a row of its own
}{
	{group: 0, name: "customer_lookup_id", label: "Vault customer", typ: "text", max: 254, wide: true,
		help: "A customer of yours, by ID or e-mail: the customer fields left empty take the customer's, and the invoice may be charged on the customer's stored cards."},
	{group: 0, name: "customer_email", label: "Customer e-mail", typ: "email", max: 254},
	{group: 0, name: "customer_first_name", label: "First name", typ: "text", max: 100},
	{group: 0, name: "customer_last_name", label: "Last name", typ: "text", max: 100},
	{group: 0, name: "customer_company", label: "Company", typ: "text", max: 200},
	{group: 1, name: "invoice_number", label: "Invoice number", typ: "text", max: 50},
	{group: 1, name: "currency", label: "Currency", typ: "select"},
	{group: 1, name: "due_date", label: "Due date", typ: "date", max: 10},
	{group: 2, name: "tax_rate", label: "Tax rate (%)", typ: "text", mode: "decimal", max: 12, emptyIsZero: true},
	{group: 2, name: "discount_amount", label: "Discount", typ: "text", mode: "decimal", max: 24, emptyIsZero: true,
		help: "Taken off after tax."},
	{group: 2, name: "shipping_amount", label: "Shipping", typ: "text", mode: "decimal", max: 24, emptyIsZero: true,
		help: "Not taxed."},
	{group: 3, name: "notes", label: "Notes", typ: "textarea", max: 5000, keepSpaces: true, wide: true},
	{group: 3, name: "terms", label: "Terms", typ: "textarea", max: 5000, keepSpaces: true, wide: true},
}

// lineSpec are a line's fields, in the form's order.
var lineSpec = []struct {
	name, label, mode string
	max               int
}{{"description", "Description", "", 500}, {"quantity", "Quantity", "decimal", 12}, {"unit_price", "Unit price", "decimal", 24},
	{"sku", "SKU", "", 100}}

// invoiceField is a field of the invoice form as the page shows it.
type invoiceField struct {
	ID, Name, Label, Type, Mode, Value, Error, Help string
	Max                                             int
	Options                                         []string // a select's
	Wide                                            bool     // a row of its own
}

// DescribedBy are the ids of what describes the field: its help and its error.
func (f invoiceField) DescribedBy() string {
	var ids []string
	if f.Help != "" {
		ids = append(ids, f.ID+"-help")
	}
	if f.Error != "" {
		ids = append(ids, f.ID+"-error")
	}
	return strings.Join(ids, " ")
}

// formLine is a line of the form as posted: its fields by name, and its index among the posted rows.
type formLine struct {
	Row    int
	Values map[string]string
}

// lineView is a line as the form shows it.
type lineView struct {
	Number int // from 1
	Fields []invoiceField
	Amount string // what it comes to, or why it does not count
}

// totalRow is one of the form's totals; ID names its element for the page's script.
type totalRow struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Value string `json:"value"`
}

// invoiceForm is the invoice form as posted or as the invoice stands, and what it shows.
type invoiceForm struct {
	New        bool
	Ref        string // the invoice's lookup id when editing
	Number     string // its number, for the title
	Key        string // the form's idempotency key (formKey)
	values     map[string]string
	lines      []formLine
	errs       map[string]string // by the API's field name
	Customer   []invoiceField
	Invoice    []invoiceField
	Amounts    []invoiceField
	Texts      []invoiceField
	Lines      []lineView
	LinesError string
	Totals     []totalRow
	Note       string
}

// newInvoice shows the form of a new invoice: the next number suggested, the merchant's default
// currency, and the vault customer of ?customer= (the customer's page links here).
func (h *Handler) newInvoice(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	f := &invoiceForm{New: true, Key: formKey(), values: map[string]string{"currency": m.DefaultCurrency,
		"customer_lookup_id": strings.TrimSpace(r.URL.Query().Get("customer"))}}
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		f.values["invoice_number"], err = nextNumber(r, q, m.ID)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderInvoiceForm(w, r, http.StatusOK, f, m, view{})
}

// editInvoice shows the form of an invoice's changes, filled in as the API shows the invoice; one
// that can no longer change (PAID, OVERDUE, CANCELLED) says so.
func (h *Handler) editInvoice(w http.ResponseWriter, r *http.Request) {
	inv, ok := h.readInvoice(w, r)
	if !ok {
		return
	}
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	if inv.Status != invoice.Draft && inv.Status != invoice.Sent {
		h.render(w, r, http.StatusConflict, "message", view{Title: "Invoice " + inv.Number,
			Error: "Invoice " + inv.Number + " is " + string(inv.Status) + ": only a DRAFT or SENT invoice can change."})
		return
	}
	wire := inv.Wire("")
	f := &invoiceForm{Ref: inv.LookupID, Number: inv.Number, Key: formKey(), values: map[string]string{
		"customer_lookup_id": wire.CustomerLookupID, "customer_email": wire.CustomerEmail, "customer_first_name": wire.CustomerFirstName,
		"customer_last_name": wire.CustomerLastName, "customer_company": wire.CustomerCompany, "invoice_number": wire.InvoiceNumber,
		"currency": wire.Currency, "due_date": wire.DueDate, "tax_rate": wire.TaxRate.String(), "discount_amount": wire.DiscountAmount.String(),
		"shipping_amount": wire.ShippingAmount.String(), "notes": wire.Notes, "terms": wire.Terms}}
	for i, it := range wire.Items {
		f.lines = append(f.lines, formLine{Row: i, Values: map[string]string{"description": it.Description, "quantity": it.Quantity.String(),
			"unit_price": it.UnitPrice.String(), "sku": it.SKU}})
	}
	h.renderInvoiceForm(w, r, http.StatusOK, f, m, view{})
}

// postedInvoice reads the posted form: the invoice's fields, its lines but the empty ones, and how
// many rows of lines were posted.
func postedInvoice(form url.Values) (map[string]string, []formLine, int) {
	values := map[string]string{}
	for _, s := range invoiceSpec {
		v := form.Get(s.name)
		if !s.keepSpaces {
			v = strings.TrimSpace(v)
		}
		values[s.name] = v
	}
	var lines []formLine
	row := 0
	for ; row <= 2*invoice.MaxItems; row++ { // more than the service takes, and a bound on the work
		p := "items[" + strconv.Itoa(row) + "]."
		l := formLine{Row: row, Values: map[string]string{}}
		posted, blank := false, true
		for _, s := range lineSpec {
			if vs, ok := form[p+s.name]; ok {
				posted = true
				l.Values[s.name] = strings.TrimSpace(vs[0])
				blank = blank && l.Values[s.name] == ""
			}
		}
		if !posted {
			break
		}
		if !blank {
			lines = append(lines, l)
		}
	}
	return values, lines, row
}

// body is the form as the invoice service's body: every field sent, so that an edit may also clear one
// (an amount left empty is 0). On a new invoice an empty number is not sent: Kassa's default numbers
// it. The vault customer is sent as the caller resolved it (Handler.vaultCustomer).
func (f *invoiceForm) body(vaultID string) (invoice.Body, error) {
	items := make([]map[string]string, len(f.lines))
	for k, l := range f.lines {
		items[k] = map[string]string{}
		for name, v := range l.Values {
			if !httpapi.Storable(v) {
				return invoice.Body{}, httpapi.UnstorableText("items[" + strconv.Itoa(k) + "]." + name)
			}
			if v != "" {
				items[k][name] = v
			}
		}
	}
	raw, err := json.Marshal(items)
	if err != nil {
		return invoice.Body{}, err
	}
	v := func(name string) field.Value {
		for _, s := range invoiceSpec {
			if s.name == name && s.emptyIsZero && f.values[name] == "" {
				return field.Form("0")
			}
		}
		return field.Form(f.values[name])
	}
	b := invoice.Body{Items: raw, InvoiceNumber: v("invoice_number"), Currency: v("currency"), DueDate: v("due_date"), TaxRate: v("tax_rate"),
		DiscountAmount: v("discount_amount"), ShippingAmount: v("shipping_amount"), CustomerLookupID: field.Form(vaultID),
		CustomerEmail: v("customer_email"), CustomerFirstName: v("customer_first_name"), CustomerLastName: v("customer_last_name"),
		CustomerCompany: v("customer_company"), Notes: v("notes"), Terms: v("terms")}
	if f.New && f.values["invoice_number"] == "" {
		b.InvoiceNumber = field.Value{}
	}
	return b, nil
}

// saveInvoice answers the form's submits: "Save" makes the invoice (or saves its changes) once per
// form (h.once), any other ("Recalculate", and Enter in a field, whose default button it is) shows the
// form again with its totals. A refusal is shown beside the field it names.
func (h *Handler) saveInvoice(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	f := &invoiceForm{New: r.PathValue("invoice") == "", Ref: r.PathValue("invoice"), Key: r.PostFormValue("key"), errs: map[string]string{}}
	f.values, f.lines, _ = postedInvoice(r.PostForm)
	f.Number = f.values["invoice_number"]
	if r.PostFormValue("action") != "save" {
		h.renderInvoiceForm(w, r, http.StatusOK, f, m, view{})
		return
	}
	vaultID, err := h.vaultCustomer(r, m.ID, f.values["customer_lookup_id"])
	var b invoice.Body
	if err == nil {
		b, err = f.body(vaultID)
	}
	var path string
	if err == nil {
		path, err = h.once(r, func() (string, error) {
			var inv invoice.Invoice
			var err error
			if f.New {
				inv, err = h.cfg.Invoices.Create(r.Context(), m, b)
				return invoicePath(inv.LookupID, "created"), err
			}
			inv, err = h.cfg.Invoices.Update(r.Context(), m, f.Ref, b)
			return invoicePath(inv.LookupID, "saved"), err
		})
	}
	var fe *fault.Error
	switch {
	case err == nil:
		http.Redirect(w, r, path, http.StatusSeeOther)
	case errors.As(err, &fe) && fe.Status == http.StatusNotFound && !f.New:
		h.invoiceRefused(w, r, err)
	case errors.As(err, &fe):
		v := view{Error: "The invoice is not saved. " + fault.Sentence(fe.Message)}
		switch label := labelOf(fe.Field); {
		case fe.Code == "idempotency_key_reused":
			f.Key = formKey()
			v.Error = "This form has already saved an invoice, with other values: nothing more was saved. Check the values and send this new form to save them as well."
		case fe.Field == "key":
			f.Key = formKey()
		case fe.Code == "idempotency_key_in_use":
			v.Error = fe.Message
		case fe.Code == "invoice_number_taken":
			f.errs["invoice_number"] = "Another invoice of yours has this number: choose another."
			v.Error = "The invoice is not saved. Check the field marked below."
		case label != fe.Field: // one of the form's fields
			f.errs[fe.Field] = named(fe, label)
			v.Error = "The invoice is not saved. Check the field marked below."
		}
		h.renderInvoiceForm(w, r, fe.Status, f, m, v)
	default:
		h.fail(w, r, err)
	}
}

// labelOf is an API field of the form as the form names it: "Line 2 unit price" for
// items[1].unit_price.
func labelOf(name string) string {
	if k, sub, ok := lineField(name); ok {
		for _, s := range lineSpec {
			if s.name == sub {
				return "Line " + strconv.Itoa(k+1) + " " + strings.ToLower(s.label[:1]) + s.label[1:]
			}
		}
	}
	for _, s := range invoiceSpec {
		if s.name == name {
			return s.label
		}
	}
	if name == "items" {
		return "Lines"
	}
	return name
}

// lineField splits the API's name of a line's field, items[k].name.
func lineField(name string) (int, string, bool) {
	rest, ok := strings.CutPrefix(name, "items[")
	if !ok {
		return 0, "", false
	}
	n, sub, ok := strings.Cut(rest, "].")
	k, err := strconv.Atoi(n)
	return k, sub, ok && err == nil
}

// formTotals is what the form's totals show, by invoice.Preview: each line's amount (or why it does not
// count), the totals, and a note.
type formTotals struct {
	Lines  []string
	Totals []totalRow
	Note   string
	errs   map[string]string // the fields Preview refused, by the API's name
}

// totalsOf previews the form's lines and totals through the invoice service.
func totalsOf(f *invoiceForm, m merchant.Merchant) formTotals {
	out := formTotals{Lines: make([]string, len(f.lines)), errs: map[string]string{}}
	b, err := f.body("")
	p := invoice.Previewed{Err: err}
	if err == nil {
		p = invoice.Preview(b, m)
	}
	amt := func(v int64) string {
		if p.Currency.Code == "" {
			return "—"
		}
		return money.Display(v, p.Currency, m.Language())
	}
	var skipped []string
	for k, l := range p.Lines {
		if fe := (*fault.Error)(nil); errors.As(l.Err, &fe) {
			msg := named(fe, labelOf(fe.Field))
			out.Lines[k], out.errs[fe.Field] = "Not counted: "+fault.Sentence(msg), msg
			skipped = append(skipped, strconv.Itoa(k+1))
			continue
		}
		out.Lines[k] = amt(l.Total) + ", tax " + amt(l.Tax)
	}
	discount := amt(-p.Discount) // a discount reads as the negative amount it is
	out.Totals = []totalRow{{"total-subtotal", "Subtotal", amt(p.Totals.Subtotal)}, {"total-tax", "Tax", amt(p.Totals.Tax)},
		{"total-discount", "Discount", discount}, {"total-shipping", "Shipping", amt(p.Shipping)},
		{"total-total", "Total", amt(p.Totals.Total)}}
	var fe *fault.Error
	switch {
	case len(f.lines) == 0 && errors.As(p.Err, &fe) && fe.Field == "items":
		out.errs[fe.Field], out.Note = named(fe, labelOf(fe.Field)), "The totals follow the lines as they are filled in."
	case errors.As(p.Err, &fe):
		msg := named(fe, labelOf(fe.Field))
		out.errs[fe.Field], out.Note = msg, "Not computed: "+fault.Sentence(msg)
	case len(skipped) == 1:
		out.Note = "Line " + skipped[0] + " is not counted until it is complete."
	case len(skipped) > 1:
		out.Note = "Lines " + strings.Join(skipped, ", ") + " are not counted until they are complete."
	default:
		out.Note = "As Kassa computes them: each line's amount and tax rounded half up to the currency's smallest unit."
	}
	return out
}

// totalsAnswer is the answer of /dashboard/invoices/totals: the amount of each posted row of lines
// ("" for an empty one), the totals and the note.
type totalsAnswer struct {
	Lines  []string   `json:"lines"`
	Totals []totalRow `json:"totals"`
	Note   string     `json:"note"`
}

// invoiceTotals answers the form's script with the form's totals as the user types, computed by the
// invoice service (invoice.Preview) from the form it posts, exactly as "Recalculate" and saving
// compute them.
func (h *Handler) invoiceTotals(w http.ResponseWriter, r *http.Request) {
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	f := &invoiceForm{New: true}
	var rows int
	f.values, f.lines, rows = postedInvoice(r.PostForm)
	t := totalsOf(f, m)
	out := totalsAnswer{Lines: make([]string, rows), Totals: t.Totals, Note: t.Note}
	for k, l := range f.lines {
		out.Lines[l.Row] = t.Lines[k]
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// renderInvoiceForm shows the form f with its totals, the fields at fault marked, and an empty line
// last.
func (h *Handler) renderInvoiceForm(w http.ResponseWriter, r *http.Request, status int, f *invoiceForm, m merchant.Merchant, v view) {
	t := totalsOf(f, m)
	if f.errs == nil {
		f.errs = map[string]string{}
	}
	if r.Method == http.MethodPost { // the totals' refusals are shown once the form is sent, not on a first view
		for name, msg := range t.errs {
			if _, ok := f.errs[name]; !ok {
				f.errs[name] = msg
			}
		}
		if len(f.errs) > 0 && v.Error == "" {
			v.Error = "Check the fields marked below."
		}
	}
	f.Totals, f.Note, f.LinesError = t.Totals, t.Note, f.errs["items"]
	groups := []*[]invoiceField{&f.Customer, &f.Invoice, &f.Amounts, &f.Texts}
	for _, s := range invoiceSpec {
		fd := invoiceField{ID: s.name, Name: s.name, Label: s.label, Type: s.typ, Mode: s.mode, Max: s.max, Help: s.help,
			Value: f.values[s.name], Error: f.errs[s.name], Wide: s.wide}
		if s.name == "currency" {
			fd.Options = currencies(m)
		}
		*groups[s.group] = append(*groups[s.group], fd)
	}
	for k, l := range append(f.lines, formLine{Values: map[string]string{}}) {
		lv := lineView{Number: k + 1}
		if k < len(t.Lines) {
			lv.Amount = t.Lines[k]
		}
		for _, s := range lineSpec {
			name := "items[" + strconv.Itoa(k) + "]." + s.name
			lv.Fields = append(lv.Fields, invoiceField{ID: "line-" + strconv.Itoa(k) + "-" + s.name, Name: name, Label: s.label,
				Type: "text", Mode: s.mode, Max: s.max, Value: l.Values[s.name], Error: f.errs[name]})
		}
		f.Lines = append(f.Lines, lv)
	}
	v.Title, v.Data, v.Wide = "New invoice", f, true
	if !f.New {
		v.Title = "Edit invoice " + f.Number
	}
	h.render(w, r, status, "invoice-form", v)
}

package dashboard

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/vault"
)

// Customers: the list, searched by name, e-mail or a card's last 4 digits; a customer's page with its
// cards (brand, last 4, expiry, which is the default), its subscriptions (status, next billing date)
// and its payments; create and edit; make a card the default; delete a card or a customer, the API's
// 409 rules shown as a plain sentence. Every change goes through the vault's own operations
// (vault.Service), so the dashboard and the API keep one set of rules. Readers see customers;
// managers change them and charge their stored cards. Adding a card through the hosted card form
// (/dashboard/customers/{customer_id}/cards/new) is the virtual terminal's.

const customersPath = "/dashboard/customers"

// customerPage and paymentPage are how many customers the list shows, and payments the detail page.
const (
	customerPage = 50
	paymentPage  = 20
)

func (h *Handler) customerRoutes(r *httpapi.Router) {
	r.Handle("GET", customersPath, h.requireRole(readers, h.customers))
	r.Handle("GET", customersPath+"/new", h.requireRole(managers, h.newCustomer))
	r.Handle("POST", customersPath, h.requireRole(managers, h.createCustomer))
	r.Handle("GET", customersPath+"/{c}", h.requireRole(readers, h.customer))
	r.Handle("GET", customersPath+"/{c}/edit", h.requireRole(managers, h.editCustomer))
	r.Handle("POST", customersPath+"/{c}", h.requireRole(managers, h.updateCustomer))
	r.Handle("GET", customersPath+"/{c}/delete", h.requireRole(managers, h.confirmCustomerAction(deleteCustomer)))
	r.Handle("POST", customersPath+"/{c}/delete", h.requireRole(managers, h.customerAction(deleteCustomer)))
	r.Handle("GET", customersPath+"/{c}/cards/{card}/default", h.requireRole(managers, h.confirmCustomerAction(makeDefault)))
	r.Handle("POST", customersPath+"/{c}/cards/{card}/default", h.requireRole(managers, h.customerAction(makeDefault)))
	r.Handle("GET", customersPath+"/{c}/cards/{card}/delete", h.requireRole(managers, h.confirmCustomerAction(deleteCard)))
	r.Handle("POST", customersPath+"/{c}/cards/{card}/delete", h.requireRole(managers, h.customerAction(deleteCard)))
	r.Handle("GET", customersPath+"/{c}/cards/{card}/charge", h.requireRole(managers, h.chargeForm))
	r.Handle("POST", customersPath+"/{c}/cards/{card}/charge", h.requireRole(managers, h.chargeCard))
}

// customersView is the list page: the search, a page of customers, and the neighbouring pages.
type customersView struct {
	Q, Matched   string // the search, and what it was taken for
	Rows         []customerRow
	Newer, Older template.URL // the neighbouring pages; "" when there is none
	Manage       bool         // the user may add customers
	Chips        []filterChip // the search applied, removable
	Empty        *emptyState  // in place of the table when there is no row
}

// customerRow is one customer in the list.
type customerRow struct {
	ID, Name, Email, Company, Created string
	Cards                             []string
}

var lastFour = regexp.MustCompile(`^[0-9]{4}$`)

// search reads the search box into the vault's filter: an e-mail address (it has an @), a card's last
// four digits (four digits), or else a name ("Jane", "Roe", "Jane Roe"); each matched whole and
// case-insensitively, as the API's filters match. It says what q was taken for.
func search(q string) (vault.CustomerFilter, string) {
	switch q = strings.TrimSpace(q); {
	case q == "":
		return vault.CustomerFilter{}, ""
	case strings.Contains(q, "@"):
		return vault.CustomerFilter{Email: q}, "e-mail"
	case lastFour.MatchString(q):
		return vault.CustomerFilter{CardSuffix: q}, "card last 4"
	}
	return vault.CustomerFilter{Name: q}, "name"
}

// customers serves the list and its search, a page at a time by cursor, newest first.
func (h *Handler) customers(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	q := r.URL.Query()
	v := view{Title: "Customers", Wide: true}
	cv := &customersView{Q: q.Get("q"), Manage: isManager(sess.Role)}
	v.Data = cv
	if !httpapi.Storable(cv.Q) {
		cv.Q = ""
		v.Error = "The search must be text."
		h.render(w, r, http.StatusBadRequest, "customers", v)
		return
	}
	before, err := cursor(q, "before")
	var after int64
	if err == nil {
		after, err = cursor(q, "after")
	}
	if err != nil {
		v.Error = err.Error()
		h.render(w, r, http.StatusBadRequest, "customers", v)
		return
	}
	if q.Has("deleted") {
		v.Notice = "The customer is deleted."
	}
	f, matched := search(cv.Q)
	cv.Matched = matched
	cv.Chips = chipsOf(customersPath, url.Values{"q": {strings.TrimSpace(cv.Q)}}, []filterParam{{"q", "Search"}}, nil)
	// One more than a page says whether there is another page beyond it.
	f.Limit, f.Before, f.After = customerPage+1, before, after
	list, err := h.cfg.Vault.ListCustomers(r.Context(), sess.MerchantID, f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	more := len(list) > customerPage
	if more && before > 0 && after == 0 {
		list = list[1:] // paging backwards: the extra one is the newest
	} else if more {
		list = list[:customerPage]
	}
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, c := range list {
		row := customerRow{ID: c.LookupID, Name: fullName(c), Email: c.Email, Company: c.Company, Created: c.CreatedAt.In(m.Location()).Format("2006-01-02")}
		for _, cd := range c.Cards {
			row.Cards = append(row.Cards, cardLabel(cd))
		}
		cv.Rows = append(cv.Rows, row)
	}
	switch {
	case len(list) == 0 && cv.Q != "":
		cv.Empty = noMatch("customers-empty", "No customer’s "+cv.Matched+" is “"+cv.Q+"”.", customersPath)
	case len(list) == 0:
		cv.Empty = &emptyState{ID: "customers-empty", Heading: "No customers yet",
			About:  "Customers keep cards on file for repeat and subscription payments.",
			Action: actionIf(cv.Manage, link{"Add a customer", customersPath + "/new"}),
			Also:   actionIf(slices.Contains(sellers, sess.Role), link{"save one from the terminal", terminalPath})}
	}
	if len(list) > 0 {
		page := func(k string, id int64) template.URL {
			p := url.Values{k: {strconv.FormatInt(id, 10)}}
			if cv.Q != "" {
				p.Set("q", cv.Q)
			}
			return template.URL(customersPath + "?" + p.Encode()) // encoded: safe as it is
		}
		if (before > 0 && after == 0 && more) || after > 0 {
			cv.Newer = page("before", list[0].ID)
		}
		if (before > 0 && after == 0) || more {
			cv.Older = page("after", list[len(list)-1].ID)
		}
	}
	h.render(w, r, http.StatusOK, "customers", v)
}

// cursor reads a list's paging parameter name: a row id, as the transactions list's (0 when absent).
func cursor(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, errors.New("The page to show (" + name + ") must be a row number from this list's links.")
	}
	return id, nil
}

// fullName is the customer's name, or its e-mail address when it has none.
func fullName(c vault.Customer) string {
	if n := strings.TrimSpace(c.FirstName + " " + c.LastName); n != "" {
		return n
	}
	return c.Email
}

// brands are the card brands as a person reads them.
var brands = map[string]string{"VISA": "Visa", "MASTERCARD": "Mastercard", "AMEX": "American Express", "DISCOVER": "Discover",
	"JCB": "JCB", "DINERS": "Diners Club", "UNIONPAY": "UnionPay"}

// brandName is a card brand as a person reads it.
func brandName(b string) string {
	if n, ok := brands[b]; ok {
		return n
	}
	return "Card"
}

// cardLabel names a stored card by brand and last four digits, never more.
func cardLabel(cd vault.Card) string {
	s := brandName(cd.Type) + " ending " + cd.Suffix
	if cd.IsDefault {
		s += " (default)"
	}
	return s
}

// customerView is the detail page.
type customerView struct {
	ID, Name      string
	Fields        []detailRow
	Cards         []cardRow
	Subscriptions []subscriptionRow
	Payments      []paymentRow
	OlderPayments template.URL // the next page of payments
	Manage        bool
}

// detailRow is one of the customer's fields that has a value.
type detailRow struct{ Label, Value string }

// cardRow is a stored card: at most its first six and last four digits (PCI DSS 3.4.1).
type cardRow struct {
	ID, Brand, First6, Last4, Expiry, Description string
	Default                                       bool
}

// subscriptionRow is one of the customer's subscriptions.
type subscriptionRow struct {
	ID, Plan, Status, Amount, Next string
}

// paymentRow is one of the customer's transactions.
type paymentRow struct {
	ID, When, Kind, Result, Amount, Card string
}

// labels are the customer's fields as the dashboard names them, by their names in the API.
var labels = map[string]string{"email": "E-mail", "first_name": "First name", "last_name": "Last name", "company": "Company",
	"bcc_emails": "Receipt copies to", "telephone": "Telephone", "address1": "Address", "address2": "Address, line 2",
	"city": "City", "province": "Province or state", "country": "Country", "postal_code": "Postal code", "custom_id": "Your customer ID"}

// customer serves a customer's page: its fields, cards, subscriptions and payments (the transactions
// of its stored cards, newest first, with their captures, refunds and voids).
func (h *Handler) customer(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	c, ok := h.findCustomer(w, r)
	if !ok {
		return
	}
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	loc, lang := m.Location(), m.Language()
	cv := &customerView{ID: c.LookupID, Name: fullName(c), Manage: isManager(sess.Role)}
	for _, f := range vault.DetailFields() {
		if val := c.Value(f.Name); val != "" {
			cv.Fields = append(cv.Fields, detailRow{labels[f.Name], val})
		}
	}
	for _, cd := range c.Cards {
		cv.Cards = append(cv.Cards, cardRow{ID: cd.LookupID, Brand: brandName(cd.Type), First6: cd.Prefix, Last4: cd.Suffix,
			Expiry: cd.Expiry.String(), Description: cd.Description, Default: cd.IsDefault})
	}
	for _, sub := range c.Subscriptions {
		row := subscriptionRow{ID: sub.LookupID, Plan: sub.Name, Status: sub.Status, Amount: money.Display(sub.Amount, sub.Currency, lang)}
		if sub.NextRun.Valid {
			row.Next = time.UnixMilli(sub.NextRun.Int64).In(loc).Format("2006-01-02")
		}
		cv.Subscriptions = append(cv.Subscriptions, row)
	}
	f := payment.Filter{CustomerLookupID: c.LookupID, Limit: paymentPage + 1}
	if f.After, err = cursor(r.URL.Query(), "payments_after"); err != nil {
		h.render(w, r, http.StatusBadRequest, "message", view{Title: "Not shown", Error: err.Error()})
		return
	}
	p, err := h.cfg.Ledger.List(r.Context(), sess.MerchantID, f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	list := p.Transactions
	if len(list) > paymentPage {
		list = list[:paymentPage]
		cv.OlderPayments = template.URL(customersPath + "/" + c.LookupID + "?payments_after=" + strconv.FormatInt(list[len(list)-1].ID, 10))
	}
	for _, t := range list {
		cv.Payments = append(cv.Payments, paymentRow{ID: t.TransactionID, When: t.CreatedAt.In(loc).Format("2006-01-02 15:04"),
			Kind: t.Kind, Result: t.Status, Amount: money.Display(t.Amount, t.Currency, lang),
			Card: brandName(t.CardType) + " ending " + t.CardSuffix})
	}
	h.render(w, r, http.StatusOK, "customer", view{Title: cv.Name, Wide: true, Data: cv, Notice: notices[r.URL.Query().Get("done")]})
}

// notices are what the customer's page says after a change, by the change's name in its query.
var notices = map[string]string{"created": "The customer is saved.", "updated": "The changes are saved.",
	"default": "The card is now the default.", "card-deleted": "The card is deleted."}

// findCustomer reads the merchant's customer of the request's path; another merchant's, like a
// missing one, is a 404 page. It reports false when it answered.
func (h *Handler) findCustomer(w http.ResponseWriter, r *http.Request) (vault.Customer, bool) {
	c, err := h.cfg.Vault.Get(r.Context(), signedIn(r).MerchantID, r.PathValue("c"))
	if err != nil {
		h.refuse(w, r, err)
		return vault.Customer{}, false
	}
	return c, true
}

// refuse answers a vault or ledger error: not found as the 404 page, another *fault.Error as a page
// that says it, with its status; any other as an internal failure.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var f *fault.Error
	switch {
	case !errors.As(err, &f):
		h.fail(w, r, err)
	case f.Status == http.StatusNotFound:
		h.notFound(w, r)
	default:
		h.render(w, r, f.Status, "message", view{Title: "Not done", Error: f.Message})
	}
}

// customerForm is the form of a new customer or of a customer's changes.
type customerForm struct {
	Action, Submit, Cancel string
	Fields                 []formField
}

// formField is one field of a form, with its value and its error.
type formField struct {
	Name, Label, Type, Value, Error string
	Max                             int
	Required                        bool
}

// newCustomerForm is the form of the fields, each filled with value(its name), with err (a
// *fault.Error naming a field) next to its field.
func newCustomerForm(action, submit, cancel string, value func(name string) string, err error) *customerForm {
	cf := &customerForm{Action: action, Submit: submit, Cancel: cancel}
	var f *fault.Error
	errors.As(err, &f)
	for _, fd := range vault.DetailFields() {
		ff := formField{Name: fd.Name, Label: labels[fd.Name], Type: "text", Value: value(fd.Name), Max: fd.Max, Required: fd.Name == "email"}
		switch fd.Name {
		case "email":
			ff.Type = "email"
		case "telephone":
			ff.Type = "tel"
		}
		if f != nil && f.Field == fd.Name {
			ff.Error = named(f, ff.Label)
		}
		cf.Fields = append(cf.Fields, ff)
	}
	return cf
}

// named is the vault's message about a field with the field called by its label on the form: "First
// name must be at most 100 characters", not "first_name must be …".
func named(f *fault.Error, label string) string {
	return strings.Replace(f.Message, f.Field, label, 1)
}

func (h *Handler) newCustomer(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "customer-form", view{Title: "New customer",
		Data: newCustomerForm(customersPath, "Save the customer", customersPath, vault.Details{}.Value, nil)})
}

// createCustomer stores a new customer by the vault's rules; a bad field is shown next to it.
func (h *Handler) createCustomer(w http.ResponseWriter, r *http.Request) {
	c, err := h.cfg.Vault.CreateCustomer(r.Context(), signedIn(r).MerchantID, r.PostForm)
	if h.formError(w, r, "New customer", newCustomerForm(customersPath, "Save the customer", customersPath, r.PostForm.Get, err), err) {
		return
	}
	http.Redirect(w, r, customersPath+"/"+c.LookupID+"?done=created", http.StatusSeeOther)
}

func (h *Handler) editCustomer(w http.ResponseWriter, r *http.Request) {
	c, ok := h.findCustomer(w, r)
	if !ok {
		return
	}
	path := customersPath + "/" + c.LookupID
	h.render(w, r, http.StatusOK, "customer-form", view{Title: "Edit " + fullName(c), Data: newCustomerForm(path, "Save the changes", path, c.Value, nil)})
}

// updateCustomer saves the form's changes by the vault's rules.
func (h *Handler) updateCustomer(w http.ResponseWriter, r *http.Request) {
	path := customersPath + "/" + r.PathValue("c")
	_, err := h.cfg.Vault.UpdateCustomer(r.Context(), signedIn(r).MerchantID, r.PathValue("c"), r.PostForm)
	if h.formError(w, r, "Edit the customer", newCustomerForm(path, "Save the changes", path, r.PostForm.Get, err), err) {
		return
	}
	http.Redirect(w, r, path+"?done=updated", http.StatusSeeOther)
}

// formError answers a customer form's error, if any, and reports whether there was one: a bad field
// shows the form again with the message next to the field; any other refusal is a page that says it.
func (h *Handler) formError(w http.ResponseWriter, r *http.Request, title string, cf *customerForm, err error) bool {
	var f *fault.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &f) && f.Field != "":
		h.render(w, r, f.Status, "customer-form", view{Title: title, Data: cf})
	default:
		h.refuse(w, r, err)
	}
	return true
}

// customerAction is one of the changes a confirmation page asks about.
type customerAction struct {
	confirm func(c vault.Customer, cd vault.Card) (question, button string)
	do      func(h *Handler, r *http.Request) error
	done    string // where the browser goes after it: the customer's page with this notice, or the list when ""
	card    bool   // it acts on a card of the customer
}

var (
	deleteCustomer = customerAction{
		confirm: func(c vault.Customer, _ vault.Card) (string, string) {
			return "Delete " + fullName(c) + " (" + c.Email + ") and the customer's stored cards? This cannot be undone.", "Delete the customer"
		},
		do: func(h *Handler, r *http.Request) error {
			return h.cfg.Vault.DeleteCustomer(r.Context(), signedIn(r).MerchantID, r.PathValue("c"))
		},
	}
	makeDefault = customerAction{
		confirm: func(c vault.Customer, cd vault.Card) (string, string) {
			return "Make the " + cardLabel(cd) + " the default card of " + fullName(c) + "?", "Make it the default"
		},
		do:   onCard((*vault.Service).MakeDefault),
		done: "default", card: true,
	}
	deleteCard = customerAction{
		confirm: func(c vault.Customer, cd vault.Card) (string, string) {
			return "Delete the " + cardLabel(cd) + " of " + fullName(c) + "? This cannot be undone.", "Delete the card"
		},
		do:   onCard((*vault.Service).DeleteCard),
		done: "card-deleted", card: true,
	}
)

// onCard is the change that op makes to the request's card of the request's customer.
func onCard(op func(*vault.Service, context.Context, string, string, string) (vault.Customer, error)) func(*Handler, *http.Request) error {
	return func(h *Handler, r *http.Request) error {
		_, err := op(h.cfg.Vault, r.Context(), signedIn(r).MerchantID, r.PathValue("c"), r.PathValue("card"))
		return err
	}
}

// confirmView is a confirmation page: the question, and a form that does it.
type confirmView struct {
	Question, Action, Button, Back string
}

// confirmCustomerAction serves the page that asks before a change (a plain form: it works without
// script).
func (h *Handler) confirmCustomerAction(a customerAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.confirmPage(w, r, a, http.StatusOK, "")
	}
}

// confirmPage shows a's confirmation, with why it was refused when it was.
func (h *Handler) confirmPage(w http.ResponseWriter, r *http.Request, a customerAction, status int, refusal string) {
	c, ok := h.findCustomer(w, r)
	if !ok {
		return
	}
	var cd vault.Card
	if a.card {
		if cd, ok = cardOf(c, r.PathValue("card")); !ok {
			h.render(w, r, http.StatusNotFound, "message", view{Title: "Not found", Error: "This customer has no such card."})
			return
		}
	}
	question, button := a.confirm(c, cd)
	h.render(w, r, status, "customer-confirm", view{Title: button, Error: refusal,
		Data: &confirmView{Question: question, Action: r.URL.Path, Button: button, Back: customersPath + "/" + c.LookupID}})
}

// customerAction does a change: a refusal by the vault's rules (a 409: a card that bills a current
// subscription, a customer with one) is said in a sentence on the confirmation page.
func (h *Handler) customerAction(a customerAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := a.do(h, r)
		var f *fault.Error
		switch {
		case errors.As(err, &f) && f.Status == http.StatusConflict:
			h.confirmPage(w, r, a, f.Status, f.Message)
		case err != nil:
			h.refuse(w, r, err)
		case a.done == "":
			http.Redirect(w, r, customersPath+"?deleted=1", http.StatusSeeOther)
		default:
			http.Redirect(w, r, customersPath+"/"+r.PathValue("c")+"?done="+a.done, http.StatusSeeOther)
		}
	}
}

// cardOf finds one of the customer's cards.
func cardOf(c vault.Customer, lookupID string) (vault.Card, bool) {
	for _, cd := range c.Cards {
		if cd.LookupID == lookupID {
			return cd, true
		}
	}
	return vault.Card{}, false
}

// chargeView is the form that charges a stored card.
type chargeView struct {
	Customer, Card, Action, Back string
	Key                          string // the form's idempotency key (formKey)
	Kind, Amount, Currency       string
	Currencies                   []string
	AmountError, CurrencyError   string
}

// chargeKinds are what a stored card's charge may be, as the form sends them.
var chargeKinds = map[string]bool{payment.KindSale: true, payment.KindAuthorization: true}

// chargeForm serves the form that charges one of the customer's stored cards.
func (h *Handler) chargeForm(w http.ResponseWriter, r *http.Request) {
	h.renderCharge(w, r, http.StatusOK, &chargeView{Key: formKey(), Kind: payment.KindSale}, "")
}

// renderCharge shows the charge form of the request's card with cv's values and errors.
func (h *Handler) renderCharge(w http.ResponseWriter, r *http.Request, status int, cv *chargeView, refusal string) {
	c, ok := h.findCustomer(w, r)
	if !ok {
		return
	}
	cd, ok := cardOf(c, r.PathValue("card"))
	if !ok {
		h.render(w, r, http.StatusNotFound, "message", view{Title: "Not found", Error: "This customer has no such card."})
		return
	}
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	cv.Customer, cv.Card, cv.Action, cv.Back = fullName(c), cardLabel(cd)+", expires "+cd.Expiry.String(), r.URL.Path, customersPath+"/"+c.LookupID
	cv.Currencies = currencies(m)
	if cv.Currency == "" {
		cv.Currency = m.DefaultCurrency
	}
	h.render(w, r, status, "customer-charge", view{Title: "Charge a stored card", Error: refusal, Data: cv})
}

// currencies are the merchant's currencies, its default first.
func currencies(m merchant.Merchant) []string {
	out := []string{m.DefaultCurrency}
	for _, c := range m.Currencies {
		if c != m.DefaultCurrency {
			out = append(out, c)
		}
	}
	return out
}

// chargeCard charges the stored card through the vault's payment path, as the signed-in user
// (h.payer), under the form's idempotency key: a double submit or a reload of the same form charges
// once and lands on the same transaction: each form carries its own idempotency key, so that a
// double submit or a reload never moves money twice.
func (h *Handler) chargeCard(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	cv := &chargeView{Key: r.PostFormValue("key"), Kind: r.PostFormValue("kind"), Amount: strings.TrimSpace(r.PostFormValue("amount")),
		Currency: r.PostFormValue("currency")}
	switch {
	case cv.Key == "" || !httpapi.Storable(cv.Key) || len(cv.Key) > 64:
		cv.Key = formKey()
		h.renderCharge(w, r, http.StatusBadRequest, cv, "This form has expired; check it and send it again.")
		return
	case !chargeKinds[cv.Kind]:
		cv.Kind = payment.KindSale
		h.renderCharge(w, r, http.StatusBadRequest, cv, "Choose a sale or an authorization.")
		return
	}
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	t, err := h.cfg.Vault.Pay(r.Context(), h.payer(r, m), m, cv.Kind, r.PathValue("c"), r.PathValue("card"), cv.Amount, cv.Currency,
		ledgerKey(sess.UserID, cv.Key))
	var f *fault.Error
	switch {
	case errors.As(err, &f) && f.Code == "idempotency_key_reused":
		// The form charged the card already, with other values: another charge is another form.
		cv.Key = formKey()
		h.renderCharge(w, r, f.Status, cv, "This form has already charged the card. Check the values and send this new form for another charge.")
	case errors.As(err, &f) && f.Status != http.StatusNotFound:
		// Nothing was charged under this key: the same form may be sent again, corrected.
		switch f.Field {
		case "amount":
			cv.AmountError = named(f, "Amount")
		case "currency":
			cv.CurrencyError = named(f, "Currency")
		default:
			h.renderCharge(w, r, f.Status, cv, f.Message)
			return
		}
		h.renderCharge(w, r, f.Status, cv, "")
	case err != nil:
		h.refuse(w, r, err)
	default:
		http.Redirect(w, r, "/dashboard/transactions/"+t.TransactionID, http.StatusSeeOther)
	}
}

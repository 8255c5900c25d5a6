package dashboard

import (
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
	"github.com/kassapay/kassa/internal/history"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"

	"golang.org/x/text/language"
)

// The Transactions section: the list with filters (date range in the merchant's time zone, type,
// result, amount range, card first 6 / last 4, customer e-mail or name, transaction id, order id),
// cursor paging, newest first; a detail page with every field, the chain (authorization → captures →
// refunds or void), the processor and its reference, the audit trail, and the 3-D Secure outcome
// where there was one. Actions on the detail page: capture (partial), refund (partial, up to what
// remains), void — each with a confirmation, and each form carrying its own idempotency key so that a
// double submit or a reload never moves money twice. Sales staff see only their own transactions;
// another's is not found, as another merchant's is.

const transactionsPath = "/dashboard/transactions"

// listPage is how many transactions a page of the list shows.
const listPage = 50

// transactionRoutes registers the Transactions section.
func (h *Handler) transactionRoutes(r *httpapi.Router) {
	r.Handle("GET", transactionsPath, h.requireRole(listers, h.transactions))
	r.Handle("GET", transactionsPath+"/export.csv", h.requireRole(listers, h.exportCSV))
	r.Handle("GET", transactionsPath+"/{id}", h.requireRole(listers, h.transaction))
	for _, kind := range []string{payment.KindCapture, payment.KindRefund, payment.KindVoid} {
		r.Handle("POST", transactionsPath+"/{id}/"+strings.ToLower(kind), h.requireRole(managers, h.followUp(kind)))
	}
}

// listForm is the list's filter form as typed: the query parameters of the URL contract.
type listForm struct {
	From, To, Type, Result, Min, Max, First6, Last4, Email, Name, ID, Order string
}

// query is the form as query parameters, the empty ones left out.
func (f listForm) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"from": f.From, "to": f.To, "type": f.Type, "result": f.Result, "min": f.Min, "max": f.Max,
		"first6": f.First6, "last4": f.Last4, "email": f.Email, "name": f.Name, "id": f.ID, "order": f.Order} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// badFilter is a filter field at fault: its parameter and the sentence that names it.
type badFilter struct{ Field, Message string }

var (
	sixDigits  = regexp.MustCompile(`^[0-9]{6}$`)
	fourDigits = regexp.MustCompile(`^[0-9]{4}$`)
	txID       = regexp.MustCompile(`^[A-Z2-7]{20}$`)
)

// kinds are the transaction types the list filters by.
var kinds = []string{payment.KindSale, payment.KindAuthorization, payment.KindCapture, payment.KindRefund, payment.KindVoid}

// parseList reads the list's filter from q, dates as days of loc; a bad field is named.
func parseList(q url.Values, loc *time.Location) (listForm, payment.Filter, *badFilter) {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	form := listForm{From: get("from"), To: get("to"), Type: strings.ToUpper(get("type")), Result: strings.ToUpper(get("result")),
		Min: get("min"), Max: get("max"), First6: get("first6"), Last4: get("last4"), Email: get("email"), Name: get("name"),
		ID: strings.ToUpper(get("id")), Order: get("order")}
	f := payment.Filter{Kind: form.Type, Result: form.Result, CardPrefix: form.First6, CardSuffix: form.Last4, Email: form.Email,
		Name: form.Name, TransactionID: form.ID, OrderID: form.Order}
	for _, d := range []struct {
		field, label, v string
		dst             *time.Time
		days            int
	}{{"from", "From", form.From, &f.From, 0}, {"to", "To", form.To, &f.To, 1}} {
		if d.v == "" {
			continue
		}
		day, err := time.ParseInLocation(time.DateOnly, d.v, loc)
		if err != nil {
			return form, f, &badFilter{d.field, d.label + " must be a date as YYYY-MM-DD, such as 2026-11-23."}
		}
		*d.dst = day.AddDate(0, 0, d.days) // "to" includes its whole day
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return form, f, &badFilter{"to", "To must not be before From."}
	}
	if form.Type != "" && !slices.Contains(kinds, form.Type) {
		return form, f, &badFilter{"type", "Type must be one of " + strings.Join(kinds, ", ") + "."}
	}
	if form.Result != "" && form.Result != payment.StatusApproved && form.Result != payment.StatusDeclined {
		return form, f, &badFilter{"result", "Result must be APPROVED or DECLINED."}
	}
	for _, a := range []struct {
		field, label, v string
		dst             **int64
	}{{"min", "Minimum amount", form.Min, &f.MinAmount}, {"max", "Maximum amount", form.Max, &f.MaxAmount}} {
		if a.v == "" {
			continue
		}
		n, err := money.Parse(a.v, money.Currency{Code: "any", Digits: 4})
		if err != nil {
			return form, f, &badFilter{a.field, a.label + " " + err.Error() + "."}
		}
		*a.dst = &n
	}
	if f.MinAmount != nil && f.MaxAmount != nil && *f.MinAmount > *f.MaxAmount {
		return form, f, &badFilter{"max", "Maximum amount must not be below the minimum."}
	}
	switch {
	case form.First6 != "" && !sixDigits.MatchString(form.First6):
		return form, f, &badFilter{"first6", "Card first 6 must be six digits."}
	case form.Last4 != "" && !fourDigits.MatchString(form.Last4):
		return form, f, &badFilter{"last4", "Card last 4 must be four digits."}
	case form.ID != "" && !txID.MatchString(form.ID):
		return form, f, &badFilter{"id", "Transaction ID must be the 20 letters and digits of a transaction, such as 4SKDJ3W2M7QX5PZ6AB2C."}
	}
	for _, c := range []struct {
		field string
		dst   *int64
	}{{"after", &f.After}, {"before", &f.Before}} {
		if v := q.Get(c.field); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return form, f, &badFilter{c.field, "The page link is broken (" + c.field + "); start again from the first page."}
			}
			*c.dst = n
		}
	}
	return form, f, nil
}

// listView is the Transactions page.
type listView struct {
	Form    listForm
	Kinds   []string
	Invalid string // the field at fault
	Rows    []listRow
	// The queries of the newer page ("" on the first), the older ("" on the last) and the export of this
	// filter: url.Values.Encode's, used as they are.
	Newer, Older, Export template.URL
	Zone                 string // the merchant's time zone, in which dates are read and shown
	Filtered             bool
	Chips                []filterChip // the filters applied, each removable
	Empty                *emptyState  // in place of the table when there is no row
}

// listFilters are the list's filters as its chips name them, in the form's order.
var listFilters = []filterParam{{"from", "From"}, {"to", "To"}, {"type", "Type"}, {"result", "Result"}, {"min", "Minimum amount"},
	{"max", "Maximum amount"}, {"first6", "Card first 6"}, {"last4", "Card last 4"}, {"email", "Customer e-mail"},
	{"name", "Customer name"}, {"id", "Transaction ID"}, {"order", "Order ID"}}

// listRow is a transaction in the list.
type listRow struct {
	ID, When, Type, Result, Amount, Card, Customer, Order string
}

// scope is the filter every list and export of the signed-in user starts from: sales staff see only
// the transactions they made (payment.Filter.ClientID).
func scope(sess user.Session, f *payment.Filter) {
	if sess.Role == user.Sales {
		f.ClientID = clientOf(sess.UserID)
	}
}

// transactions serves the list.
func (h *Handler) transactions(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	loc, lang := m.Location(), m.Language()
	form, f, bad := parseList(r.URL.Query(), loc)
	lv := &listView{Form: form, Kinds: kinds, Zone: loc.String(), Export: template.URL(form.query().Encode()), Filtered: len(form.query()) > 0,
		Chips: chipsOf(transactionsPath, form.query(), listFilters, nil)}
	v := view{Title: "Transactions", Wide: true, Data: lv}
	if bad != nil {
		lv.Invalid, v.Error = bad.Field, bad.Message
		h.render(w, r, http.StatusBadRequest, "transactions", v)
		return
	}
	scope(sess, &f)
	f.Limit = listPage + 1 // one more says whether there is another page
	p, err := h.cfg.Ledger.List(r.Context(), m.ID, f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rows := p.Transactions
	more := len(rows) > listPage
	backwards := f.Before > 0 && f.After == 0
	if more && backwards {
		rows = rows[1:] // read upwards: the extra one is the newest
	} else if more {
		rows = rows[:listPage]
	}
	if len(rows) > 0 {
		page := func(cursor string, id int64) template.URL {
			q := form.query()
			q.Set(cursor, strconv.FormatInt(id, 10))
			return template.URL(q.Encode())
		}
		if (backwards && more) || (!backwards && f.After > 0) {
			lv.Newer = page("before", rows[0].ID)
		}
		if backwards || more {
			lv.Older = page("after", rows[len(rows)-1].ID)
		}
	}
	switch {
	case len(rows) == 0 && lv.Filtered:
		lv.Empty = noMatch("transactions-empty", "No transaction matches the filter.", transactionsPath)
	case len(rows) == 0:
		lv.Empty = &emptyState{ID: "transactions-empty", Heading: "No payments yet",
			About:  "Payments appear here once taken: key one in at the virtual terminal, or send one through the gateway API.",
			Action: actionIf(slices.Contains(sellers, sess.Role), link{"Take a payment at the terminal", terminalPath}),
			Also:   actionIf(isManager(sess.Role), link{"read the API documentation", "/docs/api"})}
	}
	for _, t := range rows {
		lv.Rows = append(lv.Rows, listRow{ID: t.TransactionID, When: t.CreatedAt.In(loc).Format("2006-01-02 15:04"), Type: t.Kind,
			Result: t.Status, Amount: money.Display(t.Amount, t.Currency, lang),
			Card: cardShown(t), Customer: customerOf(t), Order: t.OrderID})
	}
	h.render(w, r, http.StatusOK, "transactions", v)
}

// cardShown shows a transaction's card as the dashboard may: brand, first 6 and last 4.
func cardShown(t payment.Transaction) string {
	if t.CardSuffix == "" {
		return ""
	}
	return strings.TrimSpace(t.CardType + " " + t.CardPrefix + "…" + t.CardSuffix)
}

// customerOf names a transaction's customer: the name, else the e-mail.
func customerOf(t payment.Transaction) string {
	if n := strings.TrimSpace(t.FirstName + " " + t.LastName); n != "" {
		return n
	}
	return t.Email
}

// detailView is a transaction's page.
type detailView struct {
	T          payment.Transaction
	Amount     string
	Fields     []detailField
	Chain      []chainRow
	Trail      []activityRow
	Processor  string
	ThreeDS    string
	Zone       string
	Declined   bool
	Actions    bool   // the user may capture, refund or void
	Refundable string // what remains to refund of an approved sale or capture, a plain decimal for the form; "" for none
	Remains    string // Refundable as people read it, in the merchant's locale
	Capturable string // the authorized amount, the capture form's default
	CanRefund  bool
	CanCapture bool
	CanVoid    bool
	// Form keys: each form's own idempotency key (formKey).
	RefundKey, CaptureKey, VoidKey string
	// Amount as typed into a form that failed, and the form it was.
	Typed, Failed string
}

// detailField is one line of a transaction's details.
type detailField struct{ Label, Value string }

// chainRow is a transaction of the chain.
type chainRow struct {
	ID, When, Type, Result, Amount string
	Current                        bool
}

// transaction serves a transaction's page.
func (h *Handler) transaction(w http.ResponseWriter, r *http.Request) {
	h.showTransaction(w, r, http.StatusOK, "", "", "")
}

// showTransaction renders the page of the transaction of r's path with status, and an error about
// the failed form with the amount typed.
func (h *Handler) showTransaction(w http.ResponseWriter, r *http.Request, status int, failed, typed, msg string) {
	sess := signedIn(r)
	m, t, ok := h.find(w, r)
	if !ok {
		return
	}
	loc, lang := m.Location(), m.Language()
	dv := &detailView{T: t, Amount: money.Display(t.Amount, t.Currency, lang), Zone: loc.String(),
		Declined: t.Status != payment.StatusApproved, Actions: slices.Contains(managers, sess.Role), Failed: failed, Typed: typed}
	dv.Fields = details(t, loc, lang)
	switch t.Authentication {
	case processor.AuthenticationSucceeded:
		dv.ThreeDS = "Challenged; the cardholder passed"
	case processor.AuthenticationFailed:
		dv.ThreeDS = "Challenged; the cardholder failed"
	}
	chain, err := h.cfg.Ledger.Chain(r.Context(), m.ID, t)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var ids []string
	for _, c := range chain {
		if sess.Role == user.Sales && c.ClientID != clientOf(sess.UserID) {
			continue // sales staff see their own transactions only
		}
		ids = append(ids, c.TransactionID)
		dv.Chain = append(dv.Chain, chainRow{ID: c.TransactionID, When: c.CreatedAt.In(loc).Format("2006-01-02 15:04:05"), Type: c.Kind,
			Result: c.Status, Amount: money.Display(c.Amount, c.Currency, lang), Current: c.ID == t.ID})
	}
	err = h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		staff, err := user.List(r.Context(), q, m.ID)
		if err != nil {
			return err
		}
		dv.Processor = "Kassa's simulator"
		if t.ProcessorAccount != "" {
			var kind string
			var test bool
			if err := q.QueryRowContext(r.Context(), `SELECT kind, test FROM processor_accounts WHERE id = $1 AND merchant_id = $2`,
				t.ProcessorAccount, m.ID).Scan(&kind, &test); err != nil {
				return err
			}
			dv.Processor = kind + " account " + t.ProcessorAccount + map[bool]string{true: " (test)", false: ""}[test]
		}
		entries, err := history.Trail(r.Context(), q, m.ID, ids)
		dv.Trail = activityRows(entries, emailsOf(staff), loc, lang)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if dv.Actions && t.Status == payment.StatusApproved {
		switch t.Kind {
		case payment.KindSale, payment.KindCapture:
			if left := t.Amount - t.Reserved; left > 0 {
				dv.CanRefund, dv.Refundable, dv.Remains = true, money.Format(left, t.Currency), money.Display(left, t.Currency, lang)
			}
		case payment.KindAuthorization:
			dv.CanCapture = t.ClosedBy == "" && t.Amount > 0
			dv.Capturable = money.Format(t.Amount, t.Currency)
			dv.CanVoid = dv.CanCapture
		}
		dv.RefundKey, dv.CaptureKey, dv.VoidKey = formKey(), formKey(), formKey()
	}
	v := view{Title: "Transaction " + t.TransactionID, Wide: true, Error: msg, TestData: t.TestMode, Data: dv}
	// The follow-up just made, which the action's redirect names.
	if r.URL.Query().Get("done") != "" && status == http.StatusOK {
		if dv.Declined {
			v.Error = "The " + strings.ToLower(t.Kind) + " was declined: " + t.Message + "."
		} else {
			v.Notice = "The " + strings.ToLower(t.Kind) + " was approved."
		}
	}
	h.render(w, r, status, "transaction", v)
}

// details are every field of a transaction, as its page lists them; the card only as first 6 and
// last 4; times in loc, the amount in lang.
func details(t payment.Transaction, loc *time.Location, lang language.Tag) []detailField {
	c := t.Customer
	all := []detailField{
		{"Transaction ID", t.TransactionID}, {"Number", strconv.FormatInt(t.ID, 10)}, {"Type", t.Kind}, {"Result", t.Status},
		{"Message", t.Message}, {"Decline code", t.DeclineCode},
		{"Amount", money.Display(t.Amount, t.Currency, lang)},
		{"Time", t.CreatedAt.In(loc).Format("2006-01-02 15:04:05 MST")}, {"Last change", t.UpdatedAt.In(loc).Format("2006-01-02 15:04:05 MST")},
		{"Card", cardShown(t)}, {"Source", t.Source}, {"Order by", map[bool]string{true: "Mail or telephone (virtual terminal)"}[t.MailOrder]},
		{"Customer", c.CustomerLookupID}, {"Test", map[bool]string{true: "Yes: nothing was charged", false: "No"}[t.TestMode]},
		{"Acts on", t.ParentTransactionID}, {"Processor reference", t.ProcessorRef},
		{"E-mail", c.Email}, {"First name", c.FirstName}, {"Last name", c.LastName}, {"Company", c.Company}, {"Telephone", c.Telephone},
		{"Address", strings.TrimSpace(c.Address1 + " " + c.Address2)}, {"City", c.City}, {"Province", c.Province}, {"Country", c.Country},
		{"Postal code", c.PostalCode}, {"Order ID", c.OrderID}, {"Invoice ID", c.InvoiceID}, {"Custom ID", c.CustomID},
		{"Description", c.Description}, {"Made by", madeBy(t.ClientID)}, {"Request ID", t.RequestID},
	}
	var out []detailField
	for _, f := range all {
		if f.Value != "" {
			out = append(out, f)
		}
	}
	return out
}

// madeBy says who asked for a transaction: a staff user of the dashboard or an API client.
func madeBy(client string) string {
	switch {
	case strings.HasPrefix(client, "dashboard/"):
		return "Dashboard user " + strings.TrimPrefix(client, "dashboard/")
	case client != "":
		return "API client " + client
	}
	return "Kassa (subscription billing or the hosted page)"
}

// find reads the transaction of r's path: another merchant's, and for sales staff another's, is not
// found (404).
func (h *Handler) find(w http.ResponseWriter, r *http.Request) (merchant.Merchant, payment.Transaction, bool) {
	sess := signedIn(r)
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return m, payment.Transaction{}, false
	}
	t, err := h.cfg.Ledger.Get(r.Context(), m.ID, r.PathValue("id"))
	if err == nil && sess.Role == user.Sales && t.ClientID != clientOf(sess.UserID) {
		err = fault.NotFound("not the user's")
	}
	var fe *fault.Error
	if errors.As(err, &fe) && fe.Status == http.StatusNotFound {
		h.notFound(w, r)
		return m, t, false
	} else if err != nil {
		h.fail(w, r, err)
		return m, t, false
	}
	return m, t, true
}

// followUpLimit is the most that an operation of kind may move on t as read, and whether t has such a
// limit: a refund of a sale or capture what remains unrefunded, a capture of an authorization its
// amount.
func followUpLimit(kind string, t payment.Transaction) (int64, bool) {
	switch {
	case kind == payment.KindRefund && (t.Kind == payment.KindSale || t.Kind == payment.KindCapture):
		return t.Amount - t.Reserved, true
	case kind == payment.KindCapture && t.Kind == payment.KindAuthorization:
		return t.Amount, true
	}
	return 0, false
}

// followUpConfirm is the confirmation of a capture, refund or void.
type followUpConfirm struct {
	T                   payment.Transaction
	Kind, Verb, Action  string
	Amount, AmountTyped string
	Key                 string
}

// followUp serves the capture, refund and void forms of a transaction's page. Without confirm=yes
// the form's answer is a page that asks to confirm, carrying the same amount and key; with it, the
// ledger carries the operation out under the form's idempotency key, so that a second submission of
// the same form (a double click, a reload, the back button) finds the first's transaction instead of
// moving money again. What the transaction's state forbids (a refund beyond what remains, a capture
// of a captured authorization) is said on the page.
func (h *Handler) followUp(kind string) http.HandlerFunc {
	verb := strings.ToLower(kind)
	return func(w http.ResponseWriter, r *http.Request) {
		sess := signedIn(r)
		m, t, ok := h.find(w, r)
		if !ok {
			return
		}
		key, typed := r.PostFormValue("key"), strings.TrimSpace(r.PostFormValue("amount"))
		if key == "" || len(key) > 64 {
			h.showTransaction(w, r, http.StatusBadRequest, verb, typed, "This form has expired; use the form below.")
			return
		}
		var amount int64
		if kind != payment.KindVoid {
			var err error
			if amount, err = money.Parse(typed, t.Currency); err != nil {
				h.showTransaction(w, r, http.StatusBadRequest, verb, typed, "Amount "+err.Error()+".")
				return
			} else if amount == 0 {
				h.showTransaction(w, r, http.StatusBadRequest, verb, typed, "Amount must be greater than 0.")
				return
			}
		}
		if r.PostFormValue("confirm") != "yes" {
			lang := m.Language()
			// What the transaction as read allows is checked before the confirmation is asked for, so
			// that a merchant never confirms what the ledger would then refuse; the ledger checks again
			// when the operation is carried out, against the transaction as it is then.
			if most, ok := followUpLimit(kind, t); ok && amount > most {
				h.showTransaction(w, r, http.StatusConflict, verb, typed, "The "+verb+" of "+money.Display(amount, t.Currency, lang)+
					" exceeds the "+money.Display(most, t.Currency, lang)+" that "+map[bool]string{true: "remains refundable", false: "is authorized"}[kind == payment.KindRefund]+".")
				return
			}
			cv := &followUpConfirm{T: t, Kind: kind, Verb: verb, Action: transactionsPath + "/" + t.TransactionID + "/" + verb, Key: key,
				AmountTyped: typed}
			if kind != payment.KindVoid {
				cv.Amount = money.Display(amount, t.Currency, lang)
			} else {
				cv.Amount = money.Display(t.Amount, t.Currency, lang)
			}
			h.render(w, r, http.StatusOK, "transaction_confirm", view{Title: "Confirm the " + verb, Data: cv})
			return
		}
		lk := ledgerKey(sess.UserID, key)
		f := payment.FollowUp{Actor: h.payer(r, m), ParentID: t.ID, Amount: amount, IdempotencyKey: lk}
		var done payment.Transaction
		var err error
		switch kind {
		case payment.KindCapture:
			done, err = h.cfg.Ledger.Capture(r.Context(), f)
		case payment.KindRefund:
			done, err = h.cfg.Ledger.Refund(r.Context(), f)
		default:
			done, err = h.cfg.Ledger.Void(r.Context(), f)
		}
		var fe *fault.Error
		switch {
		case errors.As(err, &fe) && fe.Code == "idempotency_key_reused":
			h.showTransaction(w, r, http.StatusUnprocessableEntity, verb, typed,
				"This form was already used for another amount. Nothing more was done; use the form below to start again.")
			return
		case errors.As(err, &fe) && fe.Status < http.StatusInternalServerError && fe.Code != "idempotency_key_in_use":
			h.showTransaction(w, r, fe.Status, verb, typed, fe.Message)
			return
		case err != nil:
			// Two submissions of the same form at once: the first may hold the key; the second then shows
			// what the first did, or says it is still running.
			prior, found, ferr := h.cfg.Ledger.ByKey(r.Context(), m.ID, lk)
			switch {
			case ferr == nil && found && prior.Status != payment.StatusPending:
				done = prior
			case ferr == nil && found:
				h.showTransaction(w, r, http.StatusConflict, verb, typed, "This "+verb+" is still being processed. Reload the page in a moment to see it.")
				return
			default:
				h.fail(w, r, err)
				return
			}
		}
		http.Redirect(w, r, transactionsPath+"/"+done.TransactionID+"?done="+verb, http.StatusSeeOther)
	}
}

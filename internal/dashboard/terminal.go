package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/user"
	"github.com/kassapay/kassa/internal/vault"

	"golang.org/x/text/language"
)

// The virtual terminal: a sale or an authorization for a phone or mail order, with the currency,
// amount, order id, the customer's e-mail for a receipt, and an option to save the card to a new or
// existing customer. The card fields are the hosted card form in an iframe (a session created by the
// dashboard, POS condition mail/telephone order), so that the dashboard page itself never sees a card
// number; the same card form adds a card to a customer.
//
// Who may save the card where follows the role table (dashboard.go): every seller may save it to a new
// customer, but only a role that changes customers (managers) to an existing one, and only such a role
// may make it that customer's default card, and only when it asks. An existing customer is found by id
// or e-mail, so its answer tells whether the customer exists; managers may list customers anyway, and
// the others are refused the choice before anything is looked up, with the same answer for every
// customer named.
//
// The dashboard's form posts everything but the card; the dashboard then creates a hosted-page
// session in process (hostedpage.CreateForDashboard: no API key, the signed-in user's client id and
// velocity principal) and shows the hosted page in an iframe. The card number, expiry and CVV are
// typed only there, on the hosted page, which only Kassa's own pages may frame.

const terminalPath = "/dashboard/terminal"

// maxOrderID is the order id's length, as the gateway API bounds order_id.
const maxOrderID = 100

// terminalRoutes registers the virtual terminal and the customer's card form.
func (h *Handler) terminalRoutes(r *httpapi.Router) {
	r.Handle("GET", terminalPath, h.requireRole(sellers, h.terminal))
	r.Handle("POST", terminalPath, h.requireRole(sellers, h.startTerminal))
	r.Handle("GET", terminalPath+"/sessions/{session_id}", h.requireRole(sellers, h.terminalResult))
	r.Handle("GET", "/dashboard/customers/{customer_id}/cards/new", h.requireRole(managers, h.newCard))
}

// terminalForm is the terminal's form as sent, shown again with its errors.
type terminalForm struct {
	Kind, Currency, Amount, OrderID, Email string
	Save                                   string // "", "new" or "existing"
	FirstName, LastName, Customer          string // the new customer's name; the existing one's id or e-mail
	MakeDefault                            string // "yes": the card saved to an existing customer becomes its default
}

// terminalView is the terminal's form page.
type terminalView struct {
	Form       terminalForm
	Currencies []string
	Errors     map[string]string // by field name
	// Existing: the user's role may save the card to an existing customer, and make it the default.
	Existing bool
}

// cardFrameView is the page that frames the hosted card form.
type cardFrameView struct {
	Frame   string // the hosted page's path
	Done    string // where the page goes once the form has ended; the link to it without script
	DoneIs  string // what Done is, for its link: "See the result", "Back to the customer"
	Summary string // what the form is for
}

// terminalResult is the result page of a terminal payment.
type terminalResultView struct {
	Outcome       string // one sentence
	TransactionID string // the sale's or authorization's, when there is one
	Saved         *hostedpage.Saved
}

func (h *Handler) terminal(w http.ResponseWriter, r *http.Request) {
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "terminal", view{Title: "Terminal", Data: terminalView{
		Form: terminalForm{Kind: payment.KindSale, Currency: m.DefaultCurrency}, Currencies: m.Currencies, Existing: isManager(signedIn(r).Role)}})
}

// startTerminal checks the terminal's form and shows the hosted card form for it. Every rule is the
// intent's (checkout.IntentBody.Params: the currency enabled, the amount within the account's
// maximum, the receipt address) or the vault's (a new customer's details, an existing customer); a
// fault is shown next to its field.
func (h *Handler) startTerminal(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := terminalForm{Kind: r.PostFormValue("kind"), Currency: r.PostFormValue("currency"), Amount: strings.TrimSpace(r.PostFormValue("amount")),
		OrderID: strings.TrimSpace(r.PostFormValue("order_id")), Email: strings.TrimSpace(r.PostFormValue("email")),
		Save: r.PostFormValue("save"), FirstName: strings.TrimSpace(r.PostFormValue("first_name")),
		LastName: strings.TrimSpace(r.PostFormValue("last_name")), Customer: strings.TrimSpace(r.PostFormValue("customer")),
		MakeDefault: r.PostFormValue("make_default")}
	req, field, err := h.terminalRequest(r, m, f)
	if err == nil {
		var page string
		var ss hostedpage.Session
		if ss, page, err = h.cfg.HostedPages.CreateForDashboard(r.Context(), h.dashboardWho(r, m), req); err == nil {
			h.render(w, r, http.StatusOK, "cardframe", view{Title: "Terminal: card", Data: cardFrameView{Frame: page,
				Done: terminalPath + "/sessions/" + ss.SessionID, DoneIs: "See the result", Summary: summary(f, req, m.Language())}})
			return
		}
	}
	var fe *fault.Error
	if !errors.As(err, &fe) {
		h.fail(w, r, err)
		return
	}
	v := view{Title: "Terminal", Data: terminalView{Form: f, Currencies: m.Currencies, Errors: map[string]string{field: fe.Message},
		Existing: isManager(sess.Role)}}
	if field == "" {
		v.Error = fe.Message
	}
	h.render(w, r, fe.Status, "terminal", v)
}

// terminalRequest reads the terminal's form into a session request for m, or returns the fault and
// the form field it names ("" for none).
func (h *Handler) terminalRequest(r *http.Request, m merchant.Merchant, f terminalForm) (hostedpage.DashboardRequest, string, error) {
	req := hostedpage.DashboardRequest{Purpose: hostedpage.PurposeTerminal}
	capture := checkout.CaptureAutomatic
	switch f.Kind {
	case payment.KindSale:
	case payment.KindAuthorization:
		capture = checkout.CaptureManual
	default:
		return req, "kind", fault.Invalid("kind", "Choose a sale or an authorization.")
	}
	cur, ok := money.Lookup(f.Currency)
	if !ok || !m.Accepts(cur.Code) {
		return req, "currency", fault.Invalid("currency", "Choose one of your account's currencies.")
	}
	amount, err := money.Parse(f.Amount, cur)
	if err != nil || amount <= 0 {
		return req, "amount", fault.Invalid("amount", "Enter the amount as a positive number in %s, such as %s.", cur.Code,
			money.Format(1250*pow10(cur.Digits)/100, cur))
	}
	if utf8.RuneCountInString(f.OrderID) > maxOrderID {
		return req, "order_id", fault.Invalid("order_id", "The order id may be at most %d characters.", maxOrderID)
	}
	code := strings.ToLower(cur.Code)
	body := checkout.IntentBody{Amount: &amount, Currency: &code, CaptureMethod: &capture, ReceiptEmail: &f.Email}
	if f.OrderID != "" {
		description := "Order " + f.OrderID
		body.Description, body.Metadata = &description, map[string]string{"order_id": f.OrderID}
	}
	if req.Intent, err = body.Params(m); err != nil {
		var fe *fault.Error
		errors.As(err, &fe)
		return req, map[string]string{"amount": "amount", "receipt_email": "email", "currency": "currency"}[fe.Field], err
	}
	req.OrderID = f.OrderID
	switch f.Save {
	case "":
	case "new":
		// "Save the card to a new customer": the customer the vault creates once the payment is
		// approved, with the receipt's e-mail, which the vault requires of every customer.
		d, err := vault.ParseDetails(map[string]string{"email": f.Email, "first_name": f.FirstName, "last_name": f.LastName})
		if err != nil {
			var fe *fault.Error
			errors.As(err, &fe)
			return req, map[string]string{"email": "email", "first_name": "first_name", "last_name": "last_name"}[fe.Field],
				fault.Invalid(fe.Field, "To save the card to a new customer: %s.", strings.TrimSuffix(fe.Message, "."))
		}
		req.SaveTo = &vault.SaveTo{New: &d}
	case "existing":
		// Refused before the customer is looked up: the answer is the same whoever is named.
		if role := signedIn(r).Role; !isManager(role) {
			return req, "save", fault.New(http.StatusForbidden, "forbidden",
				"Your role (%s) may save the card only to a new customer.", role.Label())
		}
		if f.MakeDefault != "" && f.MakeDefault != "yes" {
			return req, "make_default", fault.Invalid("make_default", "Tick the box to make the card the default, or leave it empty.")
		}
		if f.Customer == "" {
			return req, "customer", fault.Invalid("customer", "Enter the customer's id or e-mail to save the card to.")
		}
		c, err := h.cfg.Vault.FindCustomer(r.Context(), m.ID, f.Customer)
		if err != nil {
			return req, "customer", err
		}
		req.SaveTo = &vault.SaveTo{CustomerID: c.LookupID, Default: f.MakeDefault == "yes"}
	default:
		return req, "save", fault.Invalid("save", "Choose whether to save the card.")
	}
	return req, "", nil
}

// pow10 is 10 to the power n.
func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// summary says what the card form is about to do.
func summary(f terminalForm, req hostedpage.DashboardRequest, lang language.Tag) string {
	what := "Sale"
	if f.Kind == payment.KindAuthorization {
		what = "Authorization"
	}
	s := what + " of " + money.Display(req.Intent.Amount, req.Intent.Currency, lang) + ", mail or telephone order"
	if f.OrderID != "" {
		s += ", order " + f.OrderID
	}
	return s + "."
}

// dashboardWho is who the hosted-page session of the signed-in user of r acts as: the merchant, the
// user's client id (the ledger records it: sales staff see their own payments) and velocity principal.
func (h *Handler) dashboardWho(r *http.Request, m merchant.Merchant) checkout.Who {
	p := h.payer(r, m)
	return checkout.Who{Merchant: m, ClientID: p.ClientID, RequestID: p.RequestID, Principal: p.Principal}
}

// terminalResult serves the end of a terminal session: where the iframe's result message sends the
// page, and the link to follow without script. An approved payment lands on its transaction, unless
// the card was to be saved, which the page says (with the customer); anything else is said here.
// Sales staff open only their own sessions; another's is not found.
func (h *Handler) terminalResult(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	ss, in, err := h.cfg.HostedPages.DashboardSession(r.Context(), sess.MerchantID, r.PathValue("session_id"))
	var fe *fault.Error
	switch {
	case errors.As(err, &fe) && fe.Status == http.StatusNotFound, err == nil && sess.Role == user.Sales && ss.ClientID != clientOf(sess.UserID):
		h.render(w, r, http.StatusNotFound, "message", view{Title: "Not found", Error: "There is no such terminal payment."})
		return
	case err != nil:
		h.fail(w, r, err)
		return
	case ss.Purpose == hostedpage.PurposeSaveCard:
		http.Redirect(w, r, customerPath(ss.Dashboard.SaveTo.CustomerID), http.StatusSeeOther)
		return
	}
	approved := in.Status == checkout.StatusSucceeded || in.Status == checkout.StatusRequiresCapture
	if approved && ss.Dashboard.SaveTo == nil {
		http.Redirect(w, r, "/dashboard/transactions/"+url.PathEscape(in.LatestCharge), http.StatusSeeOther)
		return
	}
	v := terminalResultView{TransactionID: in.LatestCharge, Saved: ss.Dashboard.Saved}
	switch {
	case approved:
		v.Outcome = "The payment was approved."
	case in.Status == checkout.StatusCanceled:
		v.Outcome, v.TransactionID = "The payment was canceled: nothing was charged.", ""
	case in.LastError != nil:
		v.Outcome = "The payment was declined: " + in.LastError.Message
	case ss.Outcome == "" && !ss.ExpiresAt.Before(h.cfg.Now()):
		v.Outcome = "The payment is not finished: the card form is still open in the page you came from."
	default:
		v.Outcome = "The card form expired before a payment was made: nothing was charged."
	}
	h.render(w, r, http.StatusOK, "terminalresult", view{Title: "Terminal: result", Data: v})
}

// customerPath is a customer's page in the Customers section.
func customerPath(lookupID string) string { return "/dashboard/customers/" + url.PathEscape(lookupID) }

// newCard serves the card form that adds a card to a customer, the hosted card form in an iframe:
// a save-only session of the hosted page, which stores
// the card on the customer with the vault's rules, then back to the customer. Another merchant's
// customer is not found.
func (h *Handler) newCard(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	c, err := h.cfg.Vault.Get(r.Context(), m.ID, r.PathValue("customer_id"))
	var fe *fault.Error
	if errors.As(err, &fe) && fe.Status == http.StatusNotFound {
		h.render(w, r, http.StatusNotFound, "message", view{Title: "Not found", Error: "There is no such customer."})
		return
	}
	var page string
	if err == nil {
		_, page, err = h.cfg.HostedPages.CreateForDashboard(r.Context(), h.dashboardWho(r, m),
			hostedpage.DashboardRequest{Purpose: hostedpage.PurposeSaveCard, Dashboard: hostedpage.Dashboard{SaveTo: &vault.SaveTo{CustomerID: c.LookupID}}})
	}
	if errors.As(err, &fe) {
		h.render(w, r, fe.Status, "message", view{Title: "Add a card", Error: fe.Message})
		return
	} else if err != nil {
		h.fail(w, r, err)
		return
	}
	who := c.Email
	if name := strings.TrimSpace(c.FirstName + " " + c.LastName); name != "" {
		who = name + " (" + c.Email + ")"
	}
	h.render(w, r, http.StatusOK, "cardframe", view{Title: "Add a card", Data: cardFrameView{Frame: page, Done: customerPath(c.LookupID),
		DoneIs: "Back to the customer", Summary: "A card for " + who + ", stored without a payment."}})
}

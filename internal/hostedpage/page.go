package hostedpage

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
	"github.com/kassapay/kassa/web"
)

// result is what the page's endpoints answer, and what the page puts in its "result" message:
// outcome, payment_intent (may be absent), attempts, last_error. Besides the spec's outcomes, the
// endpoints answer "requires_action" (show the issuer's challenge) and "failed" (declined: the form
// stays open for another try).
type result struct {
	Outcome       string               `json:"outcome"`
	PaymentIntent *checkout.WireIntent `json:"payment_intent,omitempty"`
	Attempts      []Attempt            `json:"attempts"`
	LastError     *LastError           `json:"last_error"`
}

// pageConfig is the state the page's script starts from (web/hosted-page.js).
type pageConfig struct {
	State        string     `json:"state"`         // open, requires_action, expired, error, completed, canceled
	ParentOrigin string     `json:"parent_origin"` // where messages go; "" for nowhere
	ExpiresIn    int64      `json:"expires_in"`    // milliseconds left, by the server's clock
	Prefill      prefill    `json:"prefill"`
	Endpoints    endpoints  `json:"endpoints"`
	Result       *result    `json:"result,omitempty"`
	Error        *LastError `json:"error,omitempty"`
	// Receipt: once paid, the page's server-rendered state shows the payment's receipt, so a page
	// opened on its own (not framed: there the shop's page takes over) loads again to show it.
	Receipt bool `json:"receipt,omitempty"`
}

type prefill struct {
	Name       string `json:"name,omitempty"`
	PostalCode string `json:"postal_code,omitempty"`
}

type endpoints struct {
	Pay       string `json:"pay"`
	Challenge string `json:"challenge"`
	Cancel    string `json:"cancel"`
}

// pageData is what the template renders.
type pageData struct {
	Nonce    string
	State    string
	Merchant string
	Amount   string
	Save     bool // the form stores a card without a payment (PurposeSaveCard)
	// Invoice is the invoice the page pays (PurposeInvoice), nil for others.
	Invoice *Invoice
	// ReturnURL is the link back to the shop that the page shows, when opened on its own, once
	// checkout ends ("" for none); Appearance its colours (AppearanceLight, AppearanceDark, or
	// AppearanceAuto and "" for the system's).
	ReturnURL  string
	Appearance string
	// Test: the page's payment moves no money (payment.Ledger.Test): the session's charge's
	// test_mode once it has one, else whether the merchant's new payments go to a test account.
	// The page then says "Test mode" above the form.
	Test bool
	// Brand is the merchant's logo and accent colour (Settings → Branding): the logo above the
	// merchant's name, the accent the light appearance's --accent (the dark one keeps Kassa's, which
	// reads on its dark background). Only the nonce'd <style> carries it: the CSP allows no style
	// attribute.
	Brand branding.Branding
	// Receipt is the receipt of the session's completed payment (billing.Receipt.ForPage), nil
	// while it is not paid, for a session that stores a card, and when its charge cannot be read.
	Receipt *billing.Receipt
	Error   *LastError
	Config  pageConfig
	Script  string
}

// handlePage serves the page at a session's URL. The parent's origin is learned from the referrer,
// which the iframe's referrerpolicy="origin" makes the parent's exact origin; it must be an origin
// the merchant allows to embed the page, or the page posts no message at all.
func (s *Service) handlePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tok := r.PathValue("token")
	var ss Session
	var m merchant.Merchant
	var brand branding.Branding
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		if ss, err = s.byToken(ctx, q, tok); err != nil {
			return err
		}
		brand, err = branding.Get(ctx, q, ss.MerchantID)
		return err
	})
	if err == nil {
		m, err = s.merchants.Get(ctx, ss.MerchantID)
	}
	var in checkout.Intent
	if err == nil && ss.Purpose != PurposeSaveCard {
		in, err = s.checkout.Get(ctx, s.who(r, m, ss), ss.IntentID)
	}
	if err != nil {
		status, e := http.StatusInternalServerError, &LastError{Code: "session_unavailable", Message: "The payment page could not be loaded. Try again."}
		if errors.Is(err, errNoSession) {
			status, e = http.StatusNotFound, &LastError{Code: "session_not_found", Message: "This payment page does not exist."}
		} else {
			httpapi.Logger(ctx).ErrorContext(ctx, "hosted page", "err", err)
		}
		// The page of no session holds nothing to protect: any page may frame it, to be told.
		s.render(w, r, status, "*", pageData{State: "error", Error: e,
			Config: pageConfig{State: "error", ParentOrigin: parentOrigin(r, merchant.Settings{}), Error: e}})
		return
	}
	if ss.Outcome == "" {
		// The payment ended elsewhere, or its outcome was not recorded here (a crash between the
		// two): the intent says how the session ended.
		switch in.Status {
		case checkout.StatusSucceeded, checkout.StatusRequiresCapture:
			var then func(context.Context, *store.Tx) error
			if then, err = s.completion(ctx, ss, m, in); err == nil {
				ss, err = s.record(ctx, ss, in, nil, "completed", then)
			}
		case checkout.StatusCanceled:
			ss, err = s.record(ctx, ss, in, nil, "canceled", nil)
		}
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
	}
	now := s.now()
	base := "/hpp/" + url.PathEscape(tok)
	cfg := pageConfig{ParentOrigin: ss.parentOrigin(r, m), ExpiresIn: ss.ExpiresAt.Sub(now).Milliseconds(), Receipt: ss.Purpose != PurposeSaveCard,
		Prefill:   prefill{Name: ss.Billing.Name, PostalCode: ss.Billing.Address.Zip},
		Endpoints: endpoints{Pay: base + "/pay", Challenge: base + "/challenge", Cancel: base + "/cancel"}}
	switch {
	case ss.Outcome != "":
		cfg.State = ss.Outcome
		r := resultOf(ss, in, ss.Outcome)
		cfg.Result = &r
	case ss.expired(now):
		cfg.State = "expired"
	case in.Status == checkout.StatusRequiresAction:
		cfg.State = "requires_action"
	default:
		cfg.State = "open"
	}
	d := pageData{State: cfg.State, Merchant: m.Name, Save: ss.Purpose == PurposeSaveCard, ReturnURL: ss.ReturnURL,
		Appearance: ss.Appearance, Config: cfg, Invoice: ss.Dashboard.Invoice, Brand: brand, Test: s.ledger.Test(ctx, m.ID, in.LatestCharge)}
	if !d.Save {
		d.Amount = money.Display(in.Amount, in.Currency, m.Language())
		if ss.Outcome == "completed" {
			d.Receipt = s.receipt(ctx, ss, m, in, now)
		}
	}
	s.render(w, r, http.StatusOK, ss.frameAncestors(m), d)
}

// receipt is the receipt the page of ss, whose payment completed on in, shows at now. The page's URL
// is its credential, so the receipt shows only what the customer who paid may see again: the card's
// brand and last four digits, and those and the receipt's address only within billing.ReceiptWindow
// of the payment. "A receipt was sent" is said only of the sessions whose completion sends one: the
// virtual terminal's (completion) and an invoice's (its paid hook), both to the intent's receipt
// e-mail. Nil when the charge cannot be read: the page then says only that the payment is complete.
func (s *Service) receipt(ctx context.Context, ss Session, m merchant.Merchant, in checkout.Intent, now time.Time) *billing.Receipt {
	if in.LatestCharge == "" {
		return nil
	}
	t, err := s.ledger.Get(ctx, m.ID, in.LatestCharge)
	if err != nil {
		httpapi.Logger(ctx).ErrorContext(ctx, "hosted page: read the charge for the receipt", "session", ss.SessionID, "err", err)
		return nil
	}
	sentTo := ""
	if ss.Purpose == PurposeTerminal || ss.Purpose == PurposeInvoice {
		sentTo = in.ReceiptEmail
	}
	r := billing.ReceiptOf(m, t, in.Description, t.CreatedAt, m.Location()).ForPage(t.CreatedAt, now, sentTo)
	return &r
}

// render writes the page with its Content-Security-Policy: scripts only from Kassa, styles only by
// this response's nonce, requests only to Kassa, and frame-ancestors the origins that may embed it.
func (s *Service) render(w http.ResponseWriter, r *http.Request, status int, ancestors string, d pageData) {
	d.Nonce, d.Script = rand.Text(), web.HostedPage.Path()
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'nonce-"+d.Nonce+
		"'; connect-src 'self'; img-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors "+ancestors)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := web.HostedPageTemplate.Execute(w, d); err != nil {
		httpapi.Logger(r.Context()).ErrorContext(r.Context(), "render the hosted page", "err", err)
	}
}

// parentOrigin is the origin of the page that embeds this one, from the referrer, when the merchant
// allows it to embed the page; "" otherwise.
func parentOrigin(r *http.Request, m merchant.Settings) string {
	u, err := url.Parse(r.Referer())
	if err != nil || u.Host == "" {
		return ""
	}
	origin := u.Scheme + "://" + u.Host
	if !m.MayEmbed(origin) {
		return ""
	}
	return origin
}

// who is who the page acts as on the payments core: the session's merchant, named by the session.
// Its payments' declines count against the API key that created the session, as the key's own do:
// a shop's page tested with stolen cards throttles that shop's key, as its server would be.
//
// A dashboard's session acts as the staff member who created it: the ledger records their client id,
// and the declines count against them.
func (s *Service) who(r *http.Request, m merchant.Merchant, ss Session) checkout.Who {
	who := checkout.Who{Merchant: m, ClientID: ss.SessionID, RequestID: httpapi.RequestID(r.Context())}
	if ss.Purpose != "" {
		who.ClientID, who.Principal = ss.ClientID, ss.principal(m)
	} else if ss.ClientID != "" {
		who.Principal = checkout.KeyPrincipal(m.AccountID(), ss.ClientID)
	}
	return who
}

// resultOf is the result of a session whose intent stands as in. The payment intent is shown once
// the customer has tried to pay ("payment_intent may be present when an earlier attempt failed"); a
// session that stores a card has none.
func resultOf(ss Session, in checkout.Intent, outcome string) result {
	out := result{Outcome: outcome, Attempts: ss.Attempts, LastError: ss.LatestError()}
	if ss.IntentID != "" && (len(ss.Attempts) > 0 || outcome == "completed") {
		wi := in.Wire()
		out.PaymentIntent = &wi
	}
	return out
}

// act runs one of the page's actions on the session of the URL's secret, records what it did to the
// payment, and answers with the result.
//
// A payment (pay, or the challenge that completes one) sent again to a session it already completed —
// the page's retry after its first answer was lost with a node that died, a double submission — is
// answered with that completed result, and nothing is charged: the session is the payment's key
// (answered "session_ended" instead, such a retry would read as if the payment had failed). Any other
// action on an ended session is a 409.
func (s *Service) act(w http.ResponseWriter, r *http.Request, payment bool, do func(ctx context.Context, ss Session, who checkout.Who, body []byte) (checkout.Intent, error)) {
	ctx := r.Context()
	var ss Session
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		ss, err = s.byToken(ctx, q, r.PathValue("token"))
		return err
	})
	switch {
	case errors.Is(err, errNoSession):
		httpapi.WriteError(w, r, fault.NotFound("This payment page does not exist."))
		return
	case err != nil:
		httpapi.WriteError(w, r, err)
		return
	case ss.Outcome == "completed" && payment:
		s.answerCompleted(w, r, ss)
		return
	case ss.Outcome != "":
		httpapi.WriteError(w, r, fault.Conflict("session_ended", "This payment page has ended (%s).", ss.Outcome))
		return
	case ss.expired(s.now()):
		httpapi.WriteError(w, r, fault.New(http.StatusGone, "session_expired", "This payment page has expired."))
		return
	}
	m, err := s.merchants.Get(ctx, ss.MerchantID)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		httpapi.WriteError(w, r, httpapi.BodyError(err))
		return
	}
	in, err := do(ctx, ss, s.who(r, m, ss), body)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if in.Limit != nil {
		httpapi.WriteRateLimit(w.Header(), in.Limit)
	}
	var attempt *Attempt
	outcome := ""
	at := s.now().Unix()
	var then func(context.Context, *store.Tx) error
	switch in.Status {
	case checkout.StatusSucceeded, checkout.StatusRequiresCapture:
		attempt, outcome = &Attempt{CreatedAt: at, Status: in.Status}, "completed"
		if then, err = s.completion(ctx, ss, m, in); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
	case checkout.StatusRequiresPaymentMethod:
		e := &LastError{Code: "card_declined", Message: "The payment was declined."}
		if in.LastError != nil {
			e = &LastError{Code: in.LastError.Code, Message: in.LastError.Message}
		}
		attempt = &Attempt{CreatedAt: at, Status: "failed", Error: e}
	case checkout.StatusCanceled:
		outcome = "canceled"
	case checkout.StatusRequiresAction:
	default:
		httpapi.WriteError(w, r, fault.Busy("operation_in_progress", "The payment is still being processed; try again shortly."))
		return
	}
	if ss, err = s.record(ctx, ss, in, attempt, outcome, then); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	answer := outcome
	switch {
	case in.Status == checkout.StatusRequiresAction:
		answer = "requires_action"
	case answer == "":
		answer = "failed"
	}
	httpapi.WriteJSON(w, http.StatusOK, resultOf(ss, in, answer))
}

// answerCompleted answers with the result of the session ss, which a payment completed.
func (s *Service) answerCompleted(w http.ResponseWriter, r *http.Request, ss Session) {
	ctx := r.Context()
	m, err := s.merchants.Get(ctx, ss.MerchantID)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var in checkout.Intent
	if ss.IntentID != "" {
		if in, err = s.checkout.Get(ctx, s.who(r, m, ss), ss.IntentID); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, resultOf(ss, in, "completed"))
}

// MaxAttempts bounds the tries of one session, so that its URL cannot serve to test stolen cards.
const MaxAttempts = 10

// handlePay serves the card form's submission: the body is a payment method as POST
// /v1/payment-methods takes it, read and validated the same way. The card pays the session's intent
// at once; its CVC goes to the processor in memory and is never stored.
//
// A virtual-terminal session's payment is a mail or telephone order, with no 3-D Secure challenge
// (the cardholder is not there), and once approved its card is stored on the customer the dashboard
// named, if it named one. A save-only session stores the card on its customer, with no payment: the
// vault verifies no card it stores (the customer service's API does not either), so neither does it.
func (s *Service) handlePay(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, true, func(ctx context.Context, ss Session, who checkout.Who, body []byte) (checkout.Intent, error) {
		if len(ss.Attempts) >= MaxAttempts {
			return checkout.Intent{}, fault.New(http.StatusTooManyRequests, "too_many_attempts",
				"This payment page has had %d tries; start the checkout again.", MaxAttempts)
		}
		if err := s.checkout.Throttled(who, ss.IntentID); err != nil {
			return checkout.Intent{}, err // refused before the card is even stored
		}
		nm, err := vault.ParseMethodRequest(body, s.now())
		if err != nil {
			return checkout.Intent{}, err
		}
		if ss.Purpose != PurposeSaveCard {
			// The intent may be settled while the session is not: a payment whose answer was lost
			// when the node stopped between the charge and the session's record (the page, or a
			// client, then posts again), or an invoice's intent, which every session of the invoice
			// pays, paid through another session or the API. Answer with what settled, and let act
			// record the session's completion; charge nothing.
			in, err := s.checkout.Get(ctx, who, ss.IntentID)
			if err != nil {
				return in, err
			}
			switch in.Status {
			case checkout.StatusSucceeded, checkout.StatusRequiresCapture, checkout.StatusCanceled:
				return in, nil
			}
		}
		if ss.Purpose == PurposeSaveCard {
			if err := s.save(ctx, ss, nm); err != nil {
				return checkout.Intent{}, err
			}
			return checkout.Intent{Status: checkout.StatusSucceeded}, nil
		}
		b, a := &nm.Billing, ss.Billing.Address
		if b.City == "" && b.State == "" && b.Country == "" {
			b.City, b.State, b.Country = a.City, a.State, a.Country
		}
		pm, err := s.vault.CreateMethod(ctx, who.Merchant.ID, ss.SessionID, nm)
		if err != nil {
			return checkout.Intent{}, err
		}
		p := checkout.ConfirmParams{PaymentMethod: pm.ID, CVC: nm.CVC, Source: payment.SourceHPP, Interactive: true}
		switch {
		case ss.Purpose == PurposeTerminal:
			p.Interactive, p.MailOrder, p.OrderID = false, true, ss.Dashboard.OrderID
		case ss.Purpose == PurposeInvoice && ss.Dashboard.Invoice != nil:
			p.OrderID = ss.Dashboard.Invoice.Number // the cardholder is here: 3-D Secure as for a shop
		}
		in, err := s.checkout.Confirm(ctx, who, ss.IntentID, p)
		if err == nil && (in.Status == checkout.StatusSucceeded || in.Status == checkout.StatusRequiresCapture) {
			if err := s.save(ctx, ss, nm); err != nil {
				// The payment stands; only the result page's word on the card is missing.
				httpapi.Logger(ctx).ErrorContext(ctx, "hosted page: record the stored card", "session", ss.SessionID, "err", err)
			}
		}
		return in, err
	})
}

// handleChallenge serves the simulated issuer's challenge: {"result": "complete" | "fail"}.
func (s *Service) handleChallenge(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, true, func(ctx context.Context, ss Session, who checkout.Who, body []byte) (checkout.Intent, error) {
		var b struct {
			Result *string `json:"result"`
		}
		if err := httpapi.UnmarshalStrict(body, &b, ""); err != nil {
			return checkout.Intent{}, err
		}
		if b.Result == nil || (*b.Result != "complete" && *b.Result != "fail") {
			return checkout.Intent{}, fault.Invalid("result", "result must be complete or fail")
		}
		return s.checkout.CompleteChallenge(ctx, who, ss.IntentID, *b.Result == "complete", payment.SourceHPP)
	})
}

// handleCancel serves the cancel button: the customer leaves, and the intent is canceled as
// abandoned.
func (s *Service) handleCancel(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, false, func(ctx context.Context, ss Session, who checkout.Who, _ []byte) (checkout.Intent, error) {
		if ss.Purpose == PurposeSaveCard {
			return checkout.Intent{Status: checkout.StatusCanceled}, nil // nothing to cancel but the form
		}
		return s.checkout.Cancel(ctx, who, ss.IntentID, "abandoned")
	})
}

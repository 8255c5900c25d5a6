package hostedpage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
	"github.com/kassapay/kassa/internal/velocity"
)

// The dashboard's sessions: the card form the merchant's own staff fill in, in an iframe
// of a dashboard page, so that the dashboard never sees a card number. The dashboard creates them in
// process for the signed-in user (no API key); the page is the same page, with three differences:
// only Kassa's own pages may frame it (frame-ancestors 'self', not the merchant's shop), what it pays
// and how depends on the purpose, and its payments are recorded as the user's (the client id and
// velocity principal the dashboard gives).

// Purposes of the dashboard's sessions (Session.Purpose).
const (
	// PurposeTerminal is a virtual-terminal payment: a mail or telephone order, without 3-D Secure,
	// with the merchant's order id, a receipt to the customer's e-mail, and the card stored on a
	// customer after an approval when the dashboard asks.
	PurposeTerminal = "terminal"
	// PurposeSaveCard stores a card on a customer, with no payment: the session has no intent.
	PurposeSaveCard = "save_card"
	// PurposeInvoice pays an invoice of the invoice service: the invoice's page creates it in
	// process, on the invoice's one live intent, and the page shows the invoice.
	PurposeInvoice = "invoice"
)

// Dashboard is what the dashboard asked of one of its sessions, and what became of storing its card.
type Dashboard struct {
	// Credential is the velocity principal's credential of the staff member who created the
	// session: the payments' declines count against it.
	Credential string `json:"credential"`
	// OrderID is the merchant's order id, recorded on the ledger's transaction.
	OrderID string `json:"order_id,omitempty"`
	// SaveTo is the customer to store the card on (for a terminal payment: once approved); nil for none.
	SaveTo *vault.SaveTo `json:"save_to,omitempty"`
	// Saved is what became of storing the card; nil until tried.
	Saved *Saved `json:"saved,omitempty"`
	// Invoice is the invoice a PurposeInvoice session pays, as its page shows it; nil for others.
	Invoice *Invoice `json:"invoice,omitempty"`
}

// Invoice is an invoice as the page of the session that pays it shows it: formatted when the session
// is created, from the invoice whose total is the session's intent's amount.
type Invoice struct {
	LookupID string        `json:"lookup_id"`
	Number   string        `json:"number"`
	Lines    []InvoiceLine `json:"lines"`
	Totals   [][2]string   `json:"totals"` // label and amount: subtotal, tax, discount, shipping, total
	Due      string        `json:"due,omitempty"`
}

// InvoiceLine is a line of an Invoice, formatted.
type InvoiceLine struct {
	Description string `json:"description"`
	Quantity    string `json:"quantity"`
	Amount      string `json:"amount"`
}

// NewInvoiceSession stores in tx a session that pays the invoice inv through its intent in (created by
// the invoice service, which keeps one live intent per invoice), whose page URL's secret is
// secret(its session id), and returns it; its page is at PagePath(that secret). Only the secret's
// hash is stored: the invoice service derives the secret from the invoice's own key, so that the
// invoice's page can hand the same session out again (Serves) without a URL kept anywhere. The
// intent's claim lets one charge run at a time, and once it succeeded every session of it answers
// that it is paid. Its declines count against the invoice (the velocity principal
// invoice/<lookup_id>) as well as against the intent.
func (s *Service) NewInvoiceSession(ctx context.Context, tx *store.Tx, m merchant.Merchant, in checkout.Intent, inv Invoice,
	secret func(sessionID string) string) (Session, error) {
	who := checkout.Who{Merchant: m, RequestID: httpapi.RequestID(ctx)}
	return s.insert(ctx, tx, who, in, shopPage{}, PurposeInvoice, Dashboard{Credential: "invoice/" + inv.LookupID, Invoice: &inv}, secret)
}

// InvoiceSession reads, through q, the invoice session sessionID of the merchant; another merchant's,
// or a session of another purpose, is sql.ErrNoRows.
func InvoiceSession(ctx context.Context, q store.Querier, merchantID, sessionID string) (Session, error) {
	return scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM checkout_sessions
		WHERE session_id = $1 AND merchant_id = $2 AND purpose = $3`, sessionID, merchantID, PurposeInvoice))
}

// ReuseMargin is how long an invoice session must still have to live to be handed out again: a
// customer sent to the form has at least this long to fill it in.
const ReuseMargin = 15 * time.Minute

// Serves reports whether ss, an invoice session, may be handed out again at now as the form that pays
// the invoice shown as inv through the intent intentID: it has not ended (no outcome), has tries
// left, lives for ReuseMargin yet, pays that intent, and shows the invoice as it stands. A session
// that does not is left to expire, and a new one takes its place.
func (ss Session) Serves(intentID string, inv Invoice, now time.Time) bool {
	if ss.Purpose != PurposeInvoice || ss.Outcome != "" || len(ss.Attempts) >= MaxAttempts || ss.IntentID != intentID ||
		!now.Add(ReuseMargin).Before(ss.ExpiresAt) || ss.Dashboard.Invoice == nil {
		return false
	}
	shown, _ := json.Marshal(ss.Dashboard.Invoice)
	want, _ := json.Marshal(inv)
	return string(shown) == string(want)
}

// createOwn creates a session of the dashboard's and returns it with its page's path, for a frame on
// Kassa's own origin.
func (s *Service) createOwn(ctx context.Context, who checkout.Who, in checkout.Intent, purpose string, d Dashboard) (Session, string, error) {
	ss, page, err := s.create(ctx, who, in, shopPage{}, purpose, d)
	if err != nil {
		return Session{}, "", err
	}
	u, err := url.Parse(page)
	if err != nil {
		return Session{}, "", err
	}
	return ss, u.Path, nil
}

// Saved is the outcome of storing a session's card on a customer.
type Saved struct {
	CustomerID string `json:"customer_id,omitempty"`
	CardID     string `json:"card_id,omitempty"`
	// Error is why the card was not stored (such as "This card is already stored for this customer.").
	Error string `json:"error,omitempty"`
}

// DashboardRequest is a session the dashboard asks for.
type DashboardRequest struct {
	Purpose string
	// Intent is the payment of a PurposeTerminal session, validated by the intent's own rules
	// (checkout.IntentBody.Params).
	Intent checkout.IntentParams
	Dashboard
}

// CreateForDashboard creates a session of the dashboard for who: the merchant, the staff member's
// client id (recorded on the intent and the ledger's transactions) and velocity principal (which the
// sessions created, then the payments' declines, count against). It returns the session and the
// page's path (/hpp/…, for an iframe on Kassa's own origin).
func (s *Service) CreateForDashboard(ctx context.Context, who checkout.Who, req DashboardRequest) (Session, string, error) {
	if req.Purpose != PurposeTerminal && req.Purpose != PurposeSaveCard {
		return Session{}, "", errors.New("hostedpage: unknown purpose " + req.Purpose)
	}
	// Each session's URL is 10 tries at a card, so the sessions are counted, as the API's are.
	if err := s.velocity.Take(ctx, velocity.Sessions(who.Principal), who.Merchant.Velocity); err != nil {
		return Session{}, "", err
	}
	var in checkout.Intent
	if req.Purpose == PurposeTerminal {
		var err error
		if in, err = s.checkout.Create(ctx, who, req.Intent); err != nil {
			return Session{}, "", err
		}
	}
	req.Dashboard.Credential, req.Dashboard.Saved = who.Principal.Credential, nil
	return s.createOwn(ctx, who, in, req.Purpose, req.Dashboard)
}

// DashboardSession reads one of the merchant's dashboard sessions and its intent (none for
// PurposeSaveCard). Another merchant's session, and a shop's, are not found.
func (s *Service) DashboardSession(ctx context.Context, merchantID, sessionID string) (Session, checkout.Intent, error) {
	var ss Session
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		ss, err = scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM checkout_sessions
			WHERE merchant_id = $1 AND session_id = $2 AND purpose IS NOT NULL`, merchantID, sessionID))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, checkout.Intent{}, fault.NotFound("No session %s.", sessionID)
	}
	if err != nil || ss.IntentID == "" {
		return ss, checkout.Intent{}, err
	}
	m, err := s.merchants.Get(ctx, merchantID)
	if err != nil {
		return Session{}, checkout.Intent{}, err
	}
	in, err := s.checkout.Get(ctx, checkout.Who{Merchant: m, ClientID: ss.ClientID}, ss.IntentID)
	return ss, in, err
}

// frameAncestors is who may frame the page of ss: the merchant's shop for a shop's session, only
// Kassa's own pages for the dashboard's.
func (ss Session) frameAncestors(m merchant.Merchant) string {
	if ss.Purpose != "" {
		return "'self'"
	}
	return m.FrameAncestors()
}

// parentOrigin is the origin of the page that embeds the page of ss, from the referrer, when it may
// embed it; "" otherwise. The dashboard's sessions are framed only by Kassa's own pages
// (frame-ancestors 'self'), whose host is the one this page was asked for.
func (ss Session) parentOrigin(r *http.Request, m merchant.Merchant) string {
	if ss.Purpose == "" {
		return parentOrigin(r, m.Settings)
	}
	u, err := url.Parse(r.Referer())
	if err != nil || u.Host == "" || u.Host != r.Host {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// save stores the card nm of the session ss on the customer the dashboard named, and records what
// became of it on the session. A card that cannot be stored (already stored for the customer) is an
// error for the save-only form, whose user may then try another card; after a terminal payment,
// which is approved whatever becomes of its card, it is recorded for the result page to say.
func (s *Service) save(ctx context.Context, ss Session, nm vault.NewMethod) error {
	to := ss.Dashboard.SaveTo
	if to == nil {
		return nil
	}
	c, cd, err := s.vault.SaveCard(ctx, ss.MerchantID, *to, nm.Number, nm.Expiry)
	switch {
	case err == nil:
		return s.recordSaved(ctx, ss, &Saved{CustomerID: c.LookupID, CardID: cd.LookupID})
	case ss.Purpose != PurposeTerminal:
		return err
	}
	why := "The card could not be stored."
	var f *fault.Error
	if errors.As(err, &f) {
		why = f.Message
	} else {
		s.log.ErrorContext(ctx, "hosted page: store the card of a terminal payment", "session", ss.SessionID, "err", err)
	}
	return s.recordSaved(ctx, ss, &Saved{CustomerID: to.CustomerID, Error: why})
}

// recordSaved records what became of storing the card of ss. Only this writes a session's dashboard
// column after its creation.
func (s *Service) recordSaved(ctx context.Context, ss Session, saved *Saved) error {
	ctx = context.WithoutCancel(ctx) // the card is stored: say so
	d := ss.Dashboard
	d.Saved = saved
	raw, _ := json.Marshal(d)
	_, err := s.db.Exec(ctx, `UPDATE checkout_sessions SET dashboard = $2 WHERE id = $1`, ss.ID, string(raw))
	return err
}

// completion is what completing the terminal session ss, whose intent stands as in, does in the
// transaction that records it: the receipt of the payment to the intent's receipt e-mail, in the
// outbox (billing.QueueReceipt), so that it is sent once the payment is approved, and once. Nil for
// other sessions and without an e-mail.
func (s *Service) completion(ctx context.Context, ss Session, m merchant.Merchant, in checkout.Intent) (func(context.Context, *store.Tx) error, error) {
	if ss.Purpose != PurposeTerminal || in.ReceiptEmail == "" || in.LatestCharge == "" {
		return nil, nil
	}
	t, err := s.ledger.Get(ctx, m.ID, in.LatestCharge)
	if err != nil {
		return nil, err
	}
	description := in.Description
	return func(ctx context.Context, tx *store.Tx) error {
		now := s.now()
		brand, err := branding.Get(ctx, tx, m.ID)
		if err != nil {
			return err
		}
		return billing.QueueReceipt(ctx, tx, m.ID, in.ReceiptEmail, nil,
			billing.ReceiptOf(m, t, description, now, m.Location()).Branded(brand, s.base), now)
	}, nil
}

// principal is the velocity principal of the dashboard's session ss: its staff member's.
func (ss Session) principal(m merchant.Merchant) httpapi.Principal {
	return httpapi.Principal{Account: m.AccountID(), Credential: ss.Dashboard.Credential}
}

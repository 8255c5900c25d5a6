// Package hostedpage is the hosted payment page (hosted-payment-page-api.md): a shop's server creates
// a session — a payment intent and the secret URL of a card form that pays it — and the shop's page
// embeds that URL in an iframe. The form collects the card, pays through the payment intents of package
// checkout, shows a simulated 3-D Secure challenge when the card asks for one, and reports to the
// parent page with window.postMessage: "resize" as its height changes, and one "result" at every end
// (completed, canceled, expired, error).
//
// The URL is the page's only credential: 256 random bits, of which only a hash is stored, valid for an
// hour. The page sets no cookie.
package hostedpage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
	"github.com/kassapay/kassa/internal/velocity"
)

// Lifetime is how long a session's URL works: "Iframe source; expires 1 hour after creation".
const Lifetime = time.Hour

// Config configures a Service.
type Config struct {
	DB        *store.DB
	Checkout  *checkout.Service
	Vault     *vault.Service
	Merchants *merchant.Cache
	// PublicURL is the base of the page URLs handed out, e.g. https://pay.example.com.
	PublicURL string
	Logger    *slog.Logger
	Now       func() time.Time
	// Velocity limits the sessions each API key creates (required).
	Velocity *velocity.Limiter
	// Ledger reads the transaction of a virtual-terminal payment, for its receipt.
	Ledger *payment.Ledger
}

// Service serves hosted-page sessions and the page.
type Service struct {
	db        *store.DB
	checkout  *checkout.Service
	vault     *vault.Service
	merchants *merchant.Cache
	base      string
	log       *slog.Logger
	now       func() time.Time
	csrf      *http.CrossOriginProtection
	velocity  *velocity.Limiter
	ledger    *payment.Ledger
}

// New returns the service.
func New(cfg Config) *Service {
	s := &Service{db: cfg.DB, checkout: cfg.Checkout, vault: cfg.Vault, merchants: cfg.Merchants,
		base: strings.TrimRight(cfg.PublicURL, "/"), log: cfg.Logger, now: cfg.Now, csrf: http.NewCrossOriginProtection(),
		velocity: cfg.Velocity, ledger: cfg.Ledger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Routes registers the session endpoint (behind the v1 API's key check: rule 2 asks for all six
// permissions), the page and the page's own endpoints.
func (s *Service) Routes(r *httpapi.Router) {
	r.Handle("POST", "/v1/checkout/hosted-payment-page/sessions", s.checkout.Protect(checkout.HostedPagePermissions, http.HandlerFunc(s.handleCreate)))
	r.HandleFunc("GET", "/hpp/{token}", s.handlePage)
	r.Handle("POST", "/hpp/{token}/pay", s.csrf.Handler(http.HandlerFunc(s.handlePay)))
	r.Handle("POST", "/hpp/{token}/challenge", s.csrf.Handler(http.HandlerFunc(s.handleChallenge)))
	r.Handle("POST", "/hpp/{token}/cancel", s.csrf.Handler(http.HandlerFunc(s.handleCancel)))
}

// Session is a hosted-page session.
type Session struct {
	ID         int64
	SessionID  string
	MerchantID string
	IntentID   string
	Billing    Billing
	ClientID   string
	// Purpose is "" for a shop's session (the v1 API), or the dashboard's: PurposeTerminal,
	// PurposeSaveCard; Dashboard is then what the dashboard asked.
	Purpose   string
	Dashboard Dashboard
	// ReturnURL is where the page, opened on its own rather than embedded, leads back to once
	// checkout ends ("" for nowhere); Appearance its colours, AppearanceLight, AppearanceDark or
	// AppearanceAuto. Only a shop's session sets them.
	ReturnURL  string
	Appearance string
	Outcome    string // "", completed or canceled
	Attempts   []Attempt
	ExpiresAt  time.Time
	CreatedAt  time.Time
}

// Billing is the session's billing_details, which prefill the form: "Fields: name (string) and
// address (object with city, state, zip, country, all strings)".
type Billing struct {
	Name    string         `json:"name,omitempty"`
	Address BillingAddress `json:"address"`
}

// BillingAddress is the address of Billing.
type BillingAddress struct {
	City    string `json:"city,omitempty"`
	State   string `json:"state,omitempty"`
	Zip     string `json:"zip,omitempty"`
	Country string `json:"country,omitempty"`
}

// Attempt is one try to pay on the page, as the result message lists it.
type Attempt struct {
	CreatedAt int64      `json:"created_at"` // Unix seconds
	Status    string     `json:"status"`     // succeeded, requires_capture or failed
	Error     *LastError `json:"error"`
}

// LastError is why an attempt failed: {code, message}.
type LastError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// expired reports whether the session's hour is over.
func (ss Session) expired(now time.Time) bool { return !now.Before(ss.ExpiresAt) }

// LatestError is "the latest {code, message}": the error of the latest attempt that failed, or nil.
func (ss Session) LatestError() *LastError {
	for i := len(ss.Attempts) - 1; i >= 0; i-- {
		if e := ss.Attempts[i].Error; e != nil {
			return e
		}
	}
	return nil
}

// newToken returns the secret of a page URL: 256 random bits.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// PagePath is the path of the page whose URL's secret is tok.
func PagePath(tok string) string { return "/hpp/" + tok }

func hashOf(tok string) []byte {
	sum := sha256.Sum256([]byte(tok))
	return sum[:]
}

const sessionColumns = `id, session_id, merchant_id, intent_id, billing_details, COALESCE(client_id, ''), COALESCE(outcome, ''),
	attempts, expires_at, created_at, COALESCE(purpose, ''), COALESCE(dashboard, '{}'), COALESCE(return_url, ''),
	COALESCE(appearance, '` + AppearanceAuto + `')`

func scanSession(row interface{ Scan(...any) error }) (Session, error) {
	var ss Session
	var billing, attempts, dashboard string
	var expires, created int64
	if err := row.Scan(&ss.ID, &ss.SessionID, &ss.MerchantID, &ss.IntentID, &billing, &ss.ClientID, &ss.Outcome, &attempts,
		&expires, &created, &ss.Purpose, &dashboard, &ss.ReturnURL, &ss.Appearance); err != nil {
		return Session{}, err
	}
	ss.ExpiresAt, ss.CreatedAt = time.UnixMilli(expires), time.UnixMilli(created)
	if err := json.Unmarshal([]byte(billing), &ss.Billing); err != nil {
		return Session{}, err
	}
	if err := json.Unmarshal([]byte(dashboard), &ss.Dashboard); err != nil {
		return Session{}, err
	}
	return ss, json.Unmarshal([]byte(attempts), &ss.Attempts)
}

// errNoSession is the answer to a URL that names no session.
var errNoSession = errors.New("hostedpage: no session")

// byToken reads the session of a page URL's secret.
func (s *Service) byToken(ctx context.Context, q store.Querier, tok string) (Session, error) {
	ss, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM checkout_sessions WHERE url_hash = $1`, hashOf(tok)))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, errNoSession
	}
	return ss, err
}

// shopPage is what a shop's session asks of its page: the billing details that prefill the form,
// where it leads back to, and its colours.
type shopPage struct {
	billing    Billing
	returnURL  string
	appearance string
}

// create stores a session for an intent just created (none for PurposeSaveCard), and returns its
// page URL. A shop's session has its page's options; a dashboard's its purpose and what the dashboard
// asked.
func (s *Service) create(ctx context.Context, who checkout.Who, in checkout.Intent, p shopPage, purpose string, d Dashboard) (Session, string, error) {
	tok := newToken()
	var ss Session
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		ss, err = s.insert(ctx, tx, who, in, p, purpose, d, func(string) string { return tok })
		return err
	})
	return ss, s.base + PagePath(tok), err
}

// insert stores in tx a session for the intent in, whose page URL's secret is secret(its session id),
// with its audit record: only the secret's hash is stored.
func (s *Service) insert(ctx context.Context, tx *store.Tx, who checkout.Who, in checkout.Intent, p shopPage, purpose string, d Dashboard,
	secret func(sessionID string) string) (Session, error) {
	now := time.UnixMilli(s.now().UnixMilli())
	if p.appearance == "" {
		p.appearance = AppearanceAuto
	}
	ss := Session{SessionID: "cs_" + rand.Text()[:24], MerchantID: who.Merchant.ID, IntentID: in.IntentID, Billing: p.billing,
		ClientID: who.ClientID, Purpose: purpose, Dashboard: d, ReturnURL: p.returnURL, Appearance: p.appearance, Attempts: []Attempt{},
		ExpiresAt: now.Add(Lifetime), CreatedAt: now}
	billing, _ := json.Marshal(p.billing)
	var dashboard sql.NullString
	if purpose != "" {
		raw, _ := json.Marshal(d)
		dashboard = nullable(string(raw))
	}
	err := tx.QueryRowContext(ctx, `INSERT INTO checkout_sessions (session_id, url_hash, merchant_id, intent_id, billing_details,
		client_id, attempts, expires_at, created_at, updated_at, purpose, dashboard, return_url, appearance)
		VALUES ($1, $2, $3, $4, $5, $6, '[]', $7, $8, $8, $9, $10, $11, $12) RETURNING id`,
		ss.SessionID, hashOf(secret(ss.SessionID)), ss.MerchantID, ss.IntentID, string(billing), nullable(ss.ClientID), ss.ExpiresAt.UnixMilli(),
		now.UnixMilli(), nullable(purpose), dashboard, nullable(ss.ReturnURL), ss.Appearance).Scan(&ss.ID)
	if err != nil {
		return Session{}, err
	}
	return ss, audit.Write(ctx, tx, audit.Record{MerchantID: ss.MerchantID, ClientID: ss.ClientID, Operation: "hosted_page_session.create",
		Resource: "hosted_page_session/" + ss.SessionID, Outcome: audit.Done, Detail: ss.IntentID, RequestID: who.RequestID, At: now})
}

// record updates a session after a try, in one transaction with its row locked: it appends the
// attempt (when not nil) and sets the outcome (when not ""), and returns the session as it stands.
// When that transaction is the one that completes the session, it records the event
// hosted_page.session.completed of a shop's session, with the session's intent as it stands, and runs
// completed, when not nil.
func (s *Service) record(ctx context.Context, ss Session, in checkout.Intent, a *Attempt, outcome string,
	completed func(context.Context, *store.Tx) error) (Session, error) {
	ctx = context.WithoutCancel(ctx) // what happened to the money must be recorded
	var out Session
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := s.now().UnixMilli()
		if _, err := tx.ExecContext(ctx, `UPDATE checkout_sessions SET updated_at = $2 WHERE id = $1`, ss.ID, now); err != nil {
			return err
		}
		cur, err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM checkout_sessions WHERE id = $1`, ss.ID))
		if err != nil {
			return err
		}
		if a != nil {
			cur.Attempts = append(cur.Attempts, *a)
		}
		if outcome != "" && cur.Outcome == "" {
			cur.Outcome = outcome
			if outcome == "completed" && cur.Purpose == "" {
				if err := event.Record(ctx, tx, cur.MerchantID, event.HostedPageSessionCompleted, cur.wire(in.Wire(), ""), time.UnixMilli(now)); err != nil {
					return err
				}
			}
			if outcome == "completed" && completed != nil {
				if err := completed(ctx, tx); err != nil {
					return err
				}
			}
		}
		attempts, _ := json.Marshal(cur.Attempts)
		if _, err := tx.ExecContext(ctx, `UPDATE checkout_sessions SET attempts = $2, outcome = $3 WHERE id = $1`,
			cur.ID, string(attempts), nullable(cur.Outcome)); err != nil {
			return err
		}
		out = cur
		return nil
	})
	return out, err
}

// billingRequest is a session's billing_details as sent: "name (string) and address (object with
// city, state, zip, country, all strings)". It is read strictly, like every v1 body. The zip may be
// sent as postal_code, the payment method's name for it.
type billingRequest struct {
	Name    *string         `json:"name"`
	Address *addressRequest `json:"address"`
}

// UnmarshalJSON reads billing details strictly.
func (b *billingRequest) UnmarshalJSON(raw []byte) error {
	type plain billingRequest
	return httpapi.UnmarshalStrict(raw, (*plain)(b), "billing_details.")
}

type addressRequest struct {
	City       *string `json:"city"`
	State      *string `json:"state"`
	Zip        *string `json:"zip"`
	PostalCode *string `json:"postal_code"` // zip under the payment method's name
	Country    *string `json:"country"`
}

// UnmarshalJSON reads an address strictly.
func (a *addressRequest) UnmarshalJSON(raw []byte) error {
	type plain addressRequest
	return httpapi.UnmarshalStrict(raw, (*plain)(a), "billing_details.address.")
}

// parseBilling reads a session's billing_details: each field a short text.
func parseBilling(raw json.RawMessage) (Billing, error) {
	var b billingRequest
	if err := httpapi.UnmarshalStrict(raw, &b, "billing_details."); err != nil {
		return Billing{}, err
	}
	var out Billing
	var t httpapi.Texts
	text := t.Read
	out.Name = text("billing_details.name", b.Name, 200)
	if a := b.Address; a != nil {
		name, zip, err := httpapi.OneOf("billing_details.address.postal_code", a.PostalCode, "billing_details.address.zip", a.Zip)
		if err != nil {
			return Billing{}, err
		}
		out.Address = BillingAddress{City: text("billing_details.address.city", a.City, 100),
			State: text("billing_details.address.state", a.State, 100), Zip: text(name, zip, 20),
			Country: strings.ToUpper(text("billing_details.address.country", a.Country, 2))}
	}
	return out, t.Err
}

func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// expiryGrace is how long after its hour a session is recorded as expired. The page refuses to pay
// once the hour has passed, but a payment begun in its last second is still running: its answer
// comes within the processor's timeout (30 seconds by default), twice for a 3-D Secure question and a
// charge; after the grace it has come, and the session either completed or expired.
const expiryGrace = 2 * time.Minute

// sweepBatch is how many sessions one statement of the sweep reads.
const sweepBatch = 100

// Sweep records the expiry of the sessions whose hour has passed without an outcome, each once (the
// first transaction to set expired_at): a shop's session with the event hosted_page.session.expired,
// whose data is the session with its payment intent as it then stands. The
// dashboard's sessions are marked alike, without an event: the API never showed them.
func (s *Service) Sweep(ctx context.Context) error {
	for {
		cutoff := s.now().Add(-expiryGrace).UnixMilli()
		var due []Session
		err := s.db.Read(ctx, func(q store.Querier) error {
			var err error
			due, err = querySessions(ctx, q, `SELECT `+sessionColumns+` FROM checkout_sessions
				WHERE outcome IS NULL AND expired_at IS NULL AND expires_at <= $1 ORDER BY expires_at LIMIT $2`, cutoff, sweepBatch)
			return err
		})
		if err != nil {
			return err
		}
		for _, ss := range due {
			if err := s.expire(ctx, ss); err != nil {
				return err
			}
		}
		if len(due) < sweepBatch {
			return nil
		}
	}
}

// expire records the expiry of ss, unless it ended or was recorded as expired meanwhile. A session
// whose intent was paid while its own record of that was lost (its node stopped between the two
// writes, and the page never posted again) did not expire: it is completed now, as the page's post
// would have completed it.
func (s *Service) expire(ctx context.Context, ss Session) error {
	var in checkout.Intent
	if ss.IntentID != "" && ss.Purpose != PurposeInvoice { // an invoice's intent is every session's of the invoice
		var err error
		if in, err = s.checkout.Get(ctx, checkout.Who{Merchant: merchant.Merchant{ID: ss.MerchantID}}, ss.IntentID); err != nil {
			return err
		}
	}
	if in.Status == checkout.StatusSucceeded || in.Status == checkout.StatusRequiresCapture {
		m, err := s.merchants.Get(ctx, ss.MerchantID)
		if err != nil {
			return err
		}
		then, err := s.completion(ctx, ss, m, in)
		if err != nil {
			return err
		}
		_, err = s.record(ctx, ss, in, &Attempt{CreatedAt: s.now().Unix(), Status: in.Status}, "completed", then)
		return err
	}
	return s.db.Write(ctx, func(tx *store.Tx) error {
		now := s.now()
		r, err := tx.ExecContext(ctx, `UPDATE checkout_sessions SET expired_at = $2, updated_at = $2
			WHERE id = $1 AND outcome IS NULL AND expired_at IS NULL`, ss.ID, now.UnixMilli())
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 || ss.Purpose != "" {
			return nil
		}
		return event.Record(ctx, tx, ss.MerchantID, event.HostedPageSessionExpired, ss.wire(in.Wire(), ""), now)
	})
}

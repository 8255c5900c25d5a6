package payment

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/cardenc"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/sortid"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/velocity"
)

// Defaults of Config.
const (
	DefaultProcessorTimeout = 30 * time.Second
	DefaultRecoveryInterval = 30 * time.Second
	DefaultReversalInterval = 5 * time.Second
	// keyRetention is how long an idempotency key stays bound to the transaction it created.
	keyRetention = 24 * time.Hour
)

// Config configures a Ledger.
type Config struct {
	DB *store.DB
	// Processors are the processor accounts: each merchant's, and each transaction's.
	Processors       Processors
	Logger           *slog.Logger
	Now              func() time.Time
	ProcessorTimeout time.Duration // bound on one processor call (default 30 s)
	RecoveryInterval time.Duration // how often Run looks for abandoned attempts (default 30 s)
	ReversalInterval time.Duration // how often Run sends the reversals not yet acknowledged (default 5 s)
	// Velocity limits the declines of each card and each credential (required).
	Velocity *velocity.Limiter
	// Metrics counts outcomes, processor calls and recoveries (nil: not counted).
	Metrics *metrics.Set
}

// Ledger records card operations and carries them out through the processor.
type Ledger struct {
	db        *store.DB
	procs     Processors
	log       *slog.Logger
	now       func() time.Time
	timeout   time.Duration
	interval  time.Duration
	reversals time.Duration
	velocity  *velocity.Limiter
	metrics   *metrics.Set
}

// New returns a Ledger.
func New(cfg Config) *Ledger {
	l := &Ledger{db: cfg.DB, procs: cfg.Processors, log: cfg.Logger, now: cfg.Now, timeout: cfg.ProcessorTimeout, interval: cfg.RecoveryInterval,
		reversals: cfg.ReversalInterval, velocity: cfg.Velocity, metrics: cfg.Metrics}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.timeout <= 0 {
		l.timeout = DefaultProcessorTimeout
	}
	if l.interval <= 0 {
		l.interval = DefaultRecoveryInterval
	}
	if l.reversals <= 0 {
		l.reversals = DefaultReversalInterval
	}
	return l
}

// Actor is who asks for an operation, recorded on the transaction and in the audit log.
type Actor struct {
	MerchantID string
	ClientID   string
	RequestID  string
	Profile    string // the merchant's simulator profile, passed to the processor
	// Location is the merchant's time zone, for the local time an acquirer is told (nil: UTC).
	Location *time.Location
	// Principal is the credential whose declines a sale or authorization counts against; zero for a
	// subscription's charge, which no credential asks for.
	Principal httpapi.Principal
	Velocity  velocity.Limits // the merchant's velocity limits
}

// Charge asks for a sale or an authorization.
type Charge struct {
	Actor
	Kind           string // KindSale or KindAuthorization
	Amount         int64  // minor units; 0 only for an authorization (a card verification)
	Currency       money.Currency
	Card           card.Number
	Expiry         card.Expiry
	CVV            string
	Authentication string // the cardholder's 3-D Secure outcome (processor.Payment.Authentication); "" for none
	Customer       Customer
	// TestMode asks for the simulator whatever the merchant's processor: nothing is charged.
	TestMode       bool
	Source         string
	IdempotencyKey string
	// Token is the card token that Card came from, consumed with the attempt; nil for card fields.
	Token *cardenc.Token
	// StoredCard: the card comes from the vault (card on file); Recurring: a subscription's
	// scheduled charge; MailOrder: a mail or telephone order (the virtual terminal). The processor
	// marks them so (processor.Payment); the transaction records MailOrder.
	StoredCard, Recurring, MailOrder bool
}

// FollowUp asks for a capture, refund or void of the transaction ParentID.
type FollowUp struct {
	Actor
	ParentID int64
	Amount   int64 // minor units of the parent's currency; ignored by Void
	// TestMode is accepted for compatibility and changes nothing: a follow-up goes to the processor
	// that took its parent, and is a test as its parent was.
	TestMode       bool
	IdempotencyKey string
}

// ErrProcessorUnavailable is wrapped in the fault returned when the processor did not answer.
var ErrProcessorUnavailable = errors.New("payment: processor unavailable")

// Charge records a sale or authorization attempt, asks the processor, and records the outcome. A
// decline is a transaction with status DECLINED, not an error. A card token used before is
// cardenc.ErrInvalidToken.
//
// Card testing is throttled here, on every path that charges a card: a
// credential whose payments have used up their declines is refused (429) before anything is recorded;
// a card that has used up its declines is declined with velocity.DeclineCode without asking the
// processor, recorded like any decline so that the merchant sees it. Both checks read memory only. A
// card's decline is then counted against the card and the credential. A retry of an attempt already
// recorded under the same idempotency key answers what it answered, limits or not.
func (l *Ledger) Charge(ctx context.Context, c Charge) (Transaction, error) {
	now := l.now()
	acct, err := l.accountFor(ctx, c)
	if err != nil {
		return Transaction{}, err
	}
	t := Transaction{MerchantID: c.MerchantID, Kind: c.Kind, Status: StatusPending, Amount: c.Amount, Currency: c.Currency,
		CardType: string(card.BrandOf(c.Card)), CardPrefix: c.Card.First6(), CardSuffix: c.Card.Last4(),
		TestMode: acct.Test, Source: c.Source, Customer: c.Customer, ClientID: c.ClientID, RequestID: c.RequestID,
		IdempotencyKey: c.IdempotencyKey, CreatedAt: now, UpdatedAt: now, ProcessorAccount: acct.ID, Authentication: c.Authentication,
		MailOrder: c.MailOrder}
	if t.ProcessorTrace, err = l.prepare(ctx, acct, c.Actor); err != nil {
		return Transaction{}, err
	}
	cardSubject, credential := l.velocity.CardDeclines(c.MerchantID, c.Card), velocity.CredentialDeclines(c.Principal)
	var prior *Transaction
	if t.IdempotencyKey == "" && c.Token == nil {
		if err = l.velocity.Check(c.Velocity, credential); err == nil {
			err = l.insert(ctx, nil, &t, now) // one statement, a transaction by itself
		}
	} else {
		err = l.db.Write(ctx, func(tx *store.Tx) error {
			var err error
			// A retry that the key resolves to its transaction gets it back, before its token, which
			// that transaction consumed, could be refused.
			if prior, err = l.prior(ctx, tx, &t, now); err != nil || prior != nil {
				return err
			}
			if err := l.velocity.Check(c.Velocity, credential); err != nil {
				return err
			}
			// The token is consumed by the attempt, recorded in the same transaction as the attempt:
			// whatever the processor answers, declines included.
			if c.Token != nil {
				if err := c.Token.Consume(ctx, tx); err != nil {
					return err
				}
			}
			return l.insert(ctx, tx, &t, now)
		})
	}
	if l.db.InDoubt(err) && t.TransactionID != "" {
		l.withdraw(ctx, t, acct, err) // the attempt may be in the database: it is never sent
	}
	if err != nil || prior != nil {
		return deref(prior), err
	}
	var res processor.Result
	over := l.velocity.Over(cardSubject, c.Velocity)
	if over != nil {
		res = processor.Result{Code: velocity.DeclineCode, Message: velocity.Refusal(over)}
	} else if res, err = l.call(ctx, acct, operation(t.Kind), func(ctx context.Context) (processor.Result, error) {
		return acct.Processor.Authorize(ctx, c.payment(t.TransactionID, t.ProcessorTrace))
	}); err != nil {
		return l.noAnswer(ctx, t, acct, err)
	}
	if t, err = l.finish(ctx, t, acct, res, operation(t.Kind)); err != nil {
		return Transaction{}, err
	}
	if t.CardDeclined() {
		// Counted even when the client has gone: hanging up must not spare a decline its count.
		if err := l.velocity.Record(context.WithoutCancel(ctx), c.Velocity, cardSubject, credential); err != nil {
			l.log.ErrorContext(ctx, "count a decline against the velocity limits", "transaction_id", t.TransactionID, "err", err)
		}
	}
	t.Limit = over
	return t, nil
}

// payment is what the processor is asked to authorize for c, under Kassa's reference ref and the
// trace the processor prepared for it.
func (c Charge) payment(ref, trace string) processor.Payment {
	return processor.Payment{Reference: ref, Merchant: c.merchant(), Amount: c.Amount, Currency: c.Currency,
		Capture: c.Kind == KindSale, Card: c.Card, Expiry: c.Expiry, CVV: c.CVV, Authentication: c.Authentication,
		StoredCard: c.StoredCard, Recurring: c.Recurring, MailOrder: c.MailOrder, Trace: trace}
}

// ChallengeRequired reports whether the cardholder of c must pass the issuer's 3-D Secure challenge
// before c is charged; false when the processor does not run 3-D Secure (processor.Authenticator).
// Nothing is recorded, since nothing is authorized; the question is bounded by the processor timeout,
// and a processor that does not answer is a 502 with nothing charged.
func (l *Ledger) ChallengeRequired(ctx context.Context, c Charge) (bool, error) {
	acct, err := l.accountFor(ctx, c)
	if err != nil {
		return false, err
	}
	a, ok := acct.Processor.(processor.Authenticator)
	if !ok {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	required, err := a.ChallengeRequired(ctx, c.payment("", ""))
	if err != nil {
		l.log.WarnContext(ctx, "processor did not say whether a payment needs 3-D Secure", "err", err)
		return false, &fault.Error{Status: http.StatusBadGateway, Code: "processor_unavailable",
			Message: "The processor did not say whether the card requires 3-D Secure. Nothing was charged; retry."}
	}
	return required, nil
}

// Capture collects f.Amount (at most the authorized amount) of an authorization. One capture per
// authorization; what it does not capture is released.
func (l *Ledger) Capture(ctx context.Context, f FollowUp) (Transaction, error) {
	return l.followUp(ctx, f, KindCapture, processor.Processor.Capture)
}

// Refund returns f.Amount of a sale or capture. Refunds may repeat while their sum stays within the
// amount of the sale or capture.
func (l *Ledger) Refund(ctx context.Context, f FollowUp) (Transaction, error) {
	return l.followUp(ctx, f, KindRefund, processor.Processor.Refund)
}

// Void releases an authorization that was not captured.
func (l *Ledger) Void(ctx context.Context, f FollowUp) (Transaction, error) {
	return l.followUp(ctx, f, KindVoid, processor.Processor.Void)
}

// followUp records a capture, refund or void of f.ParentID and has call carry it out on the
// processor account that took the parent, whatever the merchant's processor is now.
func (l *Ledger) followUp(ctx context.Context, f FollowUp, kind string,
	call func(processor.Processor, context.Context, processor.FollowUp) (processor.Result, error)) (Transaction, error) {
	now := l.now()
	// The account and the processor's trace come before the transaction that records the follow-up: a
	// processor.Preparer may write to the database (the ISO 8583 connector reserves its next block of
	// numbers there), and on SQLite a write begun inside another write waits for that one — for ever.
	// A transaction's account never changes, so the one read here is the one that took the parent.
	var accountID string
	err := l.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT COALESCE(processor_account, '') FROM transactions WHERE merchant_id = $1 AND id = $2`,
			f.MerchantID, f.ParentID).Scan(&accountID)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Transaction{}, fault.NotFound("No transaction %d.", f.ParentID)
	} else if err != nil {
		return Transaction{}, err
	}
	acct, err := l.procs.Account(ctx, accountID)
	if err != nil {
		return Transaction{}, err
	}
	trace, err := l.prepare(ctx, acct, f.Actor)
	if err != nil {
		return Transaction{}, err
	}
	var t, parent Transaction
	var prior *Transaction
	err = l.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if parent, err = l.get(ctx, tx, f.MerchantID, f.ParentID); err != nil {
			return err
		}
		amount := f.Amount
		if kind == KindVoid {
			amount = parent.Amount
		}
		t = Transaction{MerchantID: f.MerchantID, Kind: kind, Status: StatusPending, ParentID: parent.ID, Amount: amount,
			Currency: parent.Currency, CardType: parent.CardType, CardPrefix: parent.CardPrefix, CardSuffix: parent.CardSuffix,
			TestMode: parent.TestMode, Source: parent.Source, Customer: parent.Customer, ClientID: f.ClientID,
			RequestID: f.RequestID, IdempotencyKey: f.IdempotencyKey, CreatedAt: now, UpdatedAt: now,
			ParentTransactionID: parent.TransactionID, ProcessorAccount: parent.ProcessorAccount}
		if prior, err = l.prior(ctx, tx, &t, now); err != nil || prior != nil {
			return err
		}
		if err := l.reserve(ctx, tx, &parent, kind, amount, now); err != nil {
			return err
		}
		t.ProcessorTrace = trace
		return l.insert(ctx, tx, &t, now)
	})
	var rejected *fault.Error
	if errors.As(err, &rejected) && rejected.Status == http.StatusConflict && parent.ID != 0 {
		l.auditRejection(ctx, f.Actor, kind, parent, f.Amount, rejected.Message)
	}
	if l.db.InDoubt(err) && t.TransactionID != "" {
		l.withdraw(ctx, t, acct, err) // the attempt may be in the database: it is never sent
	}
	if err != nil || prior != nil {
		return deref(prior), err
	}
	res, err := l.call(ctx, acct, operation(kind), func(ctx context.Context) (processor.Result, error) {
		return call(acct.Processor, ctx, processor.FollowUp{Reference: t.TransactionID, Merchant: f.merchant(),
			Original: parent.ProcessorRef, Amount: t.Amount, Currency: t.Currency, AuthorizedAt: parent.CreatedAt, Trace: t.ProcessorTrace})
	})
	if err != nil {
		return l.noAnswer(ctx, t, acct, err)
	}
	return l.finish(ctx, t, acct, res, operation(kind))
}

// reserve claims what a follow-up needs from its parent before the processor is called, with one
// conditional UPDATE, so that concurrent requests cannot together exceed it: the refunded sum stays
// within the amount, and an authorization is captured or voided once.
func (l *Ledger) reserve(ctx context.Context, tx *store.Tx, parent *Transaction, kind string, amount int64, now time.Time) error {
	if err := l.conflict(ctx, tx, *parent, kind, amount); err != nil {
		return err
	}
	var res sql.Result
	var err error
	switch kind {
	case KindRefund:
		res, err = tx.ExecContext(ctx, `UPDATE transactions SET reserved = reserved + $2, updated_at = $3
			WHERE id = $1 AND status = 'APPROVED' AND kind IN ('SALE', 'CAPTURE') AND reserved + $2 <= amount`,
			parent.ID, amount, now.UnixMilli())
	case KindCapture:
		res, err = tx.ExecContext(ctx, `UPDATE transactions SET closed_by = 'CAPTURE', reserved = $2, updated_at = $3
			WHERE id = $1 AND status = 'APPROVED' AND kind = 'AUTHORIZATION' AND closed_by IS NULL AND $2 <= amount`,
			parent.ID, amount, now.UnixMilli())
	case KindVoid:
		res, err = tx.ExecContext(ctx, `UPDATE transactions SET closed_by = 'VOID', updated_at = $2
			WHERE id = $1 AND status = 'APPROVED' AND kind = 'AUTHORIZATION' AND closed_by IS NULL AND amount > 0`,
			parent.ID, now.UnixMilli())
	}
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	// Another request changed the parent after it was read: say what it is now.
	fresh, err := l.get(ctx, tx, parent.MerchantID, parent.ID)
	if err != nil {
		return err
	}
	if err := l.conflict(ctx, tx, fresh, kind, amount); err != nil {
		return err
	}
	return fault.Busy("concurrent_update", "The transaction changed while this request ran; retry it.")
}

// conflict says why parent's state forbids the follow-up, or returns nil. An authorization that was
// captured or voided is named with the transaction that closed it, read in q, so that the answer
// names the call that works instead of sending the caller from refund to void and back: a refund's
// or a void's refusal names the transaction to act on.
func (l *Ledger) conflict(ctx context.Context, q store.Querier, p Transaction, kind string, amount int64) error {
	closer := ""
	if p.Kind == KindAuthorization && p.ClosedBy != "" {
		err := q.QueryRowContext(ctx, `SELECT transaction_id FROM transactions WHERE merchant_id = $1 AND parent_id = $2 AND kind = $3
			AND status <> 'DECLINED' ORDER BY id DESC LIMIT 1`, p.MerchantID, p.ID, p.ClosedBy).Scan(&closer)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	return conflict(p, closer, kind, amount)
}

// conflict says why parent's state forbids the follow-up, or returns nil; closer is the
// transaction_id of the capture or void that closed an authorization ("" for none). Each refusal of a
// refund or a void names the transaction and the call that works.
func conflict(p Transaction, closer, kind string, amount int64) error {
	amt := func(v int64) string { return money.Format(v, p.Currency) }
	if p.Status == StatusDeclined {
		return fault.Conflict(kind2code(kind), "%s %s was declined: it moved and held no funds, so there is nothing to %s.",
			p.Kind, p.TransactionID, operation(kind))
	}
	switch kind {
	case KindRefund:
		switch {
		case p.Kind == KindAuthorization && p.ClosedBy == KindCapture:
			return fault.Conflict("refund_not_allowed", "Authorization %s moved no funds itself: capture %s collected them. Refund the capture: POST /transaction-service/refund/%s.",
				p.TransactionID, closer, closer)
		case p.Kind == KindAuthorization && p.ClosedBy == KindVoid:
			return fault.Conflict("refund_not_allowed", "Authorization %s was voided by %s: no funds moved, and nothing remains to refund.", p.TransactionID, closer)
		case p.Kind == KindAuthorization:
			return fault.Conflict("refund_not_allowed", "Authorization %s cannot be refunded because no funds moved; void it instead (POST /transaction-service/void/%s), or capture it (POST /transaction-service/capture/%s) and refund the capture.",
				p.TransactionID, p.TransactionID, p.TransactionID)
		case p.Kind == KindRefund:
			return fault.Conflict("refund_not_allowed", "Only a sale or a capture can be refunded; %s is a REFUND of %s, which is refunded with POST /transaction-service/refund/%s.",
				p.TransactionID, p.ParentTransactionID, p.ParentTransactionID)
		case p.Kind != KindSale && p.Kind != KindCapture:
			return fault.Conflict("refund_not_allowed", "Only a sale or a capture can be refunded; %s is a %s.", p.TransactionID, p.Kind)
		case p.Reserved+amount > p.Amount:
			return &fault.Error{Status: http.StatusConflict, Code: "amount_exceeds_refundable", Field: "amount",
				Message: "The refund of " + amt(amount) + " exceeds the " + amt(p.Amount-p.Reserved) + " that remains refundable."}
		}
	case KindCapture, KindVoid:
		verb := "captured"
		if kind == KindVoid {
			verb = "voided"
		}
		switch {
		case (p.Kind == KindSale || p.Kind == KindCapture) && kind == KindVoid:
			return fault.Conflict("void_not_allowed", "Only an authorization can be voided; %s is a %s, whose funds moved: refund a %s instead (POST /transaction-service/refund/%s).",
				p.TransactionID, p.Kind, strings.ToLower(p.Kind), p.TransactionID)
		case p.Kind != KindAuthorization && kind == KindVoid:
			return fault.Conflict("void_not_allowed", "Only an authorization can be voided; %s is a %s.", p.TransactionID, p.Kind)
		case p.Kind != KindAuthorization:
			return fault.Conflict("capture_not_allowed", "Only an authorization can be captured; this is a %s.", p.Kind)
		case p.Amount == 0:
			return fault.Conflict(kind2code(kind), "A card verification (an authorization of 0) holds nothing to be %s.", verb)
		case p.ClosedBy == KindCapture && kind == KindVoid:
			return fault.Conflict("already_captured", "Authorization %s has been captured by %s; refund the capture instead (POST /transaction-service/refund/%s).",
				p.TransactionID, closer, closer)
		case p.ClosedBy == KindCapture:
			return fault.Conflict("already_captured", "Authorization %s has already been captured, by %s; it can be captured once.", p.TransactionID, closer)
		case p.ClosedBy == KindVoid:
			return fault.Conflict("already_voided", "Authorization %s has been voided, by %s.", p.TransactionID, closer)
		case kind == KindCapture && amount > p.Amount:
			return &fault.Error{Status: http.StatusConflict, Code: "amount_exceeds_authorized", Field: "amount",
				Message: "The capture of " + amt(amount) + " exceeds the authorized " + amt(p.Amount) + "."}
		}
	}
	return nil
}

// kind2code is the error code of a follow-up of kind that the parent's state forbids.
func kind2code(kind string) string {
	return operation(kind) + "_not_allowed"
}

// prior finds the transaction that an earlier request with the same idempotency key created. A key
// binds to its transaction for 24 hours; after that it may be used afresh. The same key on a
// different operation is a 422, and on one still running a 409.
func (l *Ledger) prior(ctx context.Context, tx *store.Tx, t *Transaction, now time.Time) (*Transaction, error) {
	if t.IdempotencyKey == "" {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE transactions SET idempotency_key = NULL
		WHERE merchant_id = $1 AND idempotency_key = $2 AND created_at <= $3`,
		t.MerchantID, t.IdempotencyKey, now.Add(-keyRetention).UnixMilli()); err != nil {
		return nil, err
	}
	p, err := scanTransaction(tx.QueryRowContext(ctx, `SELECT `+columns+from+`WHERE t.merchant_id = $1 AND t.idempotency_key = $2`,
		t.MerchantID, t.IdempotencyKey))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	case p.Kind != t.Kind || p.ParentID != t.ParentID || p.Amount != t.Amount || p.Currency.Code != t.Currency.Code:
		return nil, fault.New(http.StatusUnprocessableEntity, "idempotency_key_reused",
			"This Idempotency-Key was used for a different operation (%s %s); use a new key.", p.Kind, p.TransactionID)
	case p.Status == StatusPending:
		return nil, fault.Busy("idempotency_key_in_use", "The operation with this Idempotency-Key is still being processed; retry shortly.")
	}
	return &p, nil
}

// lease is how long an attempt stays its node's own: twice the processor timeout, so that recovery
// elsewhere starts only when the original call has certainly given up.
func (l *Ledger) lease(now time.Time) int64 { return now.Add(2 * l.timeout).UnixMilli() }

// insert records the attempt: a PENDING row, leased to this node. Without tx it is a statement of
// its own.
func (l *Ledger) insert(ctx context.Context, tx *store.Tx, t *Transaction, now time.Time) error {
	t.TransactionID = newTransactionID(now)
	c := t.Customer
	var parent sql.NullInt64
	if t.ParentID != 0 {
		parent = sql.NullInt64{Int64: t.ParentID, Valid: true}
	}
	args := []any{t.TransactionID, t.MerchantID, t.Kind, parent, t.Amount, t.Currency.Code, t.Currency.Digits, t.CardType,
		t.CardPrefix, t.CardSuffix, t.TestMode, t.Source, nullable(c.Email), nullable(c.FirstName), nullable(c.LastName),
		nullable(c.Company), nullable(c.Telephone), nullable(c.Address1), nullable(c.Address2), nullable(c.City),
		nullable(c.Province), nullable(c.Country), nullable(c.PostalCode), nullable(c.CustomID), nullable(c.InvoiceID),
		nullable(c.OrderID), nullable(c.Description), nullable(t.ClientID), nullable(t.RequestID), nullable(t.IdempotencyKey),
		l.lease(now), now.UnixMilli(), nullable(t.ParentTransactionID), nullable(t.ProcessorAccount), nullable(t.ProcessorTrace),
		nullable(c.CustomerLookupID), nullable(t.Authentication), t.MailOrder}
	if tx == nil {
		return l.db.QueryRow(ctx, []any{&t.ID}, insertSQL, args...)
	}
	return tx.QueryRowContext(ctx, insertSQL, args...).Scan(&t.ID)
}

const insertSQL = `INSERT INTO transactions (transaction_id, merchant_id, kind, parent_id, status, amount,
		currency, scale, card_type, card_prefix, card_suffix, test_mode, source, email, first_name, last_name, company,
		telephone, address1, address2, city, province, country, postal_code, custom_id, invoice_id, order_id, description,
		client_id, request_id, idempotency_key, lease_until, created_at, updated_at, parent_transaction_id,
		processor_account, processor_trace, customer_lookup_id, authentication, mail_order)
		VALUES ($1, $2, $3, $4, 'PENDING', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,
		$22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $32, $33, $34, $35, $36, $37, $38)
		RETURNING id`

// call runs one processor call of op on acct, bounded by the processor timeout, and times it. It is
// not canceled when the client goes away: once the processor has been asked, its answer must be
// recorded.
func (l *Ledger) call(ctx context.Context, acct processor.Account, op string, f func(context.Context) (processor.Result, error)) (processor.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	start := time.Now()
	res, err := f(ctx)
	l.metrics.ProcessorCall(acct.Kind, op, err == nil, time.Since(start))
	return res, err
}

// finish records the answer of acct's processor to an operation asked for through an API, or by a
// staff user at the dashboard: the outcome, the release of a declined follow-up's reservation, and
// (for a staff user's) the audit record, in one transaction. Only the first finish of an attempt
// counts: when recovery got there first, the recorded transaction is returned as it stands.
//
// An outcome whose write failed for want of the database — the connection lost, perhaps after its
// COMMIT was sent — is written again on a new connection until the attempt's lease ends (reapply):
// the processor has answered, and the client's retry should find that answer, not a pending attempt.
func (l *Ledger) finish(ctx context.Context, t Transaction, acct processor.Account, res processor.Result, op string) (Transaction, error) {
	return l.finishAs(ctx, t, acct, res, op, "", true)
}

// finishAs is finish with the audit record's outcome given (outcomeFailed for an interrupted attempt),
// or "" for the transaction's status.
//
// The transactions row is the record of the operation: it names who asked (client_id), what, when
// (finished_at, in commit order event_seq), the request and the outcome, and the history reads it as
// such (internal/history). An audit record is written beside it only where the row does not say it
// all (audited): a staff user acted, whom the record names (with the address, where the request
// was the dashboard's); the finish is the gateway's own work (op "recover", or a reversal's, whose outcome is always given); or the outcome
// given is not the row's status (FAILED, REVERSED). An API's own finish writes none.
//
// With again, a write that fails for want of the database is made again (reapply) within the
// attempt's lease. The write changes only a PENDING row, so a second one after a first whose answer
// was lost changes nothing; the row then found final with this very outcome is this finish's, and
// counts as won. Recovery and the reversals finish without again: their sweep comes back to the row.
func (l *Ledger) finishAs(ctx context.Context, t Transaction, acct processor.Account, res processor.Result, op, outcome string, again bool) (Transaction, error) {
	ctx = context.WithoutCancel(ctx)
	now := l.now()
	t.Status, t.Message, t.DeclineCode, t.ProcessorRef, t.UpdatedAt = StatusApproved, res.Message, "", res.Reference, now
	if !res.Approved {
		t.Status, t.DeclineCode = StatusDeclined, res.Code
		if t.DeclineCode == "" {
			t.DeclineCode = processor.CodeDeclined
		}
	}
	if t.Message == "" {
		t.Message = map[bool]string{true: "Approved", false: "Declined"}[res.Approved]
	}
	audited := audited(ctx, t, op, outcome)
	if outcome == "" {
		outcome = t.Status
	}
	a := auditRecord(ctx, t, op, outcome, now)
	outcomeArgs := []any{t.ID, t.Status, t.Message, nullable(t.DeclineCode), nullable(t.ProcessorRef), now.UnixMilli()}
	// Events: the outcome's row is its transaction.* event (events.go), with its place (event_seq) and
	// time (finished_at) set by outcomeSQL; nothing else is written for it.
	won := false
	write := func() (err error) {
		won = false
		if l.db.Dialect() == store.Postgres && !(t.Status == StatusDeclined && t.ParentID != 0) {
			// The outcome, and its audit record where there is one, in one statement, a transaction of its
			// own: one round trip. The record comes from done, and exists only when this finish won, which
			// the rows affected say.
			stmt, args := outcomeSQL[store.Postgres], outcomeArgs
			if audited {
				stmt = `WITH done AS (` + stmt + ` RETURNING id) ` + audit.SelectSQL(len(args)+1) + ` FROM done`
				args = append(args, a.Args()...)
			}
			var r sql.Result
			if r, err = l.db.Exec(ctx, stmt, args...); err == nil {
				n, _ := r.RowsAffected()
				won = n == 1
			}
		} else {
			err = l.db.Write(ctx, func(tx *store.Tx) error {
				stmt, args := outcomeSQL[tx.Dialect()], outcomeArgs
				if tx.Dialect() == store.SQLite {
					args = append(args[:len(args):len(args)], t.MerchantID)
				}
				r, err := tx.ExecContext(ctx, stmt, args...)
				if err != nil {
					return err
				}
				if n, _ := r.RowsAffected(); n == 0 {
					won = false
					return nil
				}
				won = true
				if t.Status == StatusDeclined {
					if err := release(ctx, tx, t, now); err != nil {
						return err
					}
				}
				if !audited {
					return nil
				}
				return audit.Write(ctx, tx, a)
			})
		}
		return err
	}
	err := write()
	lost := false
	if again && l.db.InDoubt(err) {
		lost = true
		err = l.reapply(ctx, t, err, write)
	}
	if err != nil {
		return Transaction{}, err
	}
	if !won {
		var got Transaction
		err := l.db.Read(ctx, func(q store.Querier) error {
			var err error
			got, err = l.get(ctx, q, t.MerchantID, t.ID)
			return err
		})
		if err != nil || !lost || !sameOutcome(got, t) {
			return got, err
		}
		// The first write was committed; only its answer was lost.
	}
	l.metrics.Payment(t.Kind, t.Status, t.DeclineCode, acct.Kind, t.TestMode)
	return t, nil
}

// eventType is the event of a transaction's outcome: a sale or an authorization
// approved is transaction.approved; a capture, refund or void approved is transaction.captured,
// .refunded or .voided; any attempt declined, a follow-up's included, is transaction.declined.
func eventType(t Transaction) string {
	if t.Status != StatusApproved {
		return event.TransactionDeclined
	}
	switch t.Kind {
	case KindCapture:
		return event.TransactionCaptured
	case KindRefund:
		return event.TransactionRefunded
	case KindVoid:
		return event.TransactionVoided
	}
	return event.TransactionApproved
}

// outcomeSQL records the processor's answer on a pending attempt, with the outcome's place in the
// merchant's commit order (event_seq) and its time (finished_at): only the first answer counts. Its
// parameters are $1 to $6 (outcomeArgs), and on SQLite the merchant as $7.
//
// The place is event.Place's: on SQLite one more than the merchant's highest, read at the end of an
// index of each source of its events — the single writer makes it commit order; on PostgreSQL the id
// of the outcome's own transaction, in the order the transactions began: a reader takes the rows
// below its snapshot's xmin only, all of whose transactions have ended.
var outcomeSQL = map[store.Dialect]string{
	store.SQLite:   outcomeHead + event.Place(store.SQLite, "$7") + outcomeTail,
	store.Postgres: outcomeHead + event.Place(store.Postgres, "$7") + outcomeTail,
}

const (
	outcomeHead = `UPDATE transactions SET status = $2, message = $3, decline_code = $4, processor_ref = $5,
	lease_until = NULL, updated_at = $6, finished_at = $6, event_seq = `
	outcomeTail = ` WHERE id = $1 AND status = 'PENDING'`
)

// release gives a declined follow-up's reservation back to its parent.
func release(ctx context.Context, tx *store.Tx, t Transaction, now time.Time) error {
	var err error
	switch t.Kind {
	case KindRefund:
		_, err = tx.ExecContext(ctx, `UPDATE transactions SET reserved = reserved - $2, updated_at = $3 WHERE id = $1`, t.ParentID, t.Amount, now.UnixMilli())
	case KindCapture:
		_, err = tx.ExecContext(ctx, `UPDATE transactions SET reserved = 0, closed_by = NULL, updated_at = $2 WHERE id = $1`, t.ParentID, now.UnixMilli())
	case KindVoid:
		_, err = tx.ExecContext(ctx, `UPDATE transactions SET closed_by = NULL, updated_at = $2 WHERE id = $1`, t.ParentID, now.UnixMilli())
	}
	return err
}

// Get returns the merchant's transaction by numeric id or 20-character transaction_id. Another
// merchant's transaction, and one whose outcome is not yet recorded, is not found.
func (l *Ledger) Get(ctx context.Context, merchantID, ref string) (Transaction, error) {
	var t Transaction
	err := l.db.Read(ctx, func(q store.Querier) error {
		var err error
		if len(ref) == transactionIDLen {
			t, err = scanTransaction(q.QueryRowContext(ctx, `SELECT `+columns+from+
				`WHERE t.merchant_id = $1 AND t.transaction_id = $2 AND t.status <> 'PENDING'`, merchantID, ref))
		} else if id, ok := parseID(ref); ok {
			t, err = scanTransaction(q.QueryRowContext(ctx, `SELECT `+columns+from+
				`WHERE t.merchant_id = $1 AND t.id = $2 AND t.status <> 'PENDING'`, merchantID, id))
		} else {
			err = sql.ErrNoRows
		}
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Transaction{}, fault.NotFound("No transaction %s.", ref)
	}
	return t, err
}

// ByKey returns the merchant's transaction bound to an idempotency key, pending or not, and whether
// there is one. Payment intents derive a key for each attempt, and look an interrupted attempt up by it.
func (l *Ledger) ByKey(ctx context.Context, merchantID, key string) (Transaction, bool, error) {
	var t Transaction
	err := l.db.Read(ctx, func(q store.Querier) error {
		var err error
		t, err = scanTransaction(q.QueryRowContext(ctx, `SELECT `+columns+from+`WHERE t.merchant_id = $1 AND t.idempotency_key = $2`,
			merchantID, key))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Transaction{}, false, nil
	}
	return t, err == nil, err
}

// get reads a transaction of the merchant by numeric id, pending or not.
func (l *Ledger) get(ctx context.Context, q store.Querier, merchantID string, id int64) (Transaction, error) {
	t, err := scanTransaction(q.QueryRowContext(ctx, `SELECT `+columns+from+`WHERE t.merchant_id = $1 AND t.id = $2`, merchantID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Transaction{}, fault.NotFound("No transaction %d.", id)
	}
	return t, err
}

func parseID(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

const transactionIDLen = 20

// newTransactionID returns a transaction id of 20 characters of [A-Z2-7] made at now: its time, then
// 11 random characters (55 bits), so that the ledger's unique index and the audit log's index of
// transaction ids grow at their ends (sortid).
func newTransactionID(now time.Time) string { return sortid.New(now, transactionIDLen) }

// processorOperations are the processor's names of the kinds of transaction.
var processorOperations = map[string]string{KindSale: processor.OperationSale, KindAuthorization: processor.OperationAuthorization,
	KindCapture: processor.OperationCapture, KindRefund: processor.OperationRefund, KindVoid: processor.OperationVoid}

func operation(kind string) string {
	switch kind {
	case KindSale:
		return "sale"
	case KindAuthorization:
		return "authorize"
	case KindCapture:
		return "capture"
	case KindRefund:
		return "refund"
	default:
		return "void"
	}
}

func deref(t *Transaction) Transaction {
	if t == nil {
		return Transaction{}
	}
	return *t
}

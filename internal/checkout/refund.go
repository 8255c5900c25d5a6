package checkout

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// Refunds of the v1 API: POST /v1/refunds returns all or part of what a succeeded intent captured. A
// refund is a money operation on its intent, run in the three steps of every other (operation.go), so
// that it is as safe:
//
//  1. claim: the intent is locked, the amount checked against what remains (amount_received less
//     amount_refunded), and the refund recorded as pending under the intent's next attempt number.
//     A refund racing another operation on the intent, a second refund included, is a 409 to retry.
//  2. the ledger: a REFUND of the transaction that captured the money (latest_charge) under that
//     attempt's idempotency key — the transaction service's own refund (payment.Ledger.Refund), whose
//     reservation keeps every refund of the transaction, through either API, within what was captured,
//     and whose recovery resolves an attempt whose node died.
//  3. settle: the refund records the ledger's outcome in the transaction that ends the intent's
//     operation (finishRefund), with the event payment_intent.refunded when money was returned; the
//     ledger itself records transaction.refunded.
//
// A node that dies between the steps leaves the refund pending; it settles as any operation does
// (reconcile). A refund the ledger never saw ends canceled, with nothing refunded.

// Refund statuses.
const (
	RefundPending   = "pending"   // the ledger has not answered yet
	RefundSucceeded = "succeeded" // the money was returned
	RefundFailed    = "failed"    // the processor declined it: failure_reason is its decline code
	RefundCanceled  = "canceled"  // it never reached the processor: nothing was refunded
)

// refundReasons are the reasons a client may give.
var refundReasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

// Refund is a refund of a payment intent.
type Refund struct {
	ID            int64 // row id: the list's order
	RefundID      string
	MerchantID    string
	IntentID      string // pi_…
	Attempt       int    // the intent's attempt that carries it out
	Amount        int64  // minor units of Currency
	Currency      money.Currency
	Reason        string
	Metadata      map[string]string
	Status        string
	Charge        string // transaction_id of the sale or capture refunded
	TransactionID string // the ledger's REFUND, once it has an outcome
	FailureReason string
	ClientID      string
	Livemode      bool
	CreatedAt     time.Time
}

// RefundParams are the validated fields of a new refund.
type RefundParams struct {
	PaymentIntent string
	// Amount is what to refund; nil for all that remains.
	Amount   *int64
	Reason   string
	Metadata map[string]string
	// IdempotencyKey is the request's (idempotency.Key), "" for none: a retry under it, even after the
	// HTTP layer forgot the first answer (a 5xx, a node that died), finds the refund it made.
	IdempotencyKey string
}

// refundBody is the body of POST /v1/refunds.
type refundBody struct {
	PaymentIntent *string           `json:"payment_intent"`
	Amount        *int64            `json:"amount"`
	Reason        *string           `json:"reason"`
	Metadata      map[string]string `json:"metadata"`
}

// ParseRefundBody reads a refund's body strictly: payment_intent is required; amount, when given, a
// positive integer of minor units; reason one of refundReasons; metadata as for intents.
func ParseRefundBody(body []byte) (RefundParams, error) {
	var b refundBody
	if err := httpapi.UnmarshalStrict(body, &b, ""); err != nil {
		return RefundParams{}, err
	}
	var p RefundParams
	switch {
	case b.PaymentIntent == nil || *b.PaymentIntent == "":
		return p, fault.Invalid("payment_intent", "payment_intent is required: the id (pi_…) of the succeeded payment intent to refund")
	case b.Amount != nil && *b.Amount <= 0:
		return p, fault.Invalid("amount", "amount must be a positive integer in the currency's minor unit; leave it out to refund all that remains")
	case b.Reason != nil && !slices.Contains(refundReasons, *b.Reason):
		return p, fault.Invalid("reason", "reason must be one of %s", strings.Join(refundReasons, ", "))
	}
	p.PaymentIntent, p.Amount = *b.PaymentIntent, b.Amount
	if b.Reason != nil {
		p.Reason = *b.Reason
	}
	md, err := mergeMetadata(nil, b.Metadata)
	p.Metadata = md
	return p, err
}

// errRefundExists ends a refund's claim that found the refund its idempotency key made.
var errRefundExists = errors.New("checkout: the refund of this idempotency key exists")

// Refund returns p.Amount (nil: all that remains) of who's succeeded intent p.PaymentIntent. The
// answer is the refund with its outcome: a refund the processor declines is not an error but a refund
// in status failed. A refund whose idempotency key made one within the key's retention is that refund.
func (s *Service) Refund(ctx context.Context, who Who, p RefundParams) (Refund, error) {
	var r Refund
	in, err := s.claim(ctx, who, p.PaymentIntent, opRefund, func(tx *store.Tx, in *Intent) (bool, error) {
		if p.IdempotencyKey != "" {
			prior, found, err := refundByKey(ctx, tx, who.Merchant.ID, p.IdempotencyKey, s.now().Add(-idempotency.DefaultRetention))
			switch {
			case err != nil:
				return false, err
			case found && prior.IntentID != in.IntentID:
				return false, fault.New(http.StatusUnprocessableEntity, "idempotency_key_reused",
					"This Idempotency-Key was used for refund %s of another payment intent; use a new key.", prior.RefundID)
			case found:
				r = prior
				return false, errRefundExists
			}
		}
		if in.Status != StatusSucceeded {
			return false, refundRefused(*in)
		}
		rest := in.AmountReceived - in.AmountRefunded
		if rest <= 0 {
			return false, fault.Conflict("charge_already_refunded", "Payment intent %s has been refunded in full (amount_refunded %d).",
				in.IntentID, in.AmountRefunded)
		}
		r = Refund{RefundID: "re_" + rand.Text()[:24], MerchantID: in.MerchantID, IntentID: in.IntentID,
			Attempt: in.Attempts + 1, // the attempt this claim begins
			Amount:  rest, Currency: in.Currency, Reason: p.Reason, Metadata: p.Metadata, Status: RefundPending,
			Charge: in.LatestCharge, ClientID: who.ClientID, Livemode: in.Livemode, CreatedAt: time.UnixMilli(s.now().UnixMilli())}
		if p.Amount != nil {
			if *p.Amount > rest {
				return false, fault.Invalid("amount", "amount must be no greater than the %d that remains refundable of payment intent %s",
					rest, in.IntentID)
			}
			r.Amount = *p.Amount
		}
		return true, insertRefund(ctx, tx, in.ID, &r, p.IdempotencyKey)
	})
	if errors.Is(err, errRefundExists) {
		return s.GetRefund(ctx, who, r.RefundID)
	}
	if err != nil {
		return Refund{}, err
	}
	t, err := s.ledger.Refund(ctx, payment.FollowUp{Actor: who.actor(), ParentID: in.ChargeID, Amount: r.Amount,
		IdempotencyKey: attemptKey(in.IntentID, in.Attempts)})
	if err != nil {
		_, err = s.afterFailure(ctx, who, in, err)
	} else {
		_, err = s.settle(ctx, in, t, who.ClientID)
	}
	if err != nil {
		return Refund{}, err
	}
	return s.GetRefund(ctx, who, r.RefundID)
}

// refundRefused is the 409 of a refund of an intent that is not succeeded. One that holds an
// authorization names the calls that work on it, instead of sending the caller elsewhere.
func refundRefused(in Intent) error {
	msg := "You cannot refund payment intent " + in.IntentID + " because its status is " + in.Status + ": nothing was captured to refund."
	if in.Status == StatusRequiresCapture {
		msg = "You cannot refund payment intent " + in.IntentID + " because its status is requires_capture: authorization " +
			in.LatestCharge + " holds the money uncaptured. Release it with POST /v1/payment-intents/" + in.IntentID +
			"/cancel, or collect it with POST /v1/payment-intents/" + in.IntentID + "/capture and then refund."
	}
	return &fault.Error{Status: http.StatusConflict, Code: "payment_intent_unexpected_state", Message: msg}
}

// refundInstead is the 409 of a cancel of a succeeded intent: the money was captured, and a refund,
// not a cancel, returns it.
func refundInstead(in Intent) error {
	return &fault.Error{Status: http.StatusConflict, Code: "payment_intent_unexpected_state",
		Message: "You cannot cancel payment intent " + in.IntentID + " because its status is succeeded: transaction " + in.LatestCharge +
			` captured the money. Refund it instead: POST /v1/refunds with {"payment_intent": "` + in.IntentID + `"}.`}
}

// finishRefund records on the refund of cur's pending attempt the outcome t of its ledger transaction
// (nil: the attempt never reached the ledger, and the refund is canceled), in tx, the transaction that
// ends the operation. It returns the ledger transaction and the amount, for the change's record, and
// the change's event: payment_intent.refunded for a refund that returned money, else "".
func finishRefund(ctx context.Context, tx *store.Tx, cur Intent, t *payment.Transaction, now time.Time) (string, int64, string, error) {
	status, txID, reason := RefundCanceled, "", ""
	if t != nil {
		status, txID = RefundSucceeded, t.TransactionID
		if t.Status != payment.StatusApproved {
			status, reason = RefundFailed, t.DeclineCode
		}
	}
	var amount int64
	err := tx.QueryRowContext(ctx, `UPDATE refunds SET status = $3, transaction_id = $4, failure_reason = $5, updated_at = $6
		WHERE intent_id = $1 AND attempt = $2 AND status = 'pending' RETURNING amount`,
		cur.ID, cur.Attempts, status, nullable(txID), nullable(reason), now.UnixMilli()).Scan(&amount)
	if err != nil {
		return "", 0, "", err
	}
	if status == RefundSucceeded {
		return txID, amount, event.PaymentIntentRefunded, nil
	}
	return txID, amount, "", nil
}

// insertRefund records r, pending, for the intent of row id intentRow, under the request's
// idempotency key.
func insertRefund(ctx context.Context, tx *store.Tx, intentRow int64, r *Refund, key string) error {
	md, err := json.Marshal(r.Metadata)
	if err != nil {
		return err
	}
	return tx.QueryRowContext(ctx, `INSERT INTO refunds (refund_id, merchant_id, intent_id, attempt, amount, currency, reason, metadata,
		status, charge, idempotency_key, client_id, livemode, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14) RETURNING id`,
		r.RefundID, r.MerchantID, intentRow, r.Attempt, r.Amount, r.Currency.Code, nullable(r.Reason), string(md), r.Status,
		r.Charge, nullable(key), nullable(r.ClientID), r.Livemode, r.CreatedAt.UnixMilli()).Scan(&r.ID)
}

const refundColumns = `r.id, r.refund_id, r.merchant_id, p.intent_id, r.attempt, r.amount, r.currency, COALESCE(r.reason, ''), r.metadata,
	r.status, r.charge, COALESCE(r.transaction_id, ''), COALESCE(r.failure_reason, ''), COALESCE(r.client_id, ''), r.livemode, r.created_at`

// refundFrom is the FROM clause that goes with refundColumns.
const refundFrom = ` FROM refunds r JOIN payment_intents p ON p.id = r.intent_id `

func scanRefund(s interface{ Scan(...any) error }) (Refund, error) {
	var r Refund
	var metadata string
	var created int64
	err := s.Scan(&r.ID, &r.RefundID, &r.MerchantID, &r.IntentID, &r.Attempt, &r.Amount, &r.Currency.Code, &r.Reason, &metadata,
		&r.Status, &r.Charge, &r.TransactionID, &r.FailureReason, &r.ClientID, &r.Livemode, &created)
	if err != nil {
		return Refund{}, err
	}
	r.Currency, _ = money.Lookup(r.Currency.Code)
	r.CreatedAt = time.UnixMilli(created)
	return r, json.Unmarshal([]byte(metadata), &r.Metadata)
}

// refundByKey finds the merchant's refund made under an idempotency key since a time.
func refundByKey(ctx context.Context, q store.Querier, merchantID, key string, since time.Time) (Refund, bool, error) {
	r, err := scanRefund(q.QueryRowContext(ctx, `SELECT `+refundColumns+refundFrom+
		`WHERE r.merchant_id = $1 AND r.idempotency_key = $2 AND r.created_at > $3 ORDER BY r.id DESC LIMIT 1`,
		merchantID, key, since.UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return Refund{}, false, nil
	}
	return r, err == nil, err
}

// GetRefund returns one of who's refunds; another merchant's is not found. A refund still pending
// whose operation was left by a node presumed dead is settled first, as its intent is (Get).
func (s *Service) GetRefund(ctx context.Context, who Who, id string) (Refund, error) {
	read := func() (Refund, error) {
		var r Refund
		err := s.db.Read(ctx, func(q store.Querier) error {
			var err error
			r, err = scanRefund(q.QueryRowContext(ctx, `SELECT `+refundColumns+refundFrom+`WHERE r.merchant_id = $1 AND r.refund_id = $2`,
				who.Merchant.ID, id))
			return err
		})
		if errors.Is(err, sql.ErrNoRows) {
			return Refund{}, fault.NotFound("No refund %s.", clip(id))
		}
		return r, err
	}
	r, err := read()
	if err != nil || r.Status != RefundPending {
		return r, err
	}
	if _, err := s.Get(ctx, who, r.IntentID); err != nil {
		return Refund{}, err
	}
	return read()
}

var refundPages = pages{table: "refunds", idCol: "refund_id", rowID: "r.id", noun: "refunds"}

// ListRefunds returns a page of who's refunds, newest first, of one intent when intentID is not "",
// and whether there are more beyond it (as List).
func (s *Service) ListRefunds(ctx context.Context, who Who, intentID string, p ListParams) ([]Refund, bool, error) {
	where := `WHERE r.merchant_id = $1`
	args := []any{who.Merchant.ID}
	if intentID != "" {
		err := s.db.Read(ctx, func(q store.Querier) error {
			_, err := getIntent(ctx, q, who.Merchant.ID, intentID)
			return err
		})
		var f *fault.Error
		if errors.As(err, &f) && f.Status == http.StatusNotFound {
			return nil, false, fault.Invalid("payment_intent", "payment_intent must be the id of one of this account's payment intents; %s is not", clip(intentID))
		}
		if err != nil {
			return nil, false, err
		}
		args = append(args, intentID)
		where += ` AND p.intent_id = $2`
	}
	return readPage(ctx, s.db, refundPages, p, scanRefund, `SELECT `+refundColumns+refundFrom, where, args)
}

// WireRefund is a refund as the v1 API shows it.
type WireRefund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	PaymentIntent string            `json:"payment_intent"`
	Charge        string            `json:"charge"`      // the sale or capture refunded: the intent's latest_charge
	Transaction   *string           `json:"transaction"` // the ledger's REFUND
	Status        string            `json:"status"`
	FailureReason *string           `json:"failure_reason"`
	Reason        *string           `json:"reason"`
	Metadata      map[string]string `json:"metadata"`
	Created       int64             `json:"created"`
	Livemode      bool              `json:"livemode"`
}

// Wire renders r.
func (r Refund) Wire() WireRefund {
	w := WireRefund{ID: r.RefundID, Object: "refund", Amount: r.Amount, Currency: strings.ToLower(r.Currency.Code), PaymentIntent: r.IntentID,
		Charge: r.Charge, Transaction: orNull(r.TransactionID), Status: r.Status, FailureReason: orNull(r.FailureReason),
		Reason: orNull(r.Reason), Metadata: r.Metadata, Created: r.CreatedAt.Unix(), Livemode: r.Livemode}
	if w.Metadata == nil {
		w.Metadata = map[string]string{}
	}
	return w
}

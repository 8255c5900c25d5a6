package checkout

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// Statuses of a payment intent, as the industry standard the spec descends from names them
// (wire-contract.md, "Hosted payment page (v1)"):
//
//	requires_payment_method --create with a payment method, update one in--> requires_confirmation
//	requires_payment_method, requires_confirmation --confirm--> processing --> the outcome:
//	    approved, capture_method automatic -> succeeded
//	    approved, capture_method manual    -> requires_capture
//	    declined                           -> requires_payment_method, with last_payment_error
//	    interactive (the hosted page), and the card requires a 3-D Secure challenge:
//	                                          requires_action, nothing charged
//	requires_action --complete the challenge (passed or failed)--> processing --> the outcome, as above
//	    (a failed challenge is declined: requires_payment_method, last_payment_error authentication_failed)
//	requires_action --ChallengeLifetime without an answer--> requires_payment_method (authentication_required)
//	requires_capture --capture--> succeeded
//	requires_payment_method, requires_confirmation, requires_action, requires_capture --cancel--> canceled
//	succeeded --refund (POST /v1/refunds)--> succeeded, amount_refunded grown
//
// succeeded and canceled are final: a refund changes a succeeded intent's amount_refunded, not its
// status. processing lasts while an operation is pending; requires_action
// holds no pending operation and no money, only the attached payment method's sealed number.
const (
	StatusRequiresPaymentMethod = "requires_payment_method"
	StatusRequiresConfirmation  = "requires_confirmation"
	StatusRequiresAction        = "requires_action"
	StatusProcessing            = "processing"
	StatusRequiresCapture       = "requires_capture"
	StatusSucceeded             = "succeeded"
	StatusCanceled              = "canceled"
)

// Statuses are the statuses of a payment intent, in the order of its life.
var Statuses = []string{StatusRequiresPaymentMethod, StatusRequiresConfirmation, StatusRequiresAction, StatusProcessing,
	StatusRequiresCapture, StatusSucceeded, StatusCanceled}

// Capture methods.
const (
	CaptureAutomatic = "automatic"
	CaptureManual    = "manual"
)

// Operations that run on an intent with a ledger transaction; one at a time.
const (
	opConfirm   = "confirm"
	opChallenge = "challenge" // the charge after a 3-D Secure challenge (CompleteChallenge)
	opCapture   = "capture"
	opCancel    = "cancel"
	opRefund    = "refund" // a refund of the money captured (refund.go)
)

// Intent is a payment intent.
type Intent struct {
	ID               int64 // row id: the list's order
	IntentID         string
	MerchantID       string
	Status           string
	Amount           int64 // minor units of Currency
	Currency         money.Currency
	CaptureMethod    string
	AmountCapturable int64
	AmountReceived   int64
	// AmountRefunded is what the ledger's approved refunds of the charge have returned, whichever API
	// made them; read, never written.
	AmountRefunded            int64
	Description               string
	ReceiptEmail              string
	StatementDescriptorSuffix string
	Metadata                  map[string]string
	PaymentMethod             string
	LastError                 *PaymentError
	// ChargeID is the ledger row of the latest sale or authorization, and once an authorization is
	// captured, of its capture: the transaction that captured the money, which refunds act on.
	ChargeID           int64
	LatestCharge       string // its transaction_id
	CanceledAt         time.Time
	CancellationReason string
	Attempts           int    // money operations begun; the last one's ledger key is attemptKey(Attempts)
	PendingOp          string // the operation running, or ""
	// OpRequest is the operation last claimed with an Idempotency-Key and that key, "op credential/key"
	// (opRequest), or "".
	OpRequest  string
	LeaseUntil time.Time
	ClientID   string
	Livemode   bool // created while the merchant's payments went to a live processor account
	CreatedAt  time.Time
	UpdatedAt  time.Time

	// Limit is the velocity limit that declined the confirmation just made without asking the
	// processor, for the response's rate-limit headers; nil otherwise. It is not stored.
	Limit *fault.RateLimit
}

// PaymentError is why the latest attempt failed: last_payment_error.
type PaymentError struct {
	Code        string `json:"code"`
	DeclineCode string `json:"decline_code"`
	Message     string `json:"message"`
}

// Who is what an operation on intents acts for and who asks: the merchant, the API key (or, for the
// hosted page, its session), and the request.
type Who struct {
	Merchant  merchant.Merchant
	ClientID  string
	RequestID string
	// Principal is the credential whose declines the payments count against: the API key, or for the
	// hosted page the key that created its session.
	Principal httpapi.Principal
}

// actor is who the ledger records.
func (w Who) actor() payment.Actor {
	return payment.Actor{MerchantID: w.Merchant.ID, ClientID: w.ClientID, RequestID: w.RequestID, Profile: w.Merchant.SimulatorProfile, Location: w.Merchant.Location(),
		Principal: w.Principal, Velocity: w.Merchant.Velocity}
}

// attemptKey is the ledger idempotency key of an intent's nth money operation. It contains spaces,
// which an Idempotency-Key header may not (idempotency.validKey), so no API client can take it.
func attemptKey(intentID string, n int) string {
	return intentID + " attempt " + strconv.Itoa(n)
}

// AttemptKeys are the ledger idempotency keys of the intent's money operations begun, oldest first:
// each finds its ledger transaction (payment.Ledger.ByKey).
func (in Intent) AttemptKeys() []string {
	keys := make([]string, in.Attempts)
	for i := range keys {
		keys[i] = attemptKey(in.IntentID, i+1)
	}
	return keys
}

// intentColumns are the columns of an Intent, in scan order. amount_refunded is the sum of the
// approved refunds of the intent's charge in the ledger (the index transactions_parent finds them).
const intentColumns = `id, intent_id, merchant_id, status, amount, currency, capture_method, amount_capturable, amount_received,
	(SELECT CAST(COALESCE(SUM(r.amount), 0) AS BIGINT) FROM transactions r WHERE r.parent_id = payment_intents.charge_id
		AND r.kind = 'REFUND' AND r.status = 'APPROVED'),
	COALESCE(description, ''), COALESCE(receipt_email, ''), COALESCE(statement_descriptor_suffix, ''), metadata,
	COALESCE(payment_method, ''), COALESCE(last_error_code, ''), COALESCE(last_error_decline_code, ''),
	COALESCE(last_error_message, ''), COALESCE(charge_id, 0), COALESCE(latest_charge, ''), COALESCE(canceled_at, 0),
	COALESCE(cancellation_reason, ''), attempts, COALESCE(pending_op, ''), COALESCE(lease_until, 0), COALESCE(client_id, ''),
	livemode, created_at, updated_at, COALESCE(op_request, '')`

func scanIntent(s interface{ Scan(...any) error }) (Intent, error) {
	var in Intent
	var metadata string
	var errCode, errDecline, errMessage string
	var canceled, lease, created, updated int64
	err := s.Scan(&in.ID, &in.IntentID, &in.MerchantID, &in.Status, &in.Amount, &in.Currency.Code, &in.CaptureMethod,
		&in.AmountCapturable, &in.AmountReceived, &in.AmountRefunded, &in.Description, &in.ReceiptEmail, &in.StatementDescriptorSuffix, &metadata,
		&in.PaymentMethod, &errCode, &errDecline, &errMessage, &in.ChargeID, &in.LatestCharge, &canceled,
		&in.CancellationReason, &in.Attempts, &in.PendingOp, &lease, &in.ClientID, &in.Livemode, &created, &updated, &in.OpRequest)
	if err != nil {
		return Intent{}, err
	}
	in.Currency, _ = money.Lookup(in.Currency.Code)
	if errCode != "" {
		in.LastError = &PaymentError{Code: errCode, DeclineCode: errDecline, Message: errMessage}
	}
	if canceled != 0 {
		in.CanceledAt = time.UnixMilli(canceled)
	}
	if lease != 0 {
		in.LeaseUntil = time.UnixMilli(lease)
	}
	in.CreatedAt, in.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return in, json.Unmarshal([]byte(metadata), &in.Metadata)
}

// getIntent reads one of the merchant's intents. Another merchant's is not found.
func getIntent(ctx context.Context, q store.Querier, merchantID, id string) (Intent, error) {
	in, err := scanIntent(q.QueryRowContext(ctx, `SELECT `+intentColumns+` FROM payment_intents WHERE merchant_id = $1 AND intent_id = $2`,
		merchantID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Intent{}, fault.NotFound("No payment intent %s.", clip(id))
	}
	return in, err
}

// clip shortens an id taken from a request for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// queryIntents reads the intents that a WHERE clause (with its ORDER BY and LIMIT) selects.
func queryIntents(ctx context.Context, q store.Querier, where string, args ...any) ([]Intent, error) {
	return queryAll(ctx, q, scanIntent, `SELECT `+intentColumns+` FROM payment_intents `+where, args...)
}

// queryAll reads every row of a query with scan.
func queryAll[T any](ctx context.Context, q store.Querier, scan func(interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// stale reports whether an operation was left running by a node presumed dead.
func (in Intent) stale(now time.Time) bool {
	return in.PendingOp != "" && !now.Before(in.LeaseUntil)
}

// WireIntent is a payment intent as the v1 API shows it.
type WireIntent struct {
	ID                        string            `json:"id"`
	Object                    string            `json:"object"`
	Amount                    int64             `json:"amount"`
	AmountCapturable          int64             `json:"amount_capturable"`
	AmountReceived            int64             `json:"amount_received"`
	AmountRefunded            int64             `json:"amount_refunded"`
	Currency                  string            `json:"currency"`
	Status                    string            `json:"status"`
	CaptureMethod             string            `json:"capture_method"`
	Created                   int64             `json:"created"`
	Description               *string           `json:"description"`
	Metadata                  map[string]string `json:"metadata"`
	PaymentMethod             *string           `json:"payment_method"`
	PaymentMethodTypes        []string          `json:"payment_method_types"`
	ReceiptEmail              *string           `json:"receipt_email"`
	StatementDescriptorSuffix *string           `json:"statement_descriptor_suffix"`
	LastPaymentError          *PaymentError     `json:"last_payment_error"`
	CanceledAt                *int64            `json:"canceled_at"`
	CancellationReason        *string           `json:"cancellation_reason"`
	LatestCharge              *string           `json:"latest_charge"`
	NextAction                *NextAction       `json:"next_action"`
	Livemode                  bool              `json:"livemode"`
}

// NextAction is what an intent in requires_action waits for: next_action, null in every other status.
type NextAction struct {
	// Type is NextActionUseHostedPage: the cardholder completes the 3-D Secure challenge on the hosted
	// page that confirmed the intent; the merchant's server waits for the page's result (or cancels).
	Type string `json:"type"`
}

// NextActionUseHostedPage is the type of next_action of an intent waiting for a 3-D Secure challenge.
const NextActionUseHostedPage = "use_hosted_page"

// Wire renders in.
func (in Intent) Wire() WireIntent {
	w := WireIntent{ID: in.IntentID, Object: "payment_intent", Amount: in.Amount, AmountCapturable: in.AmountCapturable,
		AmountReceived: in.AmountReceived, AmountRefunded: in.AmountRefunded, Currency: strings.ToLower(in.Currency.Code), Status: in.Status,
		CaptureMethod: in.CaptureMethod, Created: in.CreatedAt.Unix(), Description: orNull(in.Description),
		Metadata: in.Metadata, PaymentMethod: orNull(in.PaymentMethod), PaymentMethodTypes: []string{"card"},
		ReceiptEmail: orNull(in.ReceiptEmail), StatementDescriptorSuffix: orNull(in.StatementDescriptorSuffix),
		LastPaymentError: in.LastError, CancellationReason: orNull(in.CancellationReason), LatestCharge: orNull(in.LatestCharge),
		Livemode: in.Livemode}
	if w.Metadata == nil {
		w.Metadata = map[string]string{}
	}
	if !in.CanceledAt.IsZero() {
		s := in.CanceledAt.Unix()
		w.CanceledAt = &s
	}
	if in.Status == StatusRequiresAction {
		w.NextAction = &NextAction{Type: NextActionUseHostedPage}
	}
	return w
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Package processor is the boundary between Kassa's payments core and the acquirers that move the
// money. A Processor authorizes (and for a sale, captures) a card payment, captures, refunds and voids,
// and answers what became of an operation whose outcome Kassa did not record. The simulator
// sub-package is built in; connectors to real acquirers implement the same interface and pass the
// same conformance suite (processortest).
package processor

import (
	"context"
	"errors"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/money"
)

// Processor moves money. Every call carries Kassa's reference for the operation (its transaction_id),
// on which the processor deduplicates and by which Lookup finds it.
//
// A call that returns an error has an unknown outcome: the payments core keeps the attempt pending and
// resolves it later with Lookup. A decline is not an error: it is a Result with Approved false.
type Processor interface {
	// Authorize places a hold for p.Amount, or with p.Capture charges it at once (a sale). An amount
	// of zero verifies the card without a hold.
	Authorize(ctx context.Context, p Payment) (Result, error)
	// Capture collects f.Amount of the authorization f.Original.
	Capture(ctx context.Context, f FollowUp) (Result, error)
	// Refund returns f.Amount of the sale or capture f.Original.
	Refund(ctx context.Context, f FollowUp) (Result, error)
	// Void releases the authorization f.Original.
	Void(ctx context.Context, f FollowUp) (Result, error)
	// Lookup reports the outcome of the operation op, sent earlier, whose answer Kassa did not record:
	// its Result, ErrNotFound when the processor never received it, or an *Unanswered error when the
	// processor cannot ask and undoes it instead (ISO 8583 has no enquiry message).
	Lookup(ctx context.Context, op Operation) (Result, error)
}

// Operation names an operation sent earlier, for Lookup.
type Operation struct {
	Reference string // Kassa's reference (the transaction_id)
	Merchant  Merchant
	Kind      string // what it was: OperationSale, OperationAuthorization, OperationCapture, …
	Amount    int64
	Currency  money.Currency
	Trace     string // what Prepare answered for it; "" when the processor is not a Preparer
}

// Kinds of operation, for Operation.Kind.
const (
	OperationSale          = "sale"
	OperationAuthorization = "authorization"
	OperationCapture       = "capture"
	OperationRefund        = "refund"
	OperationVoid          = "void"
)

// Preparer is implemented by a processor that must be able to refer to an operation whose answer
// never came, without asking the acquirer about it (ISO 8583: a reversal names the original by its
// STAN and transmission time). Before each call the payments core asks for the trace of the coming
// operation, records it with the attempt in the same write, and hands it back in Payment.Trace,
// FollowUp.Trace and Operation.Trace. Prepare must be cheap: it runs on every payment. It may write to
// the database (the ISO 8583 connector reserves its numbers by blocks): the payments core calls it
// before, never inside, the write that records the attempt.
type Preparer interface {
	Prepare(ctx context.Context, m Merchant) (string, error)
}

// Unanswered is the error of a call that got no answer and that the processor undoes by a reversal
// (ISO 8583's 0400) rather than by asking what became of it. The payments core records Reversal in
// the same database transaction that marks the attempt as unanswered, then has it sent with
// Reverser.Reverse until the acquirer acknowledges it; the operation is then declined
// CodeProcessingError. The processor must be a Reverser.
type Unanswered struct {
	// Reversal is the processor's own description of the reversal (opaque to the core): what it
	// references and what it is sent as, fixed once so that every sending is a retransmission.
	Reversal string
	// Completes is true when what Reversal sends carries the operation itself through rather than
	// undoing it: a void, which is itself a reversal of its authorization, is repeated until answered.
	// Acknowledged, the operation is then approved.
	Completes bool
	Err       error // why there was no answer
}

func (u *Unanswered) Error() string { return "processor: no answer, to be reversed: " + u.Err.Error() }
func (u *Unanswered) Unwrap() error { return u.Err }

// Reverser sends the reversals that its Unanswered errors describe.
type Reverser interface {
	// Reverse sends reversal (an Unanswered.Reversal) for merchant m, as a retransmission when it was
	// sent before, and returns nil once the acquirer has acknowledged that the original is not in
	// effect (undone, or never received). An error means no acknowledgement yet: send it again later.
	Reverse(ctx context.Context, m Merchant, reversal string) error
}

// Kind is a kind of processor a merchant can be connected to ("simulator", "iso8583", "stripe"): it
// validates an account's configuration and opens the processor it configures. Accounts of one kind
// may share what they hold (the connection to an ISO 8583 host shared by its merchants).
type Kind interface {
	// Name is the kind's name, as `kassa merchant update --processor` takes it.
	Name() string
	// Parse validates a configuration (JSON) and returns what of it may be shown. An error names the
	// field at fault; it never quotes a secret.
	Parse(config []byte) (Settings, error)
	// Open returns the processor of an account configured by config, which Parse accepted.
	Open(config []byte) (Processor, error)
}

// Settings is what an account's configuration says that may be shown: never a secret.
type Settings struct {
	// Test is true for a test account (a sandbox, a test key): nothing it takes moves money, and
	// its transactions say test_mode true.
	Test bool
	// Fields are the configuration's non-secret fields, by their JSON names.
	Fields map[string]string
}

// Account is a merchant's connection to a processor: its kind and configuration, fixed once
// created (a merchant that changes processor gets a new account, and the transactions of the old one
// keep going to it). The built-in simulator's account has the ID "".
type Account struct {
	ID        string
	Kind      string
	Test      bool
	Processor Processor
}

// Authenticator is implemented by a processor that runs 3-D Secure (EMV 3DS): before a payment is
// authorized, it says whether the card's issuer requires the cardholder to pass a challenge. The
// payments core asks only when the cardholder is there to be challenged (the hosted page); a payment
// that needs no challenge, or whose caller cannot show one, goes straight to Authorize.
//
// The rules every Authenticator follows in Authorize:
//   - a payment whose Authentication is AuthenticationFailed is declined with CodeAuthenticationFailed,
//     whatever the card;
//   - a payment of a card for which ChallengeRequired answers true, arriving without
//     AuthenticationSucceeded, is declined with CodeAuthenticationRequired (a soft decline: the same
//     card may pass once authenticated) — unless it is a mail or telephone order (MailOrder), which
//     is outside 3-D Secure: the cardholder is not there to be challenged;
//   - a payment with AuthenticationSucceeded is decided as any other.
type Authenticator interface {
	// ChallengeRequired reports whether p's cardholder must pass the issuer's challenge before p is
	// authorized. p.Reference is empty and p.Authentication none: nothing is authorized yet. An error
	// is an unknown answer, never a decision.
	ChallengeRequired(ctx context.Context, p Payment) (bool, error)
}

// ErrNotFound is Lookup's answer for an operation the processor never received.
var ErrNotFound = errors.New("processor: operation not found")

// Payment is a card payment to authorize.
type Payment struct {
	Reference string
	Merchant  Merchant
	Amount    int64 // minor units of Currency
	Currency  money.Currency
	Capture   bool // capture at once: a sale
	Card      card.Number
	Expiry    card.Expiry
	CVV       string // never stored; may be empty for a stored card
	// Authentication is the outcome of the cardholder's 3-D Secure challenge, when one was run (see
	// Authenticator): AuthenticationNone, AuthenticationSucceeded or AuthenticationFailed.
	Authentication string
	// StoredCard is true when the card comes from Kassa's vault rather than from the cardholder now
	// (card on file); Recurring when the payment is a subscription's scheduled charge (always of a
	// stored card, without the cardholder).
	StoredCard bool
	Recurring  bool
	// MailOrder is true for a mail or telephone order: the card was read out to the merchant's staff,
	// who typed it at the dashboard's virtual terminal (ISO 8583's POS condition 08, Stripe's MOTO).
	// It is never authenticated by 3-D Secure.
	MailOrder bool
	Trace     string // what Prepare answered for this operation; "" when the processor is not a Preparer
}

// Outcomes of cardholder authentication (3-D Secure), for Payment.Authentication.
const (
	// AuthenticationNone: no challenge was run.
	AuthenticationNone = ""
	// AuthenticationSucceeded: the cardholder passed the issuer's challenge.
	AuthenticationSucceeded = "succeeded"
	// AuthenticationFailed: the cardholder failed (or refused) the issuer's challenge; the payment is
	// declined with CodeAuthenticationFailed.
	AuthenticationFailed = "failed"
)

// FollowUp is an operation on an earlier one: a capture, refund or void.
type FollowUp struct {
	Reference    string
	Merchant     Merchant
	Original     string // the processor's reference of the operation acted on
	Amount       int64
	Currency     money.Currency
	AuthorizedAt time.Time // when the original authorization was placed
	Trace        string    // what Prepare answered for this operation; "" when the processor is not a Preparer
}

// Merchant is what a processor needs to know of the merchant.
type Merchant struct {
	ID string
	// SimulatorProfile selects the simulator's decision rule: "standard" or "payfirma".
	SimulatorProfile string
	// Location is the merchant's time zone (its timezone setting), for processors that send the
	// merchant's local time (ISO 8583 fields 12 and 13); nil is UTC.
	Location *time.Location
}

// Result is a processor's answer.
type Result struct {
	Approved  bool
	Code      string // why it was declined, snake_case (e.g. insufficient_funds); "" when approved
	Message   string // human text: "Approved", "Insufficient funds", "Expired card", …
	Reference string // the processor's reference of this operation
}

// Decline codes every processor maps its answers to.
const (
	CodeDeclined             = "card_declined"
	CodeInsufficientFunds    = "insufficient_funds"
	CodeLostCard             = "lost_card"
	CodeStolenCard           = "stolen_card"
	CodeExpiredCard          = "expired_card"
	CodeIncorrectCVC         = "incorrect_cvc"
	CodeProcessingError      = "processing_error"
	CodeAuthorizationExpired = "authorization_expired"
	// CodeAuthenticationRequired: the issuer requires 3-D Secure and the payment came without a
	// successful authentication.
	CodeAuthenticationRequired = "authentication_required"
	// CodeAuthenticationFailed: the cardholder failed the 3-D Secure challenge.
	CodeAuthenticationFailed = "authentication_failed"
)

// Messages are the human texts of the decline codes, as the simulator says them: what a processor
// that answers with a code alone says, and what the dashboard shows beside a code.
var Messages = map[string]string{
	CodeDeclined:               "Declined",
	CodeInsufficientFunds:      "Insufficient funds",
	CodeLostCard:               "Lost card",
	CodeStolenCard:             "Stolen card",
	CodeExpiredCard:            "Expired card",
	CodeIncorrectCVC:           "Incorrect CVC",
	CodeProcessingError:        "Processing error",
	CodeAuthorizationExpired:   "Authorization expired",
	CodeAuthenticationRequired: "Authentication required",
	CodeAuthenticationFailed:   "Authentication failed",
}

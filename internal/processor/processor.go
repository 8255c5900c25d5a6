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
	// Lookup reports the outcome of the operation with Kassa's reference ref, or ErrNotFound when the
	// processor never received it.
	Lookup(ctx context.Context, ref string) (Result, error)
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
//     card may pass once authenticated);
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
}

// Merchant is what a processor needs to know of the merchant.
type Merchant struct {
	ID string
	// SimulatorProfile selects the simulator's decision rule: "standard" or "payfirma".
	SimulatorProfile string
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

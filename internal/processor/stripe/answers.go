package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	stripego "github.com/stripe/stripe-go/v86"

	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
)

// codes maps Stripe's decline codes and error codes (https://docs.stripe.com/declines/codes,
// https://docs.stripe.com/error-codes) to Kassa's. A card error with a code not listed is
// card_declined: approve_with_id, call_issuer, card_not_supported, currency_not_supported,
// do_not_honor, do_not_try_again, duplicate_transaction, fraudulent (Stripe: "present as you would
// the generic_decline"), generic_decline, incorrect_number, incorrect_pin, incorrect_zip,
// invalid_account, invalid_amount, invalid_number, invalid_pin, merchant_blacklist,
// new_account_information_available, no_action_taken, not_permitted, offline_pin_required,
// online_or_offline_pin_required, pickup_card, pin_try_exceeded, restricted_card,
// revocation_of_all_authorizations, revocation_of_authorization, security_violation,
// service_not_allowed, stop_payment_order, testmode_decline, transaction_not_allowed.
var codes = map[string]string{
	"insufficient_funds": processor.CodeInsufficientFunds,
	// "The customer has exceeded the balance, credit limit, or transaction amount limit available on
	// their card."
	"card_velocity_exceeded": processor.CodeInsufficientFunds,
	// "The customer has exceeded the balance or credit limit available on their card."
	"withdrawal_count_limit_exceeded": processor.CodeInsufficientFunds,
	"lost_card":                       processor.CodeLostCard,
	"stolen_card":                     processor.CodeStolenCard,
	"expired_card":                    processor.CodeExpiredCard,
	// A PaymentMethod is refused an expiry date in the past with these.
	"invalid_expiry_month": processor.CodeExpiredCard,
	"invalid_expiry_year":  processor.CodeExpiredCard,
	"incorrect_cvc":        processor.CodeIncorrectCVC,
	"invalid_cvc":          processor.CodeIncorrectCVC,
	"processing_error":     processor.CodeProcessingError,
	// The issuer could not be reached or asks for the payment again: the card is not at fault.
	"issuer_not_available":    processor.CodeProcessingError,
	"try_again_later":         processor.CodeProcessingError,
	"reenter_transaction":     processor.CodeProcessingError,
	"authentication_required": processor.CodeAuthenticationRequired,
	// A capture of an authorization whose hold has lapsed.
	"charge_expired_for_capture":           processor.CodeAuthorizationExpired,
	"capture_charge_authorization_expired": processor.CodeAuthorizationExpired,
}

func approved(ref string) processor.Result {
	return processor.Result{Approved: true, Message: "Approved", Reference: ref}
}

func declined(ref, code string) processor.Result {
	return processor.Result{Code: code, Message: processor.Messages[code], Reference: ref}
}

// declineCode is Kassa's code for a Stripe error that is a decline: the issuer's decline_code when
// Kassa knows it, else Stripe's code; a card error otherwise card_declined, and any other refusal
// processing_error (the request was refused, which says nothing about the card).
func declineCode(e *stripego.Error) string {
	if c, ok := codes[string(e.DeclineCode)]; ok {
		return c
	}
	if c, ok := codes[string(e.Code)]; ok {
		return c
	}
	if e.Type == stripego.ErrorTypeCard {
		return processor.CodeDeclined
	}
	return processor.CodeProcessingError
}

// failed turns the error of a call that changes something into Kassa's answer. A card error is a
// decline. A call that got no answer, a 5xx, a 429 (Stripe's rate limit, or a lock on the object), a
// 409 (the same key is still being worked on) or an idempotency_error (the key was used before for
// other parameters, so what became of that first request is not this answer) has an unknown outcome:
// an error, which the payments core resolves later with Lookup. Any other refusal (400, 401, 402,
// 403, 404) is Stripe declining to do anything: processing_error, and a warning in the log, since it
// is usually the account's configuration (raw card data not enabled, a revoked key).
//
// Neither the error nor the log quotes Stripe's message: a message names what was wrong with the
// request, and the request held the card.
func (p *Processor) failed(ctx context.Context, call, ref string, err error) (processor.Result, error) {
	var se *stripego.Error
	if !errors.As(err, &se) {
		return processor.Result{}, fmt.Errorf("stripe: %s %s: %w", call, ref, err)
	}
	switch status := se.HTTPStatusCode; {
	case status >= 500, status == http.StatusTooManyRequests, status == http.StatusConflict, se.Type == stripego.ErrorTypeIdempotency:
		return processor.Result{}, unknown(call, ref, se)
	case se.Type == stripego.ErrorTypeCard:
		code := declineCode(se)
		p.log.DebugContext(ctx, "stripe declined", "call", call, "reference", ref, "code", se.Code, "decline_code", se.DeclineCode,
			"kassa_code", code, "request_id", se.RequestID)
		return declined(intentID(se), code), nil
	default:
		p.log.WarnContext(ctx, "stripe refused a request", "call", call, "reference", ref, "status", status, "type", se.Type,
			"code", se.Code, "param", se.Param, "request_id", se.RequestID)
		return declined(intentID(se), declineCode(se)), nil
	}
}

// unknown is the error of a call whose outcome Stripe did not give, without Stripe's message.
func unknown(call, ref string, se *stripego.Error) error {
	return fmt.Errorf("stripe: %s %s: HTTP %d %s %s (request %s)", call, ref, se.HTTPStatusCode, se.Type, se.Code, se.RequestID)
}

// lookupFailed is the error of a call Lookup made: whatever it is, the outcome stays unknown.
func lookupFailed(call, ref string, err error) error {
	var se *stripego.Error
	if errors.As(err, &se) {
		return unknown(call, ref, se)
	}
	return fmt.Errorf("stripe: %s %s: %w", call, ref, err)
}

// intentID is the PaymentIntent or SetupIntent a declined call made or acted on, or "".
func intentID(e *stripego.Error) string {
	switch {
	case e.PaymentIntent != nil:
		return e.PaymentIntent.ID
	case e.SetupIntent != nil:
		return e.SetupIntent.ID
	}
	return ""
}

// paymentIntentResult is the outcome of a PaymentIntent that was created and confirmed: approved
// once it succeeded or holds the amount; declined authentication_required when the issuer asks for 3-D
// Secure (requires_action: Kassa cannot show the challenge of a Stripe payment); declined as its last
// error says when it went back to requires_payment_method. One still processing, or not yet
// confirmed, has no outcome yet.
func paymentIntentResult(pi *stripego.PaymentIntent) (processor.Result, error) {
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded, stripego.PaymentIntentStatusRequiresCapture:
		return approved(pi.ID), nil
	case stripego.PaymentIntentStatusRequiresAction:
		return declined(pi.ID, processor.CodeAuthenticationRequired), nil
	case stripego.PaymentIntentStatusCanceled:
		// Canceled since (Lookup of an old authorization): it held the amount if it was charged
		// without a failure.
		if pi.LastPaymentError == nil && pi.LatestCharge != nil {
			return approved(pi.ID), nil
		}
		return declined(pi.ID, lastErrorCode(pi.LastPaymentError)), nil
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		if pi.LastPaymentError != nil {
			return declined(pi.ID, declineCode(pi.LastPaymentError)), nil
		}
	}
	return processor.Result{}, fmt.Errorf("stripe: PaymentIntent %s is %s: no outcome yet", pi.ID, pi.Status)
}

// setupIntentResult is the outcome of a card verification, as paymentIntentResult's.
func setupIntentResult(si *stripego.SetupIntent) (processor.Result, error) {
	switch si.Status {
	case stripego.SetupIntentStatusSucceeded:
		return approved(si.ID), nil
	case stripego.SetupIntentStatusRequiresAction:
		return declined(si.ID, processor.CodeAuthenticationRequired), nil
	case stripego.SetupIntentStatusCanceled:
		return declined(si.ID, lastErrorCode(si.LastSetupError)), nil
	case stripego.SetupIntentStatusRequiresPaymentMethod:
		if si.LastSetupError != nil {
			return declined(si.ID, declineCode(si.LastSetupError)), nil
		}
	}
	return processor.Result{}, fmt.Errorf("stripe: SetupIntent %s is %s: no outcome yet", si.ID, si.Status)
}

func lastErrorCode(e *stripego.Error) string {
	if e == nil {
		return processor.CodeDeclined
	}
	return declineCode(e)
}

// refundResult is the outcome of a refund Stripe took: approved, also while it is pending (the
// money goes back unless the card network refuses it later, which Stripe reports as refund.failed);
// declined once it failed or was canceled.
func refundResult(r *stripego.Refund) processor.Result {
	if r.Status == stripego.RefundStatusFailed || r.Status == stripego.RefundStatusCanceled {
		return declined(r.ID, processor.CodeProcessingError)
	}
	return approved(r.ID)
}

// stripeDigits are the currencies whose amounts Stripe counts in another minor unit than ISO 4217
// (https://docs.stripe.com/currencies#special-cases): "ISK will remain a two-decimal currency in the
// Stripe API"; MGA is among Stripe's zero-decimal currencies.
var stripeDigits = map[string]int{"ISK": 2, "MGA": 0}

// stripeAmount is an amount in minor units of c as Stripe counts it, or false when Stripe cannot
// represent it (a fraction of an ariary).
func stripeAmount(amount int64, c money.Currency) (int64, bool) {
	d, ok := stripeDigits[c.Code]
	if !ok {
		return amount, true
	}
	for ; d > c.Digits; d-- {
		amount *= 10
	}
	for ; d < c.Digits; d++ {
		if amount%10 != 0 {
			return 0, false
		}
		amount /= 10
	}
	return amount, true
}

package stripe

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v86"

	"github.com/kassapay/kassa/internal/processor"
)

// Processor is one Stripe account's connection: it carries out the account's payments.
type Processor struct {
	api    *stripego.Client
	log    *slog.Logger
	now    func() time.Time
	settle time.Duration
}

var (
	_ processor.Processor = (*Processor)(nil)
	_ processor.Preparer  = (*Processor)(nil)
)

// metadataKey is the metadata entry of a PaymentIntent, SetupIntent or Refund that holds Kassa's
// reference for it, so that it can be found (PaymentIntent search) and read in Stripe's dashboard.
const metadataKey = "kassa_reference"

// paymentMethodKey is the Idempotency-Key of the PaymentMethod made for the payment ref: a key names
// one endpoint's request at Stripe, so the PaymentMethod's cannot be the PaymentIntent's own.
func paymentMethodKey(ref string) string { return ref + "/payment_method" }

// Prepare answers the time, in Unix seconds, at which the coming operation is sent: Lookup lists
// what Stripe recorded around it (see Lookup).
func (p *Processor) Prepare(ctx context.Context, m processor.Merchant) (string, error) {
	return strconv.FormatInt(p.now().Unix(), 10), nil
}

// Authorize charges the card (a sale, pay.Capture) or places a hold on it: a PaymentIntent created and confirmed
// at once, capture_method automatic for a sale and manual for an authorization. A zero amount
// verifies the card with a SetupIntent instead: Stripe has no PaymentIntent of zero.
//
// The card goes to Stripe as a PaymentMethod made from its raw data (POST /v1/payment_methods) in a
// call of its own: payment_method_data has no card in Stripe's published API. A stored card's or a
// subscription's payment is marked off_session, as Stripe documents for a payment made while the
// customer is not there to authenticate (a merchant-initiated transaction).
func (p *Processor) Authorize(ctx context.Context, pay processor.Payment) (processor.Result, error) {
	amount, ok := stripeAmount(pay.Amount, pay.Currency)
	if !ok {
		return declined("", processor.CodeProcessingError), nil
	}
	card := &stripego.PaymentMethodCreateCardParams{
		Number:   stripego.String(pay.Card.Digits()),
		ExpMonth: stripego.Int64(int64(pay.Expiry.Month)),
		ExpYear:  stripego.Int64(int64(pay.Expiry.Year)),
	}
	if pay.CVV != "" {
		card.CVC = stripego.String(pay.CVV)
	}
	pm, err := p.api.V1PaymentMethods.Create(ctx, &stripego.PaymentMethodCreateParams{
		Params: stripego.Params{IdempotencyKey: stripego.String(paymentMethodKey(pay.Reference))},
		Type:   stripego.String("card"),
		Card:   card,
	})
	if err != nil {
		return p.failed(ctx, "payment method", pay.Reference, err)
	}
	cardOnly := []*string{stripego.String("card")}
	metadata := map[string]string{metadataKey: pay.Reference}
	if pay.Amount == 0 {
		// A PaymentIntent's amount: "The minimum amount is $0.50 US or equivalent in charge
		// currency." A SetupIntent checks the card without charging it.
		si, err := p.api.V1SetupIntents.Create(ctx, &stripego.SetupIntentCreateParams{
			Params:             stripego.Params{IdempotencyKey: stripego.String(pay.Reference)},
			Confirm:            stripego.Bool(true),
			PaymentMethod:      stripego.String(pm.ID),
			PaymentMethodTypes: cardOnly,
			Metadata:           metadata,
		})
		if err != nil {
			return p.failed(ctx, "setup intent", pay.Reference, err)
		}
		return setupIntentResult(si)
	}
	params := &stripego.PaymentIntentCreateParams{
		Params:             stripego.Params{IdempotencyKey: stripego.String(pay.Reference)},
		Amount:             stripego.Int64(amount),
		Currency:           stripego.String(strings.ToLower(pay.Currency.Code)),
		CaptureMethod:      stripego.String(string(stripego.PaymentIntentCaptureMethodManual)),
		Confirm:            stripego.Bool(true),
		PaymentMethod:      stripego.String(pm.ID),
		PaymentMethodTypes: cardOnly,
		Metadata:           metadata,
	}
	if pay.Capture {
		params.CaptureMethod = stripego.String(string(stripego.PaymentIntentCaptureMethodAutomatic))
	}
	if pay.StoredCard || pay.Recurring {
		// Stripe: off_session "indicate[s] that the customer isn't in your checkout flow during this
		// payment attempt and can't authenticate", as for a charge of a card on file.
		params.OffSession = stripego.Bool(true)
	}
	if pay.MailOrder {
		// Stripe: moto "indicates that a transaction will be marked as MOTO (Mail Order Telephone
		// Order) and thus out of scope for SCA"; it may be given only when confirming, as here.
		params.PaymentMethodOptions = &stripego.PaymentIntentCreatePaymentMethodOptionsParams{
			Card: &stripego.PaymentIntentCreatePaymentMethodOptionsCardParams{MOTO: stripego.Bool(true)}}
	}
	pi, err := p.api.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return p.failed(ctx, "payment intent", pay.Reference, err)
	}
	return paymentIntentResult(pi)
}

// Capture captures f.Amount of the PaymentIntent f.Original. An authorization that is no longer in
// effect (Stripe cancels an uncaptured PaymentIntent when its hold lapses) is declined
// authorization_expired.
func (p *Processor) Capture(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	amount, ok := stripeAmount(f.Amount, f.Currency)
	if !ok {
		return declined("", processor.CodeProcessingError), nil
	}
	pi, err := p.api.V1PaymentIntents.Capture(ctx, f.Original, &stripego.PaymentIntentCaptureParams{
		Params:          stripego.Params{IdempotencyKey: stripego.String(f.Reference)},
		AmountToCapture: stripego.Int64(amount),
	})
	if canceledIntent(err) {
		return declined(f.Original, processor.CodeAuthorizationExpired), nil
	}
	if err != nil {
		return p.failed(ctx, "capture", f.Reference, err)
	}
	if pi.Status != stripego.PaymentIntentStatusSucceeded {
		return processor.Result{}, errors.New("stripe: capture " + f.Reference + ": the PaymentIntent is " + string(pi.Status))
	}
	return approved(pi.ID), nil
}

// Refund returns f.Amount of the PaymentIntent f.Original (a sale, or a captured authorization).
func (p *Processor) Refund(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	amount, ok := stripeAmount(f.Amount, f.Currency)
	if !ok {
		return declined("", processor.CodeProcessingError), nil
	}
	r, err := p.api.V1Refunds.Create(ctx, &stripego.RefundCreateParams{
		Params:        stripego.Params{IdempotencyKey: stripego.String(f.Reference)},
		PaymentIntent: stripego.String(f.Original),
		Amount:        stripego.Int64(amount),
		Metadata:      map[string]string{metadataKey: f.Reference},
	})
	if err != nil {
		return p.failed(ctx, "refund", f.Reference, err)
	}
	return refundResult(r), nil
}

// Void cancels the PaymentIntent f.Original, releasing its hold. One Stripe has already canceled
// (the hold lapsed) is released already: the void is approved. A card verification (a SetupIntent)
// holds nothing, so its void is approved without a call.
func (p *Processor) Void(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	if strings.HasPrefix(f.Original, "seti_") {
		return approved(f.Original), nil
	}
	pi, err := p.api.V1PaymentIntents.Cancel(ctx, f.Original, &stripego.PaymentIntentCancelParams{
		Params: stripego.Params{IdempotencyKey: stripego.String(f.Reference)},
	})
	if canceledIntent(err) {
		return approved(f.Original), nil
	}
	if err != nil {
		return p.failed(ctx, "void", f.Reference, err)
	}
	return approved(pi.ID), nil
}

// canceledIntent reports whether err is Stripe's refusal to act on a PaymentIntent that is canceled.
func canceledIntent(err error) bool {
	var se *stripego.Error
	return errors.As(err, &se) && se.Type == stripego.ErrorTypeInvalidRequest && se.PaymentIntent != nil &&
		se.PaymentIntent.Status == stripego.PaymentIntentStatusCanceled
}

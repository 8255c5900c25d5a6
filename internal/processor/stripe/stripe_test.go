package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/processor/stripe"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	settle := time.Minute
	processortest.Run(t, f.open(stripe.KindConfig{Settle: settle}), processortest.Config{Approve: cardtest.Visa, EnforcesAmounts: true,
		Silence: func() { f.inject("POST /v1/payment_intents", "lose", 1) },
		Settle:  func() { f.clock.Advance(settle + time.Second) }})
}

var cad, _ = money.Lookup("CAD")

// payment is a payment of pan for amount (CAD cents), a sale when capture.
func payment(t *testing.T, ref, pan string, amount int64, capture bool) processor.Payment {
	t.Helper()
	n, err := card.ParseNumber(pan)
	if err != nil {
		t.Fatal(err)
	}
	return processor.Payment{Reference: ref, Merchant: processor.Merchant{ID: "0000000001"}, Amount: amount, Currency: cad,
		Capture: capture, Card: n, Expiry: card.Expiry{Month: 12, Year: time.Now().Year() + 2}, CVV: "123"}
}

// Every class of Stripe's declines, with Stripe's error JSON (a 402 card_error carrying the
// PaymentIntent), becomes Kassa's code, a message and the PaymentIntent as the reference; never an
// error.
func TestDeclines(t *testing.T) {
	t.Parallel()
	_, p := start(t)
	for pan, code := range map[string]string{
		cardtest.Declined:          processor.CodeDeclined,
		cardtest.InsufficientFunds: processor.CodeInsufficientFunds,
		cardtest.LostCard:          processor.CodeLostCard,
		cardtest.StolenCard:        processor.CodeStolenCard,
		cardtest.ExpiredCard:       processor.CodeExpiredCard,
		cardtest.IncorrectCVC:      processor.CodeIncorrectCVC,
		cardtest.ProcessingError:   processor.CodeProcessingError,
		"4000000000006975":         processor.CodeInsufficientFunds, // card_velocity_exceeded
		"4100000000000019":         processor.CodeDeclined,          // fraudulent: told as a generic decline
	} {
		for _, capture := range []bool{true, false} {
			r, err := p.Authorize(context.Background(), payment(t, fmt.Sprintf("decline-%s-%v", code, capture)+pan[12:], pan, 1000, capture))
			if err != nil || r.Approved || r.Code != code || r.Message == "" || !strings.HasPrefix(r.Reference, "pi_") {
				t.Errorf("%s… (capture %v): %+v, %v; want declined %s with the PaymentIntent", pan[:6], capture, r, err, code)
			}
		}
	}
}

// want fails t unless the request's form has each of the values (a value "" means the field must be
// absent).
func want(t *testing.T, r request, values map[string]string) {
	t.Helper()
	for k, v := range values {
		if got := r.Form.Get(k); got != v || v == "" && r.Form.Has(k) {
			t.Errorf("%s: %s = %q, want %q", r.Route, k, got, v)
		}
	}
}

// What each call sends: the card as a PaymentMethod of raw card data, then a PaymentIntent confirmed
// at once (automatic capture for a sale, manual for an authorization, off_session for a stored card
// or a subscription's charge), a SetupIntent for a zero amount; Kassa's reference as the
// Idempotency-Key and in metadata; amounts in Stripe's minor units.
func TestRequests(t *testing.T) {
	t.Parallel()
	f, p := start(t)
	ctx := context.Background()
	last := func(route string) request {
		t.Helper()
		rs := f.received(route)
		if len(rs) == 0 {
			t.Fatalf("no %s", route)
		}
		return rs[len(rs)-1]
	}

	sale := payment(t, "req-sale", cardtest.Visa, 1234, true)
	r, err := p.Authorize(ctx, sale)
	if err != nil || !r.Approved || !strings.HasPrefix(r.Reference, "pi_") {
		t.Fatalf("sale: %+v, %v", r, err)
	}
	pm := last("POST /v1/payment_methods")
	want(t, pm, map[string]string{"type": "card", "card[number]": cardtest.Visa, "card[exp_month]": "12",
		"card[exp_year]": fmt.Sprint(sale.Expiry.Year), "card[cvc]": "123"})
	if pm.IdempotencyKey != "req-sale/payment_method" {
		t.Errorf("payment method Idempotency-Key %q", pm.IdempotencyKey)
	}
	pi := last("POST /v1/payment_intents")
	want(t, pi, map[string]string{"amount": "1234", "currency": "cad", "capture_method": "automatic", "confirm": "true",
		"payment_method_types[0]": "card", "metadata[kassa_reference]": "req-sale", "off_session": ""})
	if pi.IdempotencyKey != "req-sale" || !strings.HasPrefix(pi.Form.Get("payment_method"), "pm_") {
		t.Errorf("payment intent: key %q, payment_method %q", pi.IdempotencyKey, pi.Form.Get("payment_method"))
	}

	auth, err := p.Authorize(ctx, payment(t, "req-auth", cardtest.Visa, 5000, false))
	if err != nil || !auth.Approved {
		t.Fatalf("authorization: %+v, %v", auth, err)
	}
	want(t, last("POST /v1/payment_intents"), map[string]string{"capture_method": "manual", "amount": "5000"})
	if r, err := p.Capture(ctx, processor.FollowUp{Reference: "req-capture", Original: auth.Reference, Amount: 4000, Currency: cad}); err != nil ||
		!r.Approved || r.Reference != auth.Reference {
		t.Fatalf("capture: %+v, %v", r, err)
	}
	c := last("POST /v1/payment_intents/{id}/capture")
	want(t, c, map[string]string{"amount_to_capture": "4000"})
	if c.IdempotencyKey != "req-capture" {
		t.Errorf("capture Idempotency-Key %q", c.IdempotencyKey)
	}
	ref, err := p.Refund(ctx, processor.FollowUp{Reference: "req-refund", Original: auth.Reference, Amount: 1500, Currency: cad})
	if err != nil || !ref.Approved || !strings.HasPrefix(ref.Reference, "re_") {
		t.Fatalf("refund: %+v, %v", ref, err)
	}
	rf := last("POST /v1/refunds")
	want(t, rf, map[string]string{"payment_intent": auth.Reference, "amount": "1500", "metadata[kassa_reference]": "req-refund"})
	if rf.IdempotencyKey != "req-refund" {
		t.Errorf("refund Idempotency-Key %q", rf.IdempotencyKey)
	}
	auth2, _ := p.Authorize(ctx, payment(t, "req-auth2", cardtest.Visa, 5000, false))
	if r, err := p.Void(ctx, processor.FollowUp{Reference: "req-void", Original: auth2.Reference, Amount: 5000, Currency: cad}); err != nil || !r.Approved {
		t.Fatalf("void: %+v, %v", r, err)
	}
	if v := last("POST /v1/payment_intents/{id}/cancel"); v.IdempotencyKey != "req-void" {
		t.Errorf("void Idempotency-Key %q", v.IdempotencyKey)
	}
	if f.object(auth2.Reference)["status"] != "canceled" {
		t.Errorf("voided PaymentIntent: %v", f.object(auth2.Reference)["status"])
	}

	// Card on file and subscriptions: merchant-initiated, without the customer (nor a CVC).
	stored := payment(t, "req-stored", cardtest.Visa, 700, true)
	stored.StoredCard, stored.CVV = true, ""
	if r, err := p.Authorize(ctx, stored); err != nil || !r.Approved {
		t.Fatalf("stored card: %+v, %v", r, err)
	}
	want(t, last("POST /v1/payment_methods"), map[string]string{"card[cvc]": ""})
	want(t, last("POST /v1/payment_intents"), map[string]string{"off_session": "true"})
	recurring := payment(t, "req-recurring", cardtest.Visa, 700, true)
	recurring.StoredCard, recurring.Recurring, recurring.CVV = true, true, ""
	if r, err := p.Authorize(ctx, recurring); err != nil || !r.Approved {
		t.Fatalf("recurring: %+v, %v", r, err)
	}
	want(t, last("POST /v1/payment_intents"), map[string]string{"off_session": "true"})

	// A mail or telephone order (the virtual terminal) is marked MOTO, out of scope for SCA; the
	// cardholder is not there, but the card was typed now, so it is not off_session.
	moto := payment(t, "req-moto", cardtest.Visa, 900, true)
	moto.MailOrder = true
	if r, err := p.Authorize(ctx, moto); err != nil || !r.Approved {
		t.Fatalf("mail order: %+v, %v", r, err)
	}
	want(t, last("POST /v1/payment_intents"), map[string]string{"payment_method_options[card][moto]": "true", "off_session": ""})

	// A zero amount verifies the card: a SetupIntent.
	zero, err := p.Authorize(ctx, payment(t, "req-verify", cardtest.Visa, 0, false))
	if err != nil || !zero.Approved || !strings.HasPrefix(zero.Reference, "seti_") {
		t.Fatalf("verification: %+v, %v", zero, err)
	}
	si := last("POST /v1/setup_intents")
	want(t, si, map[string]string{"confirm": "true", "metadata[kassa_reference]": "req-verify", "payment_method_types[0]": "card", "amount": ""})
	if si.IdempotencyKey != "req-verify" {
		t.Errorf("setup intent Idempotency-Key %q", si.IdempotencyKey)
	}
	// It holds nothing: its void is approved without a call.
	cancels := len(f.received("POST /v1/payment_intents/{id}/cancel"))
	if r, err := p.Void(ctx, processor.FollowUp{Reference: "req-void-verify", Original: zero.Reference, Currency: cad}); err != nil || !r.Approved {
		t.Fatalf("void of a verification: %+v, %v", r, err)
	}
	if len(f.received("POST /v1/payment_intents/{id}/cancel")) != cancels {
		t.Error("the void of a verification reached Stripe")
	}

	// Stripe's minor units: ISK is two-decimal at Stripe, MGA zero-decimal.
	for _, tc := range []struct {
		code   string
		amount int64
		sent   string // "" when nothing may be sent
	}{{"JPY", 500, "500"}, {"KWD", 1230, "1230"}, {"ISK", 500, "50000"}, {"MGA", 1200, "12"}, {"MGA", 1234, ""}} {
		cur, _ := money.Lookup(tc.code)
		pay := payment(t, "req-"+tc.code+fmt.Sprint(tc.amount), cardtest.Visa, tc.amount, true)
		pay.Currency = cur
		before := len(f.received("POST /v1/payment_intents"))
		r, err := p.Authorize(ctx, pay)
		if tc.sent == "" {
			if err != nil || r.Approved || r.Code != processor.CodeProcessingError || len(f.received("POST /v1/payment_intents")) != before {
				t.Errorf("%d %s: %+v, %v; want declined without a call", tc.amount, tc.code, r, err)
			}
			continue
		}
		if err != nil || !r.Approved {
			t.Fatalf("%d %s: %+v, %v", tc.amount, tc.code, r, err)
		}
		want(t, last("POST /v1/payment_intents"), map[string]string{"amount": tc.sent, "currency": strings.ToLower(tc.code)})
	}
}

// A card whose issuer requires 3-D Secure: requires_action on a payment with the customer, Stripe's
// authentication_required error on one without: both authentication_required.
func TestThreeDSecure(t *testing.T) {
	t.Parallel()
	f, p := start(t)
	ctx := context.Background()
	for _, pan := range []string{cardtest.ThreeDSecure, cardtest.ThreeDSecure2} {
		r, err := p.Authorize(ctx, payment(t, "3ds-"+pan[12:], pan, 1000, true))
		if err != nil || r.Approved || r.Code != processor.CodeAuthenticationRequired || r.Message != "Authentication required" {
			t.Errorf("%s…: %+v, %v", pan[:6], r, err)
		}
		if f.object(r.Reference)["status"] != "requires_action" {
			t.Errorf("%s…: PaymentIntent %v", pan[:6], f.object(r.Reference)["status"])
		}
		stored := payment(t, "3ds-stored-"+pan[12:], pan, 1000, true)
		stored.StoredCard = true
		if r, err := p.Authorize(ctx, stored); err != nil || r.Approved || r.Code != processor.CodeAuthenticationRequired {
			t.Errorf("%s… off session: %+v, %v", pan[:6], r, err)
		}
		if r, err := p.Authorize(ctx, payment(t, "3ds-verify-"+pan[12:], pan, 0, false)); err != nil || r.Approved ||
			r.Code != processor.CodeAuthenticationRequired || !strings.HasPrefix(r.Reference, "seti_") {
			t.Errorf("%s… verification: %+v, %v", pan[:6], r, err)
		}
	}
}

// A call that gets no answer, a 5xx, a 429, a 409 or an idempotency_error has an unknown outcome:
// an error, never a decline, and never with the card number. What Stripe refuses outright is a
// processing_error decline.
func TestUnknownOutcomes(t *testing.T) {
	t.Parallel()
	f, p := start(t)
	for _, tc := range []struct {
		name, route, how string
	}{
		{"no answer to the payment method", "POST /v1/payment_methods", "hang"},
		{"no answer to the payment intent", "POST /v1/payment_intents", "hang"},
		{"answer lost", "POST /v1/payment_intents", "lose"},
		{"connection closed", "POST /v1/payment_intents", "drop"},
		{"500", "POST /v1/payment_intents", "500"},
		{"502", "POST /v1/payment_methods", "502"},
		{"503", "POST /v1/payment_intents", "503"},
		{"429", "POST /v1/payment_intents", "429"},
		{"409", "POST /v1/payment_intents", "409"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every request of the route, since Go's transport itself sends a request with an
			// Idempotency-Key again when a reused connection closes without an answer.
			f.inject(tc.route, tc.how, -1)
			defer f.inject(tc.route, "", 0)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			r, err := p.Authorize(ctx, payment(t, "unknown-"+strings.ReplaceAll(tc.name, " ", "-"), cardtest.Visa, 1000, true))
			if err == nil {
				t.Fatalf("decided %+v", r)
			}
			cardtest.Check(t, "the error", err.Error())
		})
	}
	t.Run("idempotency error", func(t *testing.T) {
		if r, err := p.Authorize(context.Background(), payment(t, "unknown-reused", cardtest.Visa, 1000, true)); err != nil || !r.Approved {
			t.Fatalf("first: %+v, %v", r, err)
		}
		// The same reference for another amount: Stripe refuses it, and what became of the first
		// request under that key is not this answer.
		if r, err := p.Authorize(context.Background(), payment(t, "unknown-reused", cardtest.Visa, 2000, true)); err == nil {
			t.Fatalf("decided %+v", r)
		}
	})
	t.Run("timeouts are errors of the context", func(t *testing.T) {
		f.inject("POST /v1/payment_intents", "hang", 1)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := p.Authorize(ctx, payment(t, "unknown-deadline", cardtest.Visa, 1000, true)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		auth, _ := p.Authorize(context.Background(), payment(t, "refused-auth", cardtest.Visa, 1000, false))
		r, err := p.Capture(context.Background(), processor.FollowUp{Reference: "refused-capture", Original: auth.Reference, Amount: 5000, Currency: cad})
		if err != nil || r.Approved || r.Code != processor.CodeProcessingError {
			t.Errorf("capture above the authorization: %+v, %v", r, err)
		}
		r, err = p.Refund(context.Background(), processor.FollowUp{Reference: "refused-refund", Original: "pi_0", Amount: 100, Currency: cad})
		if err != nil || r.Approved || r.Code != processor.CodeProcessingError {
			t.Errorf("refund of nothing: %+v, %v", r, err)
		}
		wrongKey := newFake(t)
		wrongKey.key = "sk_test_" + strings.Repeat("x", 24)
		q := wrongKey.open(stripe.KindConfig{})
		wrongKey.key = f.key
		r, err = q.Authorize(context.Background(), payment(t, "refused-key", cardtest.Visa, 1000, true))
		if err != nil || r.Approved || r.Code != processor.CodeProcessingError {
			t.Errorf("revoked key: %+v, %v", r, err)
		}
	})
}

// stripe-go sends a call that got no answer again, under the same Idempotency-Key; it does not send a
// 5xx again (its errors are not retryable), nor a 429 for the rate limit.
func TestNetworkRetries(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	p := f.open(stripe.KindConfig{NetworkRetries: 2})
	// Two dropped connections: Go's transport sends again at most once, stripe-go then once more.
	f.inject("POST /v1/payment_intents", "drop", 2)
	r, err := p.Authorize(context.Background(), payment(t, "retried", cardtest.Visa, 1000, true))
	if err != nil || !r.Approved {
		t.Fatalf("after dropped connections: %+v, %v", r, err)
	}
	sent := f.received("POST /v1/payment_intents")
	if len(sent) != 3 {
		t.Fatalf("sent %d times", len(sent))
	}
	for _, s := range sent {
		if s.IdempotencyKey != "retried" {
			t.Errorf("sent again with the Idempotency-Key %q", s.IdempotencyKey)
		}
	}
	for _, how := range []string{"500", "429"} {
		f.inject("POST /v1/refunds", how, -1)
		if r, err := p.Refund(context.Background(), processor.FollowUp{Reference: "retried-" + how, Original: r.Reference, Amount: 100, Currency: cad}); err == nil {
			t.Fatalf("%s: decided %+v", how, r)
		}
		if n := len(f.received("POST /v1/refunds")); n != map[string]int{"500": 1, "429": 2}[how] {
			t.Errorf("after a %s: %d refund requests", how, n)
		}
	}
}

// A retried call is the same call at Stripe: the same PaymentIntent, one capture, one refund.
func TestIdempotentReplays(t *testing.T) {
	t.Parallel()
	f, p := start(t)
	ctx := context.Background()
	twice := func(name string, call func() (processor.Result, error)) processor.Result {
		t.Helper()
		r1, err1 := call()
		r2, err2 := call()
		if err1 != nil || err2 != nil || r1 != r2 {
			t.Fatalf("%s: %+v, %v; then %+v, %v", name, r1, err1, r2, err2)
		}
		return r1
	}
	auth := twice("authorization", func() (processor.Result, error) {
		return p.Authorize(ctx, payment(t, "replay-auth", cardtest.Visa, 1000, false))
	})
	if d := twice("decline", func() (processor.Result, error) {
		return p.Authorize(ctx, payment(t, "replay-decline", cardtest.InsufficientFunds, 1000, true))
	}); d.Code != processor.CodeInsufficientFunds {
		t.Fatalf("decline: %+v", d)
	}
	for _, step := range []struct {
		name string
		call func(context.Context, processor.FollowUp) (processor.Result, error)
	}{{"capture", p.Capture}, {"refund", p.Refund}} {
		if r := twice(step.name, func() (processor.Result, error) {
			return step.call(ctx, processor.FollowUp{Reference: "replay-" + step.name, Original: auth.Reference, Amount: 1000, Currency: cad})
		}); !r.Approved {
			t.Fatalf("%s: %+v", step.name, r)
		}
	}
	v, _ := p.Authorize(ctx, payment(t, "replay-auth2", cardtest.Visa, 1000, false))
	if r := twice("void", func() (processor.Result, error) {
		return p.Void(ctx, processor.FollowUp{Reference: "replay-void", Original: v.Reference, Amount: 1000, Currency: cad})
	}); !r.Approved {
		t.Fatalf("void: %+v", r)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	count := map[string]int{}
	for _, ev := range f.events {
		count[ev["type"].(string)]++
	}
	if count["payment_intent.created"] != 3 || count["payment_intent.succeeded"] != 1 || count["refund.created"] != 1 || count["payment_intent.canceled"] != 1 {
		t.Errorf("Stripe did %v", count)
	}
}

// Stripe cancels an authorization whose hold lapsed: its capture is declined authorization_expired,
// and its void approved (it is released).
func TestLapsedAuthorization(t *testing.T) {
	t.Parallel()
	f, p := start(t)
	ctx := context.Background()
	auth, _ := p.Authorize(ctx, payment(t, "lapsed", cardtest.Visa, 1000, false))
	f.mu.Lock()
	f.objects[auth.Reference]["status"] = "canceled"
	f.mu.Unlock()
	if r, err := p.Capture(ctx, processor.FollowUp{Reference: "lapsed-capture", Original: auth.Reference, Amount: 1000, Currency: cad}); err != nil ||
		r.Approved || r.Code != processor.CodeAuthorizationExpired {
		t.Errorf("capture: %+v, %v", r, err)
	}
	if r, err := p.Void(ctx, processor.FollowUp{Reference: "lapsed-void", Original: auth.Reference, Amount: 1000, Currency: cad}); err != nil || !r.Approved {
		t.Errorf("void: %+v, %v", r, err)
	}
}

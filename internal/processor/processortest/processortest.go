// Package processortest is the conformance suite every processor.Processor passes.
package processortest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
)

// Cards tells the suite which test cards the processor approves and declines.
type Cards struct {
	Approve string // a card that is approved
	Decline string // a card that is declined
	// Challenge is a card whose issuer requires a 3-D Secure challenge; required when the processor
	// is a processor.Authenticator.
	Challenge string
}

// Run checks the behaviour the payments core relies on:
//   - an approved card is approved, with a message and a processor reference;
//   - a declined card is a Result with Approved false and a code, not an error;
//   - an expired card is declined with CodeExpiredCard;
//   - an approved authorization can be captured, a sale refunded, an authorization voided;
//   - a zero-amount authorization (card verification) is approved for a good card;
//   - Lookup of a reference never sent answers ErrNotFound;
//   - a canceled context makes a call fail with an error, never with a decision;
//   - for a processor.Authenticator, the rules of its documentation: the challenge card requires a
//     challenge and the approving card none; the challenge card is declined with
//     CodeAuthenticationRequired without authentication, approved with a successful one; a failed
//     authentication declines any card with CodeAuthenticationFailed.
func Run(t *testing.T, p processor.Processor, cards Cards) {
	cad, _ := money.Lookup("CAD")
	future := card.Expiry{Month: 12, Year: time.Now().Year() + 3}
	payment := func(ref, pan string, amount int64, capture bool) processor.Payment {
		n, err := card.ParseNumber(pan)
		if err != nil {
			t.Fatalf("test card %s…: %v", pan[:6], err)
		}
		return processor.Payment{Reference: ref, Merchant: processor.Merchant{ID: "0000000001"}, Amount: amount,
			Currency: cad, Capture: capture, Card: n, Expiry: future, CVV: "123"}
	}
	ctx := context.Background()
	ref := func(s string) string { return "conformance" + s + time.Now().Format("150405.000000") }

	t.Run("approve, capture, void", func(t *testing.T) {
		auth, err := p.Authorize(ctx, payment(ref("a"), cards.Approve, 1000, false))
		if err != nil || !auth.Approved || auth.Message == "" || auth.Reference == "" || auth.Code != "" {
			t.Fatalf("Authorize(approving card) = %+v, %v", auth, err)
		}
		cap, err := p.Capture(ctx, processor.FollowUp{Reference: ref("c"), Original: auth.Reference, Amount: 600, Currency: cad, AuthorizedAt: time.Now()})
		if err != nil || !cap.Approved || cap.Reference == "" {
			t.Fatalf("Capture = %+v, %v", cap, err)
		}
		auth2, _ := p.Authorize(ctx, payment(ref("a2"), cards.Approve, 1000, false))
		void, err := p.Void(ctx, processor.FollowUp{Reference: ref("v"), Original: auth2.Reference, Amount: 1000, Currency: cad, AuthorizedAt: time.Now()})
		if err != nil || !void.Approved {
			t.Fatalf("Void = %+v, %v", void, err)
		}
	})
	t.Run("sale and refund", func(t *testing.T) {
		sale, err := p.Authorize(ctx, payment(ref("s"), cards.Approve, 2500, true))
		if err != nil || !sale.Approved {
			t.Fatalf("sale = %+v, %v", sale, err)
		}
		refund, err := p.Refund(ctx, processor.FollowUp{Reference: ref("r"), Original: sale.Reference, Amount: 1000, Currency: cad})
		if err != nil || !refund.Approved {
			t.Fatalf("Refund = %+v, %v", refund, err)
		}
	})
	t.Run("decline is a result", func(t *testing.T) {
		r, err := p.Authorize(ctx, payment(ref("d"), cards.Decline, 1000, true))
		if err != nil || r.Approved || r.Code == "" || r.Message == "" {
			t.Fatalf("Authorize(declining card) = %+v, %v", r, err)
		}
	})
	t.Run("expired card declines", func(t *testing.T) {
		pay := payment(ref("e"), cards.Approve, 1000, true)
		pay.Expiry = card.Expiry{Month: 1, Year: 2020}
		r, err := p.Authorize(ctx, pay)
		if err != nil || r.Approved || r.Code != processor.CodeExpiredCard {
			t.Fatalf("Authorize(expired) = %+v, %v", r, err)
		}
	})
	t.Run("card verification", func(t *testing.T) {
		r, err := p.Authorize(ctx, payment(ref("z"), cards.Approve, 0, false))
		if err != nil || !r.Approved {
			t.Fatalf("Authorize(0) = %+v, %v", r, err)
		}
	})
	t.Run("lookup of an unknown reference", func(t *testing.T) {
		if _, err := p.Lookup(ctx, processor.Operation{Reference: ref("never-sent"), Kind: processor.OperationSale, Amount: 1000, Currency: cad}); !errors.Is(err, processor.ErrNotFound) {
			t.Fatalf("Lookup = %v, want ErrNotFound", err)
		}
	})
	t.Run("canceled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if r, err := p.Authorize(cctx, payment(ref("x"), cards.Approve, 1000, true)); err == nil {
			t.Fatalf("Authorize with a canceled context decided %+v", r)
		}
	})
	a, ok := p.(processor.Authenticator)
	if !ok {
		return
	}
	t.Run("3-D Secure", func(t *testing.T) {
		if cards.Challenge == "" {
			t.Fatal("the processor is an Authenticator: Cards.Challenge must name a card that requires a challenge")
		}
		for pan, want := range map[string]bool{cards.Approve: false, cards.Challenge: true} {
			if got, err := a.ChallengeRequired(ctx, payment("", pan, 1000, true)); err != nil || got != want {
				t.Errorf("ChallengeRequired(%s…) = %v, %v; want %v", pan[:6], got, err, want)
			}
		}
		for _, tc := range []struct {
			pan, auth, code string // code "" for approved
		}{
			{cards.Challenge, processor.AuthenticationNone, processor.CodeAuthenticationRequired},
			{cards.Challenge, processor.AuthenticationFailed, processor.CodeAuthenticationFailed},
			{cards.Challenge, processor.AuthenticationSucceeded, ""},
			{cards.Approve, processor.AuthenticationFailed, processor.CodeAuthenticationFailed},
			{cards.Approve, processor.AuthenticationSucceeded, ""},
		} {
			pay := payment(ref("3ds"+tc.auth), tc.pan, 1000, true)
			pay.Authentication = tc.auth
			r, err := p.Authorize(ctx, pay)
			if err != nil || r.Approved != (tc.code == "") || r.Code != tc.code || r.Message == "" {
				t.Errorf("Authorize(%s…, authentication %q) = %+v, %v; want code %q", tc.pan[:6], tc.auth, r, err, tc.code)
			}
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if got, err := a.ChallengeRequired(cctx, payment("", cards.Challenge, 1000, true)); err == nil {
			t.Fatalf("ChallengeRequired with a canceled context decided %v", got)
		}
	})
}

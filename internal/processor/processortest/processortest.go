// Package processortest is the conformance suite every processor.Processor passes: the built-in
// simulator, the ISO 8583 connector against an acquirer host, the Stripe connector.
package processortest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
)

// Config tells the suite what the processor under test decides and can be made to do.
type Config struct {
	Approve string // a card that is approved
	Decline string // a card that is declined (card_declined)
	// Declines maps each decline code the processor answers to a card it declines with it; the suite
	// checks every one. Nil: the well-known test cards of every decline class (cardtest), which the
	// simulator, the profile's test host and Stripe's test mode all share.
	Declines map[string]string
	// Challenge is a card whose issuer requires a 3-D Secure challenge; required when the processor
	// is a processor.Authenticator.
	Challenge string
	// EnforcesAmounts is true for a processor that keeps what it authorized and captured, and declines
	// (never errs on) a second capture of one authorization, a capture beyond it, and refunds beyond
	// what was captured. The payments core never asks for those; a real acquirer refuses them anyway.
	EnforcesAmounts bool
	// Silence, when set, makes the processor's next call get no answer (the acquirer went quiet after
	// receiving it). The suite then checks that the outcome is unknown, never a decision, and that the
	// processor's way out — Lookup, or a reversal (processor.Unanswered) — settles it.
	Silence func()
	// Settle, when set, is called before the suite looks up an operation that never arrived: it lets
	// pass the time after which the processor can tell that it never will (a processor whose records
	// are eventually consistent, like Stripe's, says so only then).
	Settle func()
}

// silenceWait bounds an unanswered call, as the payments core's processor timeout does; a processor's
// own timeout in the suite must be shorter.
const silenceWait = 3 * time.Second

// defaultDeclines are the well-known decline test cards, by the code they decline with.
var defaultDeclines = map[string]string{
	processor.CodeDeclined:          cardtest.Declined,
	processor.CodeInsufficientFunds: cardtest.InsufficientFunds,
	processor.CodeLostCard:          cardtest.LostCard,
	processor.CodeStolenCard:        cardtest.StolenCard,
	processor.CodeExpiredCard:       cardtest.ExpiredCard,
	processor.CodeIncorrectCVC:      cardtest.IncorrectCVC,
	processor.CodeProcessingError:   cardtest.ProcessingError,
}

// Run checks the behaviour the payments core relies on:
//   - an approved card is approved, with a message and a processor reference;
//   - every decline class is a Result with Approved false, its code and a message, not an error;
//   - a card whose expiry has passed is declined with CodeExpiredCard;
//   - an approved authorization can be captured in part, a sale refunded in parts, an authorization
//     voided; with EnforcesAmounts, what goes beyond is declined;
//   - a zero-amount authorization (card verification) is approved for a good card;
//   - a call repeated with the same reference (and trace) answers as the first did: the processor
//     deduplicates on it, so a retry never charges twice;
//   - Lookup of a reference never sent answers ErrNotFound, or for a processor that cannot ask, a
//     reversal (processor.Unanswered) that is then acknowledged;
//   - a canceled context makes a call fail with an error, never with a decision;
//   - with Silence: an unanswered call is an error, never a decision, and is settled by Lookup or
//     by its reversal;
//   - for a processor.Authenticator, the rules of its documentation.
//
// A processor.Preparer is asked for the trace of each operation before it is sent, as the payments
// core does.
func Run(t *testing.T, p processor.Processor, cfg Config) {
	s := &suite{p: p, cfg: cfg, ctx: context.Background(), merchant: processor.Merchant{ID: "0000000001"}}
	s.cad, _ = money.Lookup("CAD")
	if s.cfg.Declines == nil {
		s.cfg.Declines = defaultDeclines
	}
	if s.cfg.Decline == "" {
		s.cfg.Decline = s.cfg.Declines[processor.CodeDeclined]
	}

	t.Run("approve, capture in part, void", func(t *testing.T) {
		auth := s.approved(t, "authorize", s.payment(t, "a", cfg.Approve, 1000, false))
		s.approvedFollowUp(t, "capture", s.p.Capture, s.followUp(t, "c", auth, 600))
		auth2 := s.approved(t, "authorize", s.payment(t, "a2", cfg.Approve, 1000, false))
		s.approvedFollowUp(t, "void", s.p.Void, s.followUp(t, "v", auth2, 1000))
		if cfg.EnforcesAmounts {
			auth3 := s.approved(t, "authorize", s.payment(t, "a3", cfg.Approve, 1000, false))
			s.declinedFollowUp(t, "capture beyond the authorization", s.p.Capture, s.followUp(t, "c3", auth3, 1001))
			s.approvedFollowUp(t, "capture", s.p.Capture, s.followUp(t, "c4", auth3, 1000))
			s.declinedFollowUp(t, "second capture", s.p.Capture, s.followUp(t, "c5", auth3, 1000))
		}
	})
	t.Run("sale and refunds in parts", func(t *testing.T) {
		sale := s.approved(t, "sale", s.payment(t, "s", cfg.Approve, 2500, true))
		s.approvedFollowUp(t, "refund", s.p.Refund, s.followUp(t, "r1", sale, 1000))
		s.approvedFollowUp(t, "second refund", s.p.Refund, s.followUp(t, "r2", sale, 1500))
		if cfg.EnforcesAmounts {
			s.declinedFollowUp(t, "refund beyond the sale", s.p.Refund, s.followUp(t, "r3", sale, 1))
		}
	})
	t.Run("every decline class", func(t *testing.T) {
		for code, pan := range s.cfg.Declines {
			r, err := s.p.Authorize(s.ctx, s.payment(t, "d"+code, pan, 1000, true))
			if err != nil || r.Approved || r.Code != code || r.Message == "" {
				t.Errorf("Authorize(%s…, want %s) = %+v, %v", pan[:6], code, r, err)
			}
		}
	})
	t.Run("expired card declines", func(t *testing.T) {
		pay := s.payment(t, "e", cfg.Approve, 1000, true)
		pay.Expiry = card.Expiry{Month: 1, Year: 2020}
		r, err := s.p.Authorize(s.ctx, pay)
		if err != nil || r.Approved || r.Code != processor.CodeExpiredCard {
			t.Fatalf("Authorize(expired) = %+v, %v", r, err)
		}
	})
	t.Run("card verification", func(t *testing.T) {
		s.approved(t, "authorize 0", s.payment(t, "z", cfg.Approve, 0, false))
	})
	t.Run("a retried reference answers as the first", func(t *testing.T) {
		pay := s.payment(t, "retry", cfg.Approve, 1500, true)
		first := s.approved(t, "sale", pay)
		again := s.approved(t, "the same sale again", pay)
		if again.Reference != first.Reference {
			t.Fatalf("a retry got a new operation: %q, then %q", first.Reference, again.Reference)
		}
		if cfg.EnforcesAmounts {
			// Charged once: the whole amount can be refunded once, and no more.
			s.approvedFollowUp(t, "refund of the whole sale", s.p.Refund, s.followUp(t, "retry-r1", first, 1500))
			s.declinedFollowUp(t, "a second refund of the whole sale", s.p.Refund, s.followUp(t, "retry-r2", first, 1500))
		}
	})
	t.Run("lookup of an operation never sent", func(t *testing.T) {
		op := processor.Operation{Reference: ref("never-sent"), Merchant: s.merchant, Kind: processor.OperationSale, Amount: 1000, Currency: s.cad}
		if pr, ok := s.p.(processor.Preparer); ok {
			var err error
			if op.Trace, err = pr.Prepare(s.ctx, s.merchant); err != nil {
				t.Fatal(err)
			}
		}
		if cfg.Settle != nil {
			cfg.Settle()
		}
		_, err := s.p.Lookup(s.ctx, op)
		var u *processor.Unanswered
		switch {
		case errors.Is(err, processor.ErrNotFound):
		case errors.As(err, &u):
			s.reverse(t, u)
		default:
			t.Fatalf("Lookup = %v, want ErrNotFound or a reversal", err)
		}
	})
	t.Run("canceled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(s.ctx)
		cancel()
		if r, err := s.p.Authorize(cctx, s.payment(t, "x", cfg.Approve, 1000, true)); err == nil {
			t.Fatalf("Authorize with a canceled context decided %+v", r)
		}
	})
	if cfg.Silence != nil {
		t.Run("an unanswered call is settled", func(t *testing.T) {
			pay := s.payment(t, "silence", cfg.Approve, 1700, true)
			cfg.Silence()
			ctx, cancel := context.WithTimeout(s.ctx, silenceWait)
			defer cancel()
			r, err := s.p.Authorize(ctx, pay)
			if err == nil {
				t.Fatalf("an unanswered sale decided %+v", r)
			}
			var u *processor.Unanswered
			if errors.As(err, &u) {
				s.reverse(t, u)
				return
			}
			got, err := s.p.Lookup(s.ctx, processor.Operation{Reference: pay.Reference, Merchant: s.merchant, Kind: processor.OperationSale,
				Amount: pay.Amount, Currency: pay.Currency, Trace: pay.Trace})
			switch {
			case errors.As(err, &u):
				s.reverse(t, u)
			case err != nil || !got.Approved || got.Reference == "":
				// Not ErrNotFound either: the processor did receive it.
				t.Fatalf("Lookup of the unanswered sale of an approving card = %+v, %v", got, err)
			}
		})
	}
	a, ok := p.(processor.Authenticator)
	if !ok {
		return
	}
	t.Run("3-D Secure", func(t *testing.T) {
		if cfg.Challenge == "" {
			t.Fatal("the processor is an Authenticator: Config.Challenge must name a card that requires a challenge")
		}
		for pan, want := range map[string]bool{cfg.Approve: false, cfg.Challenge: true} {
			pay := s.payment(t, "", pan, 1000, true)
			pay.Reference, pay.Trace = "", ""
			if got, err := a.ChallengeRequired(s.ctx, pay); err != nil || got != want {
				t.Errorf("ChallengeRequired(%s…) = %v, %v; want %v", pan[:6], got, err, want)
			}
		}
		for _, tc := range []struct {
			pan, auth, code string // code "" for approved
			mailOrder       bool
		}{
			{cfg.Challenge, processor.AuthenticationNone, processor.CodeAuthenticationRequired, false},
			{cfg.Challenge, processor.AuthenticationFailed, processor.CodeAuthenticationFailed, false},
			{cfg.Challenge, processor.AuthenticationSucceeded, "", false},
			{cfg.Approve, processor.AuthenticationFailed, processor.CodeAuthenticationFailed, false},
			{cfg.Approve, processor.AuthenticationSucceeded, "", false},
			// A mail or telephone order is outside 3-D Secure: no challenge is required of it.
			{cfg.Challenge, processor.AuthenticationNone, "", true},
		} {
			pay := s.payment(t, "3ds"+tc.auth+strconv.FormatBool(tc.mailOrder), tc.pan, 1000, true)
			pay.Authentication, pay.MailOrder = tc.auth, tc.mailOrder
			r, err := s.p.Authorize(s.ctx, pay)
			if err != nil || r.Approved != (tc.code == "") || r.Code != tc.code || r.Message == "" {
				t.Errorf("Authorize(%s…, authentication %q, mail order %v) = %+v, %v; want code %q", tc.pan[:6], tc.auth, tc.mailOrder, r, err, tc.code)
			}
		}
		cctx, cancel := context.WithCancel(s.ctx)
		cancel()
		if got, err := a.ChallengeRequired(cctx, s.payment(t, "", cfg.Challenge, 1000, true)); err == nil {
			t.Fatalf("ChallengeRequired with a canceled context decided %v", got)
		}
	})
}

type suite struct {
	p        processor.Processor
	cfg      Config
	ctx      context.Context
	cad      money.Currency
	merchant processor.Merchant
}

// ref is a reference no other run of the suite uses.
func ref(s string) string { return "conformance" + s + time.Now().Format("150405.000000") }

// trace prepares the trace of the next operation when the processor is a Preparer.
func (s *suite) trace(t *testing.T) string {
	t.Helper()
	pr, ok := s.p.(processor.Preparer)
	if !ok {
		return ""
	}
	trace, err := pr.Prepare(s.ctx, s.merchant)
	if err != nil || trace == "" {
		t.Fatalf("Prepare = %q, %v", trace, err)
	}
	return trace
}

func (s *suite) payment(t *testing.T, name, pan string, amount int64, capture bool) processor.Payment {
	t.Helper()
	n, err := card.ParseNumber(pan)
	if err != nil {
		t.Fatalf("test card %s…: %v", pan[:6], err)
	}
	return processor.Payment{Reference: ref(name), Merchant: s.merchant, Amount: amount, Currency: s.cad, Capture: capture, Card: n,
		Expiry: card.Expiry{Month: 12, Year: time.Now().Year() + 3}, CVV: "123", Trace: s.trace(t)}
}

func (s *suite) followUp(t *testing.T, name string, original processor.Result, amount int64) processor.FollowUp {
	t.Helper()
	return processor.FollowUp{Reference: ref(name), Merchant: s.merchant, Original: original.Reference, Amount: amount, Currency: s.cad,
		AuthorizedAt: time.Now(), Trace: s.trace(t)}
}

func (s *suite) approved(t *testing.T, what string, p processor.Payment) processor.Result {
	t.Helper()
	r, err := s.p.Authorize(s.ctx, p)
	if err != nil || !r.Approved || r.Message == "" || r.Reference == "" || r.Code != "" {
		t.Fatalf("%s of an approving card = %+v, %v", what, r, err)
	}
	return r
}

func (s *suite) approvedFollowUp(t *testing.T, what string, c func(context.Context, processor.FollowUp) (processor.Result, error), f processor.FollowUp) {
	t.Helper()
	if r, err := c(s.ctx, f); err != nil || !r.Approved || r.Reference == "" {
		t.Fatalf("%s = %+v, %v", what, r, err)
	}
}

func (s *suite) declinedFollowUp(t *testing.T, what string, c func(context.Context, processor.FollowUp) (processor.Result, error), f processor.FollowUp) {
	t.Helper()
	if r, err := c(s.ctx, f); err != nil || r.Approved || r.Code == "" {
		t.Fatalf("%s = %+v, %v; want a decline", what, r, err)
	}
}

// reverse sends the reversal of an unanswered call, which the processor must acknowledge, and again,
// which must be a harmless retransmission.
func (s *suite) reverse(t *testing.T, u *processor.Unanswered) {
	t.Helper()
	r, ok := s.p.(processor.Reverser)
	if !ok {
		t.Fatal("the processor answered processor.Unanswered but is not a processor.Reverser")
	}
	for i := range 2 {
		if err := r.Reverse(s.ctx, s.merchant, u.Reversal); err != nil {
			t.Fatalf("sending %d of the reversal: %v", i+1, err)
		}
	}
}

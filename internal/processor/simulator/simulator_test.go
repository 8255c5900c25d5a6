package simulator_test

import (
	"context"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/processor/simulator"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	processortest.Run(t, simulator.New(simulator.Config{}), processortest.Config{Approve: cardtest.Visa, Challenge: cardtest.ThreeDSecure})
}

func TestConformanceWithLatency(t *testing.T) {
	t.Parallel()
	processortest.Run(t, simulator.New(simulator.Config{Latency: 5 * time.Millisecond}), processortest.Config{Approve: cardtest.Visa, Challenge: cardtest.ThreeDSecure})
}

func pay(t *testing.T, pan string, amount int64, profile string) processor.Payment {
	n, err := card.ParseNumber(pan)
	if err != nil {
		t.Fatal(err)
	}
	cad, _ := money.Lookup("CAD")
	return processor.Payment{Reference: "ref", Merchant: processor.Merchant{SimulatorProfile: profile}, Amount: amount,
		Currency: cad, Capture: true, Card: n, Expiry: card.Expiry{Month: 12, Year: 2099}, CVV: "123"}
}

func TestTestCards(t *testing.T) {
	t.Parallel()
	s := simulator.New(simulator.Config{})
	for _, tc := range []struct {
		pan, code, msg string
	}{
		{cardtest.Visa, "", "Approved"},
		{cardtest.Visa2, "", "Approved"},
		{cardtest.Mastercard, "", "Approved"},
		{cardtest.Amex, "", "Approved"},
		{cardtest.Discover, "", "Approved"},
		{cardtest.Declined, "card_declined", "Declined"},
		{cardtest.InsufficientFunds, "insufficient_funds", "Insufficient funds"},
		{cardtest.LostCard, "lost_card", "Lost card"},
		{cardtest.StolenCard, "stolen_card", "Stolen card"},
		{cardtest.ExpiredCard, "expired_card", "Expired card"},
		{cardtest.IncorrectCVC, "incorrect_cvc", "Incorrect CVC"},
		{cardtest.ProcessingError, "processing_error", "Processing error"},
	} {
		r, err := s.Authorize(context.Background(), pay(t, tc.pan, 1000, simulator.ProfileStandard))
		if err != nil || r.Approved != (tc.code == "") || r.Code != tc.code || r.Message != tc.msg {
			t.Errorf("%s…: %+v, %v; want %q %q", tc.pan[:6], r, err, tc.code, tc.msg)
		}
	}
}

func TestPayfirmaProfile(t *testing.T) {
	t.Parallel()
	s := simulator.New(simulator.Config{})
	for amount, approve := range map[int64]bool{5120: true, 4011: false, 100: true, 200: false, 99: false, 0: true, 199999: true} {
		// The amount decides, even for a card that the standard profile declines.
		r, err := s.Authorize(context.Background(), pay(t, cardtest.Declined, amount, simulator.ProfilePayfirma))
		if err != nil || r.Approved != approve {
			t.Errorf("payfirma %d: %+v, %v; want approved=%v", amount, r, err, approve)
		}
	}
}

func TestHoldLapses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := simulator.New(simulator.Config{HoldDays: 3, Now: func() time.Time { return now }})
	cad, _ := money.Lookup("CAD")
	for age, approve := range map[time.Duration]bool{0: true, 72*time.Hour - time.Second: true, 72 * time.Hour: false} {
		r, err := s.Capture(context.Background(), processor.FollowUp{Reference: "c", Amount: 100, Currency: cad, AuthorizedAt: now.Add(-age)})
		if err != nil || r.Approved != approve || (!approve && r.Code != processor.CodeAuthorizationExpired) {
			t.Errorf("capture %v after authorization: %+v, %v", age, r, err)
		}
	}
}

func TestExpiredCardDeclines(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := simulator.New(simulator.Config{Now: func() time.Time { return now }})
	p := pay(t, cardtest.Visa, 1000, simulator.ProfileStandard)
	p.Expiry = card.Expiry{Month: 10, Year: 2026}
	if r, _ := s.Authorize(context.Background(), p); r.Approved || r.Message != "Expired card" {
		t.Fatalf("expired card: %+v", r)
	}
	p.Expiry = card.Expiry{Month: 11, Year: 2026}
	if r, _ := s.Authorize(context.Background(), p); !r.Approved {
		t.Fatalf("card expiring this month: %+v", r)
	}
}

// The two 3-D Secure test cards require a challenge; no other card does. Without a successful
// authentication they decline with authentication_required, after a failed one with
// authentication_failed (as does any card), and after a successful one the other rules decide.
func TestThreeDSecure(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := simulator.New(simulator.Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	for _, pan := range []string{cardtest.Visa, cardtest.Visa2, cardtest.Mastercard, cardtest.Amex, cardtest.Discover, cardtest.Declined,
		cardtest.InsufficientFunds, cardtest.ExpiredCard, cardtest.ProcessingError, cardtest.ThreeDSecure, cardtest.ThreeDSecure2} {
		want := pan == cardtest.ThreeDSecure || pan == cardtest.ThreeDSecure2
		for _, profile := range []string{simulator.ProfileStandard, simulator.ProfilePayfirma} {
			if got, err := s.ChallengeRequired(ctx, pay(t, pan, 1000, profile)); err != nil || got != want {
				t.Errorf("ChallengeRequired(%s…, %s) = %v, %v; want %v", pan[:6], profile, got, err, want)
			}
		}
	}
	for _, tc := range []struct {
		name, pan, auth, profile string
		amount                   int64
		expired                  bool
		code, msg                string
	}{
		{"no authentication", cardtest.ThreeDSecure, processor.AuthenticationNone, simulator.ProfileStandard, 1000, false, "authentication_required", "Authentication required"},
		{"no authentication, second card", cardtest.ThreeDSecure2, processor.AuthenticationNone, simulator.ProfileStandard, 1000, false, "authentication_required", "Authentication required"},
		{"no authentication, payfirma", cardtest.ThreeDSecure, processor.AuthenticationNone, simulator.ProfilePayfirma, 5100, false, "authentication_required", "Authentication required"},
		{"failed", cardtest.ThreeDSecure, processor.AuthenticationFailed, simulator.ProfileStandard, 1000, false, "authentication_failed", "Authentication failed"},
		{"failed, second card", cardtest.ThreeDSecure2, processor.AuthenticationFailed, simulator.ProfileStandard, 1000, false, "authentication_failed", "Authentication failed"},
		{"failed, any card", cardtest.Visa, processor.AuthenticationFailed, simulator.ProfileStandard, 1000, false, "authentication_failed", "Authentication failed"},
		{"succeeded", cardtest.ThreeDSecure, processor.AuthenticationSucceeded, simulator.ProfileStandard, 1000, false, "", "Approved"},
		{"succeeded, second card", cardtest.ThreeDSecure2, processor.AuthenticationSucceeded, simulator.ProfileStandard, 0, false, "", "Approved"},
		{"succeeded, any card", cardtest.Visa, processor.AuthenticationSucceeded, simulator.ProfileStandard, 1000, false, "", "Approved"},
		{"succeeded, then the profile decides", cardtest.ThreeDSecure, processor.AuthenticationSucceeded, simulator.ProfilePayfirma, 4000, false, "card_declined", "Declined"},
		{"succeeded, then the expiry decides", cardtest.ThreeDSecure, processor.AuthenticationSucceeded, simulator.ProfileStandard, 1000, true, "expired_card", "Expired card"},
	} {
		p := pay(t, tc.pan, tc.amount, tc.profile)
		p.Authentication = tc.auth
		if tc.expired {
			p.Expiry = card.Expiry{Month: 10, Year: 2026}
		}
		r, err := s.Authorize(ctx, p)
		if err != nil || r.Approved != (tc.code == "") || r.Code != tc.code || r.Message != tc.msg {
			t.Errorf("%s: %+v, %v; want %q %q", tc.name, r, err, tc.code, tc.msg)
		}
	}
}

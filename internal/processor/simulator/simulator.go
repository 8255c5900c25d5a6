// Package simulator is Kassa's built-in processor. It moves no money: it decides by the well-known
// test card numbers (or, for a merchant on the "payfirma" profile, by the original sandbox's amount
// rule), declines expired cards, asks for a 3-D Secure challenge for two test cards, and lets
// authorization holds lapse after a configurable number of days.
//
// The simulator keeps no state. Lookup therefore reports every operation as never received: an
// attempt cut off by a crash is failed by the payments core and its reservation released, which is
// what a real acquirer answers for a request that never reached it.
package simulator

import (
	"context"
	"time"

	"github.com/kassapay/kassa/internal/processor"
)

// Profiles of the simulator's decision rule.
const (
	// ProfileStandard approves by default and declines the test cards listed in declines.
	ProfileStandard = "standard"
	// ProfilePayfirma is the original sandbox's rule: an odd whole-currency-unit part approves and an
	// even one declines ($51.20 approves, $40.11 declines).
	ProfilePayfirma = "payfirma"
)

// Config configures a Simulator.
type Config struct {
	Latency  time.Duration    // added to every call (default none)
	HoldDays int              // days an authorization hold lasts (default 7)
	Now      func() time.Time // default time.Now
}

// Simulator is a Processor that decides by rule.
type Simulator struct {
	latency time.Duration
	hold    time.Duration
	now     func() time.Time
}

// New returns a Simulator.
func New(cfg Config) *Simulator {
	s := &Simulator{latency: cfg.Latency, hold: time.Duration(cfg.HoldDays) * 24 * time.Hour, now: cfg.Now}
	if cfg.HoldDays <= 0 {
		s.hold = 7 * 24 * time.Hour
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

var (
	_ processor.Processor     = (*Simulator)(nil)
	_ processor.Authenticator = (*Simulator)(nil)
)

// challenged are the test cards whose issuer requires a 3-D Secure challenge, under every profile.
var challenged = map[string]bool{"4000002500003155": true, "4000002760003184": true}

// declines maps the test cards that decline to their answer.
var declines = map[string]processor.Result{
	"4000000000000002": {Code: processor.CodeDeclined, Message: "Declined"},
	"4000000000009995": {Code: processor.CodeInsufficientFunds, Message: "Insufficient funds"},
	"4000000000009987": {Code: processor.CodeLostCard, Message: "Lost card"},
	"4000000000009979": {Code: processor.CodeStolenCard, Message: "Stolen card"},
	"4000000000000069": {Code: processor.CodeExpiredCard, Message: "Expired card"},
	"4000000000000127": {Code: processor.CodeIncorrectCVC, Message: "Incorrect CVC"},
	"4000000000000119": {Code: processor.CodeProcessingError, Message: "Processing error"},
}

func approved(ref string) processor.Result {
	return processor.Result{Approved: true, Message: "Approved", Reference: "sim_" + ref}
}

func declined(ref, code, msg string) processor.Result {
	return processor.Result{Code: code, Message: msg, Reference: "sim_" + ref}
}

// wait adds the configured latency, returning early with ctx's error.
func (s *Simulator) wait(ctx context.Context) error {
	if s.latency <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ChallengeRequired answers true for the two 3-D Secure test cards and false for every other card.
func (s *Simulator) ChallengeRequired(ctx context.Context, p processor.Payment) (bool, error) {
	if err := s.wait(ctx); err != nil {
		return false, err
	}
	return challenged[p.Card.Digits()], nil
}

// Authorize decides a payment: an expired card declines; then 3-D Secure, as processor.Authenticator
// rules (a failed authentication declines any card; a card that requires a challenge declines
// without a successful one, unless the payment is a mail or telephone order); then the merchant's
// profile rules.
func (s *Simulator) Authorize(ctx context.Context, p processor.Payment) (processor.Result, error) {
	if err := s.wait(ctx); err != nil {
		return processor.Result{}, err
	}
	if p.Expiry.Expired(s.now()) {
		return declined(p.Reference, processor.CodeExpiredCard, "Expired card"), nil
	}
	switch {
	case p.Authentication == processor.AuthenticationFailed:
		return declined(p.Reference, processor.CodeAuthenticationFailed, "Authentication failed"), nil
	case challenged[p.Card.Digits()] && p.Authentication != processor.AuthenticationSucceeded && !p.MailOrder:
		return declined(p.Reference, processor.CodeAuthenticationRequired, "Authentication required"), nil
	}
	if p.Merchant.SimulatorProfile == ProfilePayfirma {
		if p.Amount == 0 || wholeUnits(p.Amount, p.Currency.Digits)%2 == 1 {
			return approved(p.Reference), nil
		}
		return declined(p.Reference, processor.CodeDeclined, "Declined"), nil
	}
	if d, ok := declines[p.Card.Digits()]; ok {
		return declined(p.Reference, d.Code, d.Message), nil
	}
	return approved(p.Reference), nil
}

func wholeUnits(minor int64, digits int) int64 {
	for range digits {
		minor /= 10
	}
	return minor
}

// Capture approves unless the hold has lapsed.
func (s *Simulator) Capture(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	if err := s.wait(ctx); err != nil {
		return processor.Result{}, err
	}
	if !s.now().Before(f.AuthorizedAt.Add(s.hold)) {
		return declined(f.Reference, processor.CodeAuthorizationExpired, "Authorization expired"), nil
	}
	return approved(f.Reference), nil
}

// Refund approves.
func (s *Simulator) Refund(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	if err := s.wait(ctx); err != nil {
		return processor.Result{}, err
	}
	return approved(f.Reference), nil
}

// Void approves.
func (s *Simulator) Void(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	if err := s.wait(ctx); err != nil {
		return processor.Result{}, err
	}
	return approved(f.Reference), nil
}

// Lookup reports every operation as never received (see the package comment).
func (s *Simulator) Lookup(ctx context.Context, op processor.Operation) (processor.Result, error) {
	return processor.Result{}, processor.ErrNotFound
}

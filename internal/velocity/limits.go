package velocity

import (
	"time"

	"github.com/kassapay/kassa/internal/fault"
)

// Limits are a merchant's velocity limits (kassa merchant update --velocity-…). A zero field is Kassa's
// default (Defaults): a merchant that never set a limit follows the defaults, and a partner acting for
// its own account, which has no merchant, has all of them.
type Limits struct {
	CardDeclines       int `json:"card_declines_per_hour"`             // declines of one card, per merchant
	CredentialDeclines int `json:"credential_declines_per_10_minutes"` // declines of one credential's payments
	IntentFailures     int `json:"intent_failures_per_hour"`           // failed confirmations of one payment intent
	Sessions           int `json:"sessions_per_minute"`                // hosted-page sessions one API key creates
	RequestRate        int `json:"requests_per_second"`                // authenticated API requests of one credential
}

// Defaults are the limits of a merchant that set none: what a real merchant does not reach by
// accident, and an attacker reaches at once (see docs/design/velocity.md).
//
//   - 10 declines of one card in an hour: a cardholder retries a declined card two or three times;
//     guessing an expiry date or a CVC takes dozens to thousands of tries.
//   - 500 declines per credential in 10 minutes: a shop taking 5 card payments a second (18,000 an
//     hour), at the 10 to 15 % decline rate of card-not-present payments, declines about 450.
//   - 10 failed confirmations of one payment intent in an hour, as the hosted page allows 10 tries.
//   - 300 hosted-page sessions per key a minute: 5 checkouts started every second.
//   - 1,000 requests a second per credential: a busy shop's integration sends hundreds.
var Defaults = Limits{CardDeclines: 10, CredentialDeclines: 500, IntentFailures: 10, Sessions: 300, RequestRate: 1000}

// MaxLimit bounds every limit a merchant may set.
const MaxLimit = 1_000_000

// UseDefault, in a field of an update (Limits.Apply), restores Kassa's default.
const UseDefault = -1

// Effective returns l with each zero field replaced by its default.
func (l Limits) Effective() Limits {
	for i, f := range l.fields() {
		if *f.v == 0 {
			*f.v = *Defaults.fields()[i].v
		}
	}
	return l
}

// Apply returns l changed by the update u: a positive field of u sets the limit, UseDefault restores
// the default, and zero leaves it as it is. A field beyond 1 to MaxLimit is a 400 naming it.
func (l Limits) Apply(u Limits) (Limits, error) {
	set := u.fields()
	for i, f := range l.fields() {
		switch v := *set[i].v; {
		case v == UseDefault:
			*f.v = 0
		case v > 0 && v <= MaxLimit:
			*f.v = v
		case v != 0:
			return Limits{}, fault.Invalid(f.name, "%s must be a whole number from 1 to %d, or default", f.name, MaxLimit)
		}
	}
	return l, nil
}

// field is one limit of Limits, named as the operator's flag and a 400 name it.
type field struct {
	name string
	v    *int
}

func (l *Limits) fields() []field {
	return []field{{"velocity_card_declines", &l.CardDeclines}, {"velocity_credential_declines", &l.CredentialDeclines},
		{"velocity_intent_failures", &l.IntentFailures}, {"velocity_sessions", &l.Sessions}, {"velocity_request_rate", &l.RequestRate}}
}

// A policy is one limit: its name in the rate-limit headers, its window, which of a
// merchant's Limits is its quota, and what a refusal says.
type policy struct {
	name    string
	window  time.Duration
	quota   func(Limits) int
	refusal string // formatted with the quota and the seconds until the window ends
}

// The limits: declines per card (by its keyed fingerprint) per hour, declines per credential per 10
// minutes, failed confirmations per payment intent per hour, hosted-page sessions created per key per
// minute, and requests per credential per second. The first four are windowed counts; the last a
// token bucket whose window is the second it refills in.
var (
	cardDeclines = &policy{"card-declines", time.Hour, func(l Limits) int { return l.CardDeclines },
		"This card has been declined %d times within an hour; it is not sent to the processor for another %d seconds."}
	credentialDeclines = &policy{"credential-declines", 10 * time.Minute, func(l Limits) int { return l.CredentialDeclines },
		"Payments by this credential have been declined %d times within 10 minutes; sales and authorizations are refused for another %d seconds."}
	intentFailures = &policy{"intent-failures", time.Hour, func(l Limits) int { return l.IntentFailures },
		"This payment intent has failed %d confirmations within an hour; it cannot be confirmed for another %d seconds."}
	sessions = &policy{"sessions", time.Minute, func(l Limits) int { return l.Sessions },
		"This API key has created %d hosted-page sessions within a minute; retry in %d seconds."}
	requests = &policy{"requests", time.Second, func(l Limits) int { return l.RequestRate },
		"This credential sends more than %d requests a second; retry in %d seconds."}
)

// refuse is the 429 of rl, a limit of p that is used up.
func (p *policy) refuse(rl *fault.RateLimit) *fault.Error {
	return fault.RateLimited(rl, p.refusal, rl.Quota, max(rl.ResetSeconds(), 1))
}

// Package plan keeps the merchants' plans — payment templates that customers subscribe to — and the
// calendar arithmetic of billing: when each cycle of a subscription falls due. It also names the
// statuses of subscriptions, which plans count.
package plan

import (
	"strings"
	"time"
)

// Frequency is how often a plan bills.
type Frequency string

// The frequencies (wire-contract.md, "frequency").
const (
	Daily     Frequency = "DAILY"
	Weekly    Frequency = "WEEKLY"
	Monthly   Frequency = "MONTHLY"
	Quarterly Frequency = "QUARTERLY"
	Annually  Frequency = "ANNUALLY"
)

// ParseFrequency reads a frequency in any letter case. The original's documentation misspells MONTHLY
// as MOTHLY and some clients send YEARLY: both are accepted as aliases (wire-contract.md).
func ParseFrequency(s string) (Frequency, bool) {
	switch f := Frequency(strings.ToUpper(strings.TrimSpace(s))); f {
	case Daily, Weekly, Monthly, Quarterly, Annually:
		return f, true
	case "MOTHLY":
		return Monthly, true
	case "YEARLY":
		return Annually, true
	}
	return "", false
}

func (f Frequency) months() int {
	switch f {
	case Monthly:
		return 1
	case Quarterly:
		return 3
	case Annually:
		return 12
	}
	return 0
}

// Due is when cycle k (0 is the start) of a schedule that starts at start falls, in loc: DAILY k days
// later, WEEKLY 7k days later, MONTHLY k months later on the start's day of the month, clamped to the
// month's last day and anchored to the start (started on Jan 31: Feb 28 or 29, Mar 31, Apr 30),
// QUARTERLY every 3 months and ANNUALLY every 12 in the same way (Feb 29 falls on Feb 28 in common
// years). The time of day is always the start's, in loc.
func (f Frequency) Due(start time.Time, k int, loc *time.Location) time.Time {
	s := start.In(loc)
	y, m, d := s.Date()
	hh, mm, ss := s.Clock()
	ns := s.Nanosecond()
	switch f {
	case Daily:
		return time.Date(y, m, d+k, hh, mm, ss, ns, loc)
	case Weekly:
		return time.Date(y, m, d+7*k, hh, mm, ss, ns, loc)
	}
	first := time.Date(y, m+time.Month(k*f.months()), 1, hh, mm, ss, ns, loc)
	last := time.Date(first.Year(), first.Month()+1, 0, 0, 0, 0, 0, loc).Day()
	return time.Date(first.Year(), first.Month(), min(d, last), hh, mm, ss, ns, loc)
}

// Subscription statuses (wire-contract.md, "Subscription status").
const (
	StatusActive    = "ACTIVE"    // billed on schedule
	StatusRetry     = "RETRY"     // the last charge was declined; it will be retried
	StatusSuspended = "SUSPENDED" // retries exhausted; not billed until reactivated
	StatusPaused    = "PAUSED"    // cycles pass without charge
	StatusCanceled  = "CANCELED"  // final
	StatusExpired   = "EXPIRED"   // all payments made; final
)

// CurrentStatusesSQL lists, as SQL, the statuses of current subscriptions: those a plan counts in
// current_subscriptions, and which keep a plan, a customer or a card from deletion.
const CurrentStatusesSQL = `('ACTIVE', 'RETRY', 'SUSPENDED', 'PAUSED')`

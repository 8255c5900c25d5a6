// Package cardtest helps tests prove that card numbers never leak: it lists the test card numbers the
// suite uses, and gives a logger and a checker that fail a test when one of them appears in full in a
// log line or a response body.
package cardtest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Approved cards of the simulator, by brand.
const (
	Visa       = "4242424242424242"
	Visa2      = "4111111111111111"
	Mastercard = "5555555555554444"
	Amex       = "378282246310005"
	Discover   = "6011111111111117"
)

// Declining cards of the simulator.
const (
	Declined          = "4000000000000002"
	InsufficientFunds = "4000000000009995"
	LostCard          = "4000000000009987"
	StolenCard        = "4000000000009979"
	ExpiredCard       = "4000000000000069"
	IncorrectCVC      = "4000000000000127"
	ProcessingError   = "4000000000000119"
)

// Cards of the simulator whose issuer requires a 3-D Secure challenge: approved once the cardholder
// passes it, declined with authentication_required without it.
const (
	ThreeDSecure  = "4000002500003155"
	ThreeDSecure2 = "4000002760003184"
)

// All is every card number the tests use; none may ever appear in full in a log or a response.
var All = []string{Visa, Visa2, Mastercard, Amex, Discover, Declined, InsufficientFunds, LostCard,
	StolenCard, ExpiredCard, IncorrectCVC, ProcessingError, ThreeDSecure, ThreeDSecure2, "3566002020360505", "36227206271667", "6200000000000005",
	"5200828282828210", "4012888888881881", "371449635398431"}

// Find returns the first test card number that text contains in full, or "".
func Find(text string) string {
	for _, pan := range All {
		if strings.Contains(text, pan) {
			return pan
		}
	}
	return ""
}

// Check fails t when text contains a test card number in full.
func Check(t testing.TB, where, text string) {
	t.Helper()
	if pan := Find(text); pan != "" {
		t.Errorf("card number %s…%s appears in full in %s", pan[:6], pan[len(pan)-4:], where)
	}
}

// Logger returns a JSON logger whose output is checked for card numbers when t ends, and the buffer
// it writes to.
func Logger(t testing.TB) (*slog.Logger, *Buffer) {
	t.Helper()
	b := &Buffer{}
	t.Cleanup(func() { Check(t, "the log", b.String()) })
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// Buffer is a concurrency-safe bytes.Buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }

// String returns everything written so far.
func (b *Buffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// AbsentCVV picks a four-digit code that data does not contain yet, so that finding it there later can
// only mean that it was stored.
func AbsentCVV(t testing.TB, data string) string {
	t.Helper()
	for _, c := range []string{"8317", "7391", "9157", "5931", "3719", "1793"} {
		if !strings.Contains(data, c) {
			return c
		}
	}
	t.Fatal("no absent code")
	return ""
}

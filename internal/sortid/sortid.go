// Package sortid makes identifiers that sort as their creation times do: the time in milliseconds
// as 9 base-32 digits, then random base-32 digits. An index of such ids grows at its end, where a
// random id lands on any page of it: on a ledger of millions of rows every insert dirtied, wrote to
// the write-ahead log and cached a page of its own.
package sortid

import (
	"crypto/rand"
	"time"
)

// Digits are rand.Text's digits (RFC 4648 base 32), in ascending byte order, so that ids sort as
// their times do.
const Digits = "234567ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// timeDigits is the length of the time part: 45 bits of milliseconds, enough until the year 3084.
const timeDigits = 9

// New returns an id of timeDigits digits of at's Unix milliseconds followed by random digits, n
// characters in all (n > timeDigits; n - timeDigits random digits of 5 bits each, at most 26).
func New(at time.Time, n int) string {
	ms := uint64(max(at.UnixMilli(), 0))
	b := make([]byte, timeDigits, n)
	for i := timeDigits - 1; i >= 0; i-- {
		b[i] = Digits[ms&31]
		ms >>= 5
	}
	return string(append(b, rand.Text()[:n-timeDigits]...))
}

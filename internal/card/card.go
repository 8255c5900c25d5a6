// Package card holds card data while Kassa handles it: a Number type that never prints more than the
// first six and last four digits (PCI DSS 3.4.1), the Luhn check, brand detection by prefix and
// length, and expiry and CVV rules.
package card

import (
	"fmt"
	"log/slog"
	"time"
)

// Number is a primary account number. Its String, Format, GoString, LogValue and MarshalJSON show at
// most the first six and last four digits, so that a PAN cannot reach a log line, an error string or a
// response by accident. Digits is the one way to the full number.
type Number struct{ digits string }

// ParseNumber accepts 12 to 19 digits. Spaces and dashes between digit groups are removed. Whether
// the length suits the brand and whether the Luhn check passes are checked by Validate.
func ParseNumber(s string) (Number, error) {
	b := make([]byte, 0, 19)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if len(b) == 19 {
				return Number{}, ErrNumberLength
			}
			b = append(b, c)
		case (c == ' ' || c == '-') && len(b) > 0 && i+1 < len(s):
		default:
			return Number{}, ErrNumberDigits
		}
	}
	if len(b) < 12 {
		return Number{}, ErrNumberLength
	}
	return Number{digits: string(b)}, nil
}

// Digits returns the full number. Call it only to hand the number to a processor or to encrypt it.
func (n Number) Digits() string { return n.digits }

// Last4 returns the last four digits.
func (n Number) Last4() string { return n.digits[len(n.digits)-4:] }

// First6 returns the first six digits (the issuer identification number).
func (n Number) First6() string { return n.digits[:6] }

// Masked is the number with every digit but the first six and last four replaced by '*'.
func (n Number) Masked() string {
	if len(n.digits) < 12 {
		return "****"
	}
	b := []byte(n.digits)
	for i := 6; i < len(b)-4; i++ {
		b[i] = '*'
	}
	return string(b)
}

// IsZero reports whether n holds no number.
func (n Number) IsZero() bool { return n.digits == "" }

func (n Number) String() string   { return n.Masked() }
func (n Number) GoString() string { return "card.Number(" + n.Masked() + ")" }

// Format masks the number whatever the verb.
func (n Number) Format(f fmt.State, _ rune) { f.Write([]byte(n.Masked())) }

// LogValue masks the number in slog records.
func (n Number) LogValue() slog.Value { return slog.StringValue(n.Masked()) }

// MarshalJSON writes the masked number.
func (n Number) MarshalJSON() ([]byte, error) { return []byte(`"` + n.Masked() + `"`), nil }

// Valid reports whether the digits pass the Luhn check (ISO/IEC 7812-1 Annex B).
func (n Number) Valid() bool { return luhn(n.digits) }

func luhn(d string) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// Expiry is a card's expiry month. A card is valid through the last day of that month.
type Expiry struct {
	Month int // 1..12
	Year  int // four digits
}

// ParseExpiry accepts a month 1..12 and a year of two digits (30 is 2030) or four.
func ParseExpiry(month, year string) (Expiry, error) {
	m, ok := atoi(month)
	if !ok || len(month) > 2 || m < 1 || m > 12 {
		return Expiry{}, ErrMonth
	}
	y, ok := atoi(year)
	switch {
	case !ok:
		return Expiry{}, ErrYear
	case len(year) == 2:
		y += 2000
	case len(year) == 4 && y >= 2000:
	default:
		return Expiry{}, ErrYear
	}
	return Expiry{Month: m, Year: y}, nil
}

// Expired reports whether the card has expired by now (in UTC).
func (e Expiry) Expired(now time.Time) bool {
	firstAfter := time.Date(e.Year, time.Month(e.Month)+1, 1, 0, 0, 0, 0, time.UTC)
	return !now.Before(firstAfter)
}

// String is "MM/YY", the shape of card_expiry in responses.
func (e Expiry) String() string { return fmt.Sprintf("%02d/%02d", e.Month, e.Year%100) }

// ValidateCVV checks a card verification value: 4 digits for American Express, 3 for every other
// brand.
func ValidateCVV(cvv string, b Brand) error {
	want := 3
	if b == Amex {
		want = 4
	}
	if _, ok := atoi(cvv); !ok {
		return ErrCVVDigits
	}
	if len(cvv) != want {
		if want == 4 {
			return ErrCVVAmex
		}
		return ErrCVVLength
	}
	return nil
}

// atoi parses a non-empty string of at most 9 ASCII digits.
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

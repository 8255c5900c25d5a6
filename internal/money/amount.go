package money

import (
	"errors"
	"fmt"
	"strconv"
)

// MaxMinor bounds every amount Kassa handles: 10^15 minor units leaves room to add amounts without
// overflowing an int64, and is far above any card transaction.
const MaxMinor = 1_000_000_000_000_000

// Errors of Parse; each says what is wrong in words a client can act on.
var (
	ErrSyntax    = errors.New("must be a decimal number such as 10 or 10.50")
	ErrNegative  = errors.New("must not be negative")
	ErrTooLarge  = errors.New("is too large")
	errPrecision = "has more decimals than %s allows (%d)"
)

// Parse converts a decimal string ("11", "59.99", "0.5") into minor units of c, exactly. It rejects a
// sign other than a leading minus, exponents, more decimals than the currency has (10.999 in a
// two-decimal currency is an error, not a rounding) and values above MaxMinor. A negative value
// parses to ErrNegative so that callers can name the rule.
func Parse(s string, c Currency) (int64, error) {
	if s == "" {
		return 0, ErrSyntax
	}
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	var whole, frac string
	dot := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			if dot >= 0 {
				return 0, ErrSyntax
			}
			dot = i
		} else if s[i] < '0' || s[i] > '9' {
			return 0, ErrSyntax
		}
	}
	if dot < 0 {
		whole = s
	} else {
		whole, frac = s[:dot], s[dot+1:]
	}
	if whole == "" || (dot >= 0 && frac == "") {
		return 0, ErrSyntax // ".5" and "5." are not amounts a client means to send
	}
	// Trailing zeros beyond the currency's digits are exact ("10.500" is 10.50).
	for len(frac) > c.Digits && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if len(frac) > c.Digits {
		return 0, fmt.Errorf(errPrecision, c.Code, c.Digits)
	}
	for len(whole) > 1 && whole[0] == '0' {
		whole = whole[1:]
	}
	if len(whole) > 16 {
		return 0, ErrTooLarge
	}
	var v int64
	for i := 0; i < len(whole); i++ {
		v = v*10 + int64(whole[i]-'0')
	}
	for i := 0; i < c.Digits; i++ {
		v *= 10
		if i < len(frac) {
			v += int64(frac[i] - '0')
		}
		if v > MaxMinor {
			return 0, ErrTooLarge
		}
	}
	if v > MaxMinor {
		return 0, ErrTooLarge
	}
	if neg && v != 0 {
		return 0, ErrNegative
	}
	return v, nil
}

// Format writes minor units of c as a decimal string with exactly c.Digits decimals: 1100 CAD is
// "11.00", 500 JPY is "500".
func Format(minor int64, c Currency) string {
	return string(AppendFormat(nil, minor, c))
}

// AppendFormat appends Format(minor, c) to b.
func AppendFormat(b []byte, minor int64, c Currency) []byte {
	if minor < 0 {
		b = append(b, '-')
		minor = -minor
	}
	if c.Digits == 0 {
		return strconv.AppendInt(b, minor, 10)
	}
	var p int64 = 1
	for i := 0; i < c.Digits; i++ {
		p *= 10
	}
	b = strconv.AppendInt(b, minor/p, 10)
	b = append(b, '.')
	f := minor % p
	for q := p / 10; q > 1 && f < q; q /= 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, f, 10)
}

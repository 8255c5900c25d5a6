package card

import (
	"errors"
	"fmt"
)

// Brand is a card network, spelled as the wire's card_type.
type Brand string

// The brands the wire contract names.
const (
	Visa       Brand = "VISA"
	Mastercard Brand = "MASTERCARD"
	Amex       Brand = "AMEX"
	Discover   Brand = "DISCOVER"
	JCB        Brand = "JCB"
	Diners     Brand = "DINERS"
	UnionPay   Brand = "UNIONPAY"
	Other      Brand = "OTHER"
)

// brandRule is a prefix range (inclusive, compared on the number's first len(lo) digits) and the
// lengths the brand issues.
type brandRule struct {
	brand   Brand
	lo, hi  string
	lengths []int
}

// brandRules are checked in order; the first match wins. Ranges from the networks' published IIN
// tables.
var brandRules = []brandRule{
	{Amex, "34", "34", []int{15}},
	{Amex, "37", "37", []int{15}},
	{Diners, "300", "305", []int{14, 15, 16, 17, 18, 19}},
	{Diners, "3095", "3095", []int{14, 15, 16, 17, 18, 19}},
	{Diners, "36", "36", []int{14, 15, 16, 17, 18, 19}},
	{Diners, "38", "39", []int{14, 15, 16, 17, 18, 19}},
	{JCB, "3528", "3589", []int{16, 17, 18, 19}},
	{Visa, "4", "4", []int{13, 16, 19}},
	{Mastercard, "51", "55", []int{16}},
	{Mastercard, "2221", "2720", []int{16}},
	{Discover, "6011", "6011", []int{16, 17, 18, 19}},
	{Discover, "644", "649", []int{16, 17, 18, 19}},
	{Discover, "65", "65", []int{16, 17, 18, 19}},
	{UnionPay, "62", "62", []int{16, 17, 18, 19}},
	{UnionPay, "81", "81", []int{16, 17, 18, 19}},
}

// BrandOf detects the brand from the number's prefix; numbers of no known range are Other.
func BrandOf(n Number) Brand {
	if r, ok := ruleOf(n.digits); ok {
		return r.brand
	}
	return Other
}

func ruleOf(d string) (brandRule, bool) {
	for _, r := range brandRules {
		if len(d) < len(r.lo) {
			continue
		}
		p := d[:len(r.lo)]
		if p >= r.lo && p <= r.hi {
			return r, true
		}
	}
	return brandRule{}, false
}

// Validation errors, phrased to follow the field's name.
var (
	ErrNumberDigits = errors.New("must contain only digits")
	ErrNumberLength = errors.New("must be 12 to 19 digits")
	ErrLuhn         = errors.New("is not a valid card number (Luhn check failed)")
	ErrMonth        = errors.New("must be a month from 1 to 12")
	ErrYear         = errors.New("must be a year of two or four digits")
	ErrCVVDigits    = errors.New("must contain only digits")
	ErrCVVLength    = errors.New("must be 3 digits")
	ErrCVVAmex      = errors.New("must be 4 digits for American Express")
)

// Validate checks the Luhn digit and that the length is one the brand issues (any of 12 to 19 for
// Other).
func Validate(n Number) error {
	if r, ok := ruleOf(n.digits); ok {
		good := false
		for _, l := range r.lengths {
			good = good || l == len(n.digits)
		}
		if !good {
			return fmt.Errorf("has %d digits, which %s does not issue", len(n.digits), r.brand)
		}
	}
	if !n.Valid() {
		return ErrLuhn
	}
	return nil
}

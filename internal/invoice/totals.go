package invoice

import (
	"errors"
	"math/big"
	"strconv"
	"strings"

	"github.com/kassapay/kassa/internal/money"
)

// Totals: how Kassa computes an invoice's amounts, exactly, in integer minor units of its currency
// (never through a float). The rule, which docs/guides/payments/invoices.md and docs/design/invoices.md
// repeat:
//
//  1. A line's total_amount is quantity × unit_price, rounded half up to the currency's minor unit
//     (only a fractional quantity needs rounding: 1.5 hours at 33.33 is 49.995, so 50.00).
//  2. A line's tax_amount is its total_amount × tax_rate / 100, rounded half up to the minor unit.
//  3. subtotal_amount is the sum of the lines' totals; tax_amount the sum of their taxes.
//  4. total_amount = subtotal_amount + tax_amount − discount_amount + shipping_amount. The discount
//     is taken off after tax (it does not lower the tax), and shipping is not taxed.
//
// A client may send any of these totals; each must be what Kassa computed, except the invoice's
// tax_amount and total_amount, which may differ by as many minor units as rounding the tax of every
// line, instead of the tax of the subtotal once, can make: half a unit per line, ⌈lines / 2⌉. What a
// client sends is only checked: the invoice keeps the amounts Kassa computed.

// QuantityScale is the number of decimals of a line's quantity.
const QuantityScale = 3

// RateScale is the number of decimals of a tax rate (in percent): 8.875 is 88750 units.
const RateScale = 4

// maxQuantity bounds a line's quantity, in thousandths: one million.
const maxQuantity = 1_000_000 * 1000

// maxRate is 100 percent in rate units.
const maxRate = 100 * 10_000

var (
	errDecimal  = errors.New("must be a decimal number such as 2 or 1.5")
	errTooLarge = errors.New("is too large")
)

// parseDecimal reads a non-negative decimal string with at most scale decimals into an integer of
// 10^-scale units, exactly.
func parseDecimal(s string, scale int) (int64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || (dot && frac == "") {
		return 0, errDecimal
	}
	for len(frac) > scale && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if len(frac) > scale {
		return 0, errors.New("has more than " + strconv.Itoa(scale) + " decimals")
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return 0, errDecimal
			}
		}
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > 12 {
		return 0, errTooLarge
	}
	var v int64
	for i := 0; i < len(whole); i++ {
		v = v*10 + int64(whole[i]-'0')
	}
	for i := 0; i < scale; i++ {
		v *= 10
		if i < len(frac) {
			v += int64(frac[i] - '0')
		}
	}
	return v, nil
}

// formatDecimal writes v units of 10^-scale with as few decimals as it needs (at least none).
func formatDecimal(v int64, scale int) string {
	s := money.Format(v, money.Currency{Digits: scale})
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// mulDivHalfUp returns a × b / d rounded half up, for non-negative a and b and positive d, and
// whether it fits in MaxMinor.
func mulDivHalfUp(a, b, d int64) (int64, bool) {
	p := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	p.Mul(p, big.NewInt(2))
	p.Add(p, big.NewInt(d))
	p.Quo(p, new(big.Int).Mul(big.NewInt(d), big.NewInt(2)))
	if !p.IsInt64() || p.Int64() > money.MaxMinor {
		return 0, false
	}
	return p.Int64(), true
}

// Totals are an invoice's computed amounts.
type Totals struct {
	Subtotal, Tax, Total int64
}

// lineTotals computes a line's total and tax: rules 1 and 2.
func lineTotals(quantity, unitPrice, rate int64) (total, tax int64, ok bool) {
	if total, ok = mulDivHalfUp(quantity, unitPrice, 1000); !ok {
		return 0, 0, false
	}
	tax, ok = mulDivHalfUp(total, rate, 100*10_000)
	return total, tax, ok
}

// compute fills in the lines' totals of inv and its own, by the rule above. It reports false when an
// amount would exceed money.MaxMinor.
func compute(inv *Invoice) bool {
	var t Totals
	for i := range inv.Items {
		it := &inv.Items[i]
		var ok bool
		if it.Total, it.Tax, ok = lineTotals(it.Quantity, it.UnitPrice, inv.TaxRate); !ok {
			return false
		}
		t.Subtotal += it.Total
		t.Tax += it.Tax
		if t.Subtotal > money.MaxMinor || t.Tax > money.MaxMinor {
			return false
		}
	}
	t.Total = t.Subtotal + t.Tax - inv.Discount + inv.Shipping
	inv.Totals = t
	return t.Total <= money.MaxMinor
}

// tolerance is how far a client's invoice tax_amount or total_amount may be from Kassa's: ⌈lines / 2⌉
// minor units.
func tolerance(lines int) int64 { return int64(lines+1) / 2 }

package invoice

import (
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"

	"golang.org/x/text/language"
)

// Previewed is what an invoice's body comes to while it is still being typed (Preview).
type Previewed struct {
	Currency           money.Currency
	Lines              []LinePreview
	Discount, Shipping int64
	// Totals are those of the lines that read, with the discount and the shipping.
	Totals Totals
	// Err is why the invoice as a whole does not read (its currency, tax rate, discount or shipping,
	// no line, amounts too large), as Apply names it; nil when it reads.
	Err error
}

// LinePreview is one line of a Previewed body: its amounts, or why it does not read.
type LinePreview struct {
	Total, Tax int64
	Err        error // a *fault.Error naming the line's field as Apply names it (items[1].unit_price)
}

// Preview computes what body b of a new invoice of merchant m comes to, with Apply's reading of each
// field and the totals' own arithmetic (compute), for a form that shows the totals as they are typed
// (the dashboard's): each line that reads gets its total_amount and tax_amount, a line that does not
// gets Apply's error about it, and the totals are those of the lines that read. So what a form shows
// is what saving the invoice computes; the checks that concern the whole saved invoice (a total above
// zero and within the merchant's maximum, the client's totals) are Apply's alone.
func Preview(b Body, m merchant.Merchant) Previewed {
	var p Previewed
	c, err := payment.CurrencyOf(b.Currency, m)
	if err != nil {
		p.Err = err
		return p
	}
	inv := Invoice{Currency: c}
	p.Currency = c
	if p.Err = b.applyRate(&inv); p.Err != nil {
		return p
	}
	if p.Err = b.applyAmounts(&inv); p.Err != nil {
		return p
	}
	p.Discount, p.Shipping = inv.Discount, inv.Shipping
	lines, err := parseItems(b.Items)
	if err != nil {
		p.Err = err
	}
	read := make([]int, 0, len(lines)) // the lines that read, by their index in inv.Items
	for i, l := range lines {
		it, err := l.item(i, c)
		p.Lines = append(p.Lines, LinePreview{Err: err})
		if err == nil {
			inv.Items = append(inv.Items, it)
			read = append(read, i)
		}
	}
	if !compute(&inv) {
		p.Err = fault.Invalid("total_amount", "the invoice's amounts are too large")
		return p
	}
	for k, i := range read {
		p.Lines[i].Total, p.Lines[i].Tax = inv.Items[k].Total, inv.Items[k].Tax
	}
	p.Totals = inv.Totals
	return p
}

// TotalRows are the invoice's totals as its page, form, e-mail and the dashboard show them, amounts
// in lang: the subtotal, the tax, discount and shipping when there are any, and the total.
func (inv Invoice) TotalRows(lang language.Tag) [][2]string { return totalRows(inv, lang) }

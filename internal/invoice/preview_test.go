package invoice

import (
	"errors"
	"testing"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
)

// Preview comes to what Apply computes for a body that reads whole (the README's invoice, 176.98 CAD),
// line by line; a line that does not read is left out with Apply's error naming its field, and the
// other lines still count; a tax rate that does not read leaves no totals.
func TestPreviewIsApply(t *testing.T) {
	t.Parallel()
	m := merchant.Merchant{ID: "m", DefaultCurrency: "CAD", Settings: merchant.Settings{Currencies: []string{"CAD", "JPY"}, MaxAmountCents: 99999999}}
	body := func(items string) Body {
		b, err := ParseBody([]byte(`{"currency": "CAD", "tax_rate": "13", "discount_amount": "5.00", "shipping_amount": "12.50", "items": ` + items + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	whole := body(`[{"description": "Widgets", "quantity": 2, "unit_price": "49.99"}, {"description": "Hours", "quantity": "1.5", "unit_price": "33.33"}]`)
	var inv Invoice
	if err := whole.Apply(&inv, m, true); err != nil {
		t.Fatal(err)
	}
	p := Preview(whole, m)
	if p.Err != nil || p.Totals != inv.Totals || p.Totals.Total != 17698 || len(p.Lines) != 2 || p.Discount != 500 || p.Shipping != 1250 {
		t.Fatalf("Preview %+v, Apply %+v", p, inv.Totals)
	}
	for i, l := range p.Lines {
		if l.Err != nil || l.Total != inv.Items[i].Total || l.Tax != inv.Items[i].Tax {
			t.Errorf("line %d: Preview %+v, Apply %+v", i, l, inv.Items[i])
		}
	}

	half := body(`[{"description": "Widgets", "quantity": 2, "unit_price": "49.99"}, {"description": "Hours", "unit_price": "33.333"}]`)
	p = Preview(half, m)
	var f *fault.Error
	if p.Err != nil || p.Lines[0].Total != 9998 || !errors.As(p.Lines[1].Err, &f) || f.Field != "items[1].unit_price" ||
		p.Totals.Subtotal != 9998 || p.Totals.Total != 9998+1300-500+1250 {
		t.Fatalf("Preview of a line that does not read: %+v (%v)", p, p.Lines[1].Err)
	}
	var applied Invoice
	if err := half.Apply(&applied, m, true); !errors.As(err, &f) || f.Field != "items[1].unit_price" {
		t.Fatalf("Apply of the same: %v", err)
	}

	bad, err := ParseBody([]byte(`{"tax_rate": "101", "items": [{"description": "A", "unit_price": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := Preview(bad, m); !errors.As(p.Err, &f) || f.Field != "tax_rate" || p.Totals != (Totals{}) {
		t.Fatalf("Preview of a bad tax rate: %+v", p)
	}
}

package invoice

import (
	"testing"

	"github.com/kassapay/kassa/internal/money"
)

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in    string
		scale int
		want  int64
		ok    bool
	}{
		{"1", 3, 1000, true}, {"1.5", 3, 1500, true}, {"0.001", 3, 1, true}, {"2.500", 3, 2500, true}, {"2.5000", 3, 2500, true},
		{"0.0001", 3, 0, false}, {"1.", 3, 0, false}, {".5", 3, 0, false}, {"-1", 3, 0, false}, {"1e3", 3, 0, false},
		{"", 3, 0, false}, {"1.2.3", 3, 0, false}, {"8.875", 4, 88750, true}, {"100", 4, 1_000_000, true},
		{"0000000000000001", 3, 1000, true}, {"1234567890123", 3, 0, false},
	} {
		got, err := parseDecimal(c.in, c.scale)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseDecimal(%q, %d) = %d, %v; want %d, ok %v", c.in, c.scale, got, err, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		v     int64
		scale int
		want  string
	}{{1000, 3, "1"}, {1500, 3, "1.5"}, {1, 3, "0.001"}, {88750, 4, "8.875"}, {0, 4, "0"}, {130000, 4, "13"}} {
		if got := formatDecimal(c.v, c.scale); got != c.want {
			t.Errorf("formatDecimal(%d, %d) = %q, want %q", c.v, c.scale, got, c.want)
		}
	}
}

// Each line is rounded half up to the minor unit, its amount and then its tax; the invoice sums them.
func TestLineTotals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                 string
		quantity, unit, rate int64
		total, tax           int64
	}{
		{"whole quantity, no tax", 2000, 1999, 0, 3998, 0},
		{"fractional quantity rounds half up", 1500, 3333, 0, 5000, 0}, // 49.995 -> 50.00
		{"fractional quantity rounds down", 1499, 3333, 0, 4996, 0},    // 49.96167 -> 49.96
		{"13% tax", 1000, 1000, 130000, 1000, 130},                     // 10.00 at 13%: 1.30
		{"tax half up", 1000, 1050, 50000, 1050, 53},                   // 10.50 at 5%: 0.525 -> 0.53
		{"tax below half down", 1000, 1049, 50000, 1049, 52},           // 0.5245 -> 0.52
		{"8.875% tax", 3000, 1999, 88750, 5997, 532},                   // 59.97 at 8.875%: 5.3223 -> 5.32
		{"yen: 0 decimals", 3000, 333, 100000, 999, 100},               // ¥999 at 10%: 99.9 -> 100
		{"yen half up", 1000, 105, 100000, 105, 11},                    // ¥10.5 -> 11
		{"smallest quantity", 1, 1, 0, 0, 0},                           // 0.001 × 0.01 -> 0
	} {
		total, tax, ok := lineTotals(c.quantity, c.unit, c.rate)
		if !ok || total != c.total || tax != c.tax {
			t.Errorf("%s: total %d, tax %d (%v); want %d, %d", c.name, total, tax, ok, c.total, c.tax)
		}
	}
	if _, _, ok := lineTotals(maxQuantity, money.MaxMinor, 0); ok {
		t.Error("a line beyond MaxMinor was computed")
	}
}

func TestCompute(t *testing.T) {
	t.Parallel()
	cad, _ := money.Lookup("CAD")
	jpy, _ := money.Lookup("JPY")
	for _, c := range []struct {
		name                 string
		inv                  Invoice
		subtotal, tax, total int64
	}{
		{"CAD with tax, discount and shipping", Invoice{Currency: cad, TaxRate: 130000, Discount: 500, Shipping: 1250,
			Items: []Item{{Quantity: 2000, UnitPrice: 4999}, {Quantity: 1500, UnitPrice: 3333}, {Quantity: 1000, UnitPrice: 1050}}},
			// lines 99.98 (tax 13.00 of 12.9974), 50.00 (6.50), 10.50 (1.365 -> 1.37)
			16048, 2087, 16048 + 2087 - 500 + 1250},
		{"JPY with tax, discount and shipping", Invoice{Currency: jpy, TaxRate: 100000, Discount: 100, Shipping: 800,
			Items: []Item{{Quantity: 3000, UnitPrice: 333}, {Quantity: 1000, UnitPrice: 1505}}},
			// lines ¥999 (99.9 -> 100), ¥1505 (150.5 -> 151)
			2504, 251, 2504 + 251 - 100 + 800},
	} {
		inv := c.inv
		if !compute(&inv) || inv.Totals != (Totals{c.subtotal, c.tax, c.total}) {
			t.Errorf("%s: %+v, want %d, %d, %d", c.name, inv.Totals, c.subtotal, c.tax, c.total)
		}
	}
}

package invoice

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
)

// The invoice body parser never panics; what it refuses is a 400 naming the field at fault (or
// invalid_json for what is not a JSON object); what it accepts is an invoice of 1 to MaxItems lines
// whose totals follow the rule, with a total above zero within the merchant's maximum, in a currency
// the merchant accepts.
func FuzzInvoiceBody(f *testing.F) {
	for _, s := range []string{
		`{"items":[{"description":"Consulting","quantity":2,"unit_price":"49.99"}]}`,
		`{"invoice_number":"A-1","currency":"JPY","tax_rate":10,"items":[{"description":"Tea","quantity":"3","unit_price":333,"sku":"T1"}],` +
			`"discount_amount":100,"shipping_amount":"800","subtotal_amount":999,"tax_amount":100,"total_amount":1799}`,
		`{"tax_rate":"8.875","items":[{"description":"Hours","quantity":1.5,"unit_price":"33.33","total_amount":"50.00","tax_amount":"4.44"}]}`,
		`{"items":[{"description":"x","unit_price":"10.999"}]}`, `{"items":[]}`, `{"items":{}}`, `{"items":["x"]}`,
		`{"items":[{"description":"x","unit_price":1}],"total_amount":"2"}`, `{"items":[{"description":"x","unit_price":1}],"status":"PAID"}`,
		`{"items":[{"description":"x","unit_price":1}],"custom_fields":{"po":"42"},"due_date":"2030-02-30"}`,
		`{"items":[{"description":"x","unit_price":1}],"customer_email":"nobody","send_email":"yes"}`,
		`{"items":[{"description":"x","unit_price":1}],"discount_amount":"5"}`, `[]`, `"x"`, `{"items":null}`, `{`,
		`{"items":[{"description":"\u0000","unit_price":1}]}`, `{"items":[{"description":"x","unit_price":1}],"custom_fields":{"\u0000":"1"}}`,
		`{"items":[{"description":"x","quantity":"1000001","unit_price":1}]}`, `{"currency":"XXX","items":[{"description":"x","unit_price":1}]}`,
		`{"items":[{"description":"x","unit_price":1}],"reminder_days":[7,-3,"0"]}`, `{"items":[{"description":"x","unit_price":1}],"reminder_days":[]}`,
		`{"items":[{"description":"x","unit_price":1}],"reminder_days":[1,1]}`, `{"items":[{"description":"x","unit_price":1}],"reminder_days":"7"}`,
		`{"items":[{"description":"x","unit_price":1}],"reminder_days":[366]}`,
	} {
		f.Add([]byte(s))
	}
	m := merchant.Merchant{ID: "0123456789", DefaultCurrency: "CAD",
		Settings: merchant.Settings{Currencies: []string{"CAD", "USD", "JPY"}, MaxAmountCents: 99999999}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var inv Invoice
		b, err := ParseBody(raw)
		if err == nil {
			err = b.Apply(&inv, m, true)
		}
		if err != nil {
			var fe *fault.Error
			switch {
			case !errors.As(err, &fe):
				t.Fatalf("%q: error %v is not a *fault.Error", raw, err)
			case fe.Status != 400:
				t.Fatalf("%q: status %d", raw, fe.Status)
			case fe.Field == "" && fe.Code != "invalid_json":
				t.Fatalf("%q: a 400 (%s) naming no field", raw, fe.Message)
			}
			return
		}
		if n := len(inv.Items); n < 1 || n > MaxItems {
			t.Fatalf("%q: accepted %d lines", raw, n)
		}
		if !m.Accepts(inv.Currency.Code) {
			t.Fatalf("%q: accepted currency %q", raw, inv.Currency.Code)
		}
		var sub, tax int64
		for _, it := range inv.Items {
			if strings.TrimSpace(it.Description) == "" || it.Quantity <= 0 || it.UnitPrice < 0 {
				t.Fatalf("%q: accepted line %+v", raw, it)
			}
			total, lineTax, _ := lineTotals(it.Quantity, it.UnitPrice, inv.TaxRate)
			if it.Total != total || it.Tax != lineTax {
				t.Fatalf("%q: line %+v, want total %d, tax %d", raw, it, total, lineTax)
			}
			sub += it.Total
			tax += it.Tax
		}
		tt := inv.Totals
		if tt.Subtotal != sub || tt.Tax != tax || tt.Total != sub+tax-inv.Discount+inv.Shipping || tt.Total <= 0 ||
			tt.Total > money.MaxMinor || !m.WithinMax(tt.Total, inv.Currency) {
			t.Fatalf("%q: totals %+v", raw, tt)
		}
		if inv.TaxRate < 0 || inv.TaxRate > maxRate || inv.Discount < 0 || inv.Shipping < 0 {
			t.Fatalf("%q: rate %d, discount %d, shipping %d", raw, inv.TaxRate, inv.Discount, inv.Shipping)
		}
		days := inv.ReminderDays
		if days == nil || len(days) > maxReminders || !slices.IsSorted(days) || len(slices.Compact(slices.Clone(days))) != len(days) ||
			len(days) > 0 && (days[0] < -maxReminderDay || days[len(days)-1] > maxReminderDay) {
			t.Fatalf("%q: reminder_days %v", raw, days)
		}
	})
}

package vault_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/vault"
)

// The payment-method request parser never panics; what it refuses is a 400 naming the field by its
// path, and what it accepts is a valid, unexpired card whose CVC suits its brand.
func FuzzPaymentMethodRequest(f *testing.F) {
	for _, s := range []string{
		`{"type":"card","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040,"cvc":"123"}}`,
		`{"type":"card","card":{"number":"378282246310005","exp_month":1,"exp_year":41,"cvc":"1234"},` +
			`"billing_details":{"name":"Ada","email":"ada@example.com","address":{"country":"ca","postal_code":"M5V"}}}`,
		`{"type":"card","card":{"number":4242424242424242}}`, `{"type":"card","card":{"cvv":"1"}}`, `{"type":"bank"}`,
		`{"type":"card","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040},"billing_details":{"address":{"zip":"1"}}}`,
		`[]`, `{"type":"card","card":null}`, `{"type":"card","card":{"number":"4242 4242 4242 4242","exp_month":13,"exp_year":2040}}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2030, 6, 15, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		nm, err := vault.ParseMethodRequest(body, now)
		if err != nil {
			var fe *fault.Error
			switch {
			case !errors.As(err, &fe):
				t.Fatalf("%q: error %v is not a *fault.Error", body, err)
			case fe.Status != 400:
				t.Fatalf("%q: status %d", body, fe.Status)
			case fe.Field == "" && fe.Code != "invalid_json":
				t.Fatalf("%q: a 400 (%s) naming no field", body, fe.Message)
			case fe.Field != "" && !strings.HasPrefix(fe.Field, "card") && !strings.HasPrefix(fe.Field, "billing_details") && fe.Field != "type" &&
				fe.Code != "unknown_field":
				t.Fatalf("%q: field %q", body, fe.Field)
			}
			return
		}
		if card.Validate(nm.Number) != nil || nm.Expiry.Expired(now) || nm.Expiry.Month < 1 || nm.Expiry.Month > 12 {
			t.Fatalf("%q: accepted card %s %v", body, nm.Number, nm.Expiry)
		}
		if nm.CVC != "" && card.ValidateCVV(nm.CVC, card.BrandOf(nm.Number)) != nil {
			t.Fatalf("%q: accepted CVC of %d digits for %s", body, len(nm.CVC), card.BrandOf(nm.Number))
		}
		if c := nm.Billing.Country; c != "" && (len(c) != 2 || strings.ToUpper(c) != c) {
			t.Fatalf("%q: accepted country %q", body, c)
		}
	})
}

package hostedpage

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
)

// FuzzSessionRequest feeds arbitrary bodies and expand values to the session request's parser. It
// must never panic; every failure is a 400 fault; what it accepts has billing details within their
// bounds, expands at most the payment intent, has an appearance of the three, and a return_url that
// the merchant's check takes or refuses naming it.
func FuzzSessionRequest(f *testing.F) {
	f.Add([]byte(`{"amount":1999,"currency":"cad","billing_details":{"name":"Ada","address":{"city":"Toronto","zip":"M5V"}}}`), "")
	f.Add([]byte(`{"amount":1,"currency":"usd","expand":["payment_intent"],"payment_method_types":["card","x"]}`), "payment_intent")
	f.Add([]byte(`{"billing_details":{"address":{"line1":"x"}}}`), "customer")
	f.Add([]byte(`[]`), "")
	f.Add([]byte(`{"expand":"payment_intent","billing_details":null}`), "")
	f.Add([]byte(`{"amount":100,"currency":"cad","return_url":"https://shop.example/done","appearance":"dark"}`), "")
	f.Add([]byte(`{"amount":100,"currency":"cad","return_url":"http://[::1%25eth0]/","appearance":"auto"}`), "")
	f.Fuzz(func(t *testing.T, body []byte, expand string) {
		var ex []string
		if expand != "" {
			ex = []string{expand}
		}
		req, err := parseSessionRequest(body, ex)
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Status != http.StatusBadRequest {
				t.Fatalf("error %T %v is not a 400 fault", err, err)
			}
			return
		}
		if !slices.Contains([]string{AppearanceLight, AppearanceDark, AppearanceAuto}, req.page.appearance) {
			t.Fatalf("accepted appearance %q", req.page.appearance)
		}
		if u := req.page.returnURL; u != "" {
			var fe *fault.Error
			if err := checkReturnURL(u, merchant.Settings{}); err != nil && (!errors.As(err, &fe) || fe.Field != "return_url") {
				t.Fatalf("return_url %q: %v is not a fault naming return_url", u, err)
			}
		}
		b := req.page.billing
		for _, v := range []struct {
			s   string
			max int
		}{{b.Name, 200}, {b.Address.City, 100}, {b.Address.State, 100}, {b.Address.Zip, 20}, {b.Address.Country, 2}} {
			if utf8.RuneCountInString(v.s) > v.max {
				t.Fatalf("accepted billing details %+v", b)
			}
		}
		if req.expandIntent && expand != "" && expand != "payment_intent" {
			t.Fatalf("expanded %q", expand)
		}
	})
}

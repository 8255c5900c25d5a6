package checkout

import (
	"errors"
	"net/url"
	"testing"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
)

// checkFault fails t unless err is a 400 (or the 403 of a permission a key may not grant) that names
// its field, or malformed JSON, which has no single field at fault.
func checkFault(t *testing.T, input string, err error) {
	t.Helper()
	var f *fault.Error
	switch {
	case !errors.As(err, &f):
		t.Fatalf("%q: error %v is not a *fault.Error", input, err)
	case f.Status == 403 && f.Code == "insufficient_permissions" && f.Field == "permissions":
	case f.Status != 400:
		t.Fatalf("%q: status %d", input, f.Status)
	case f.Field == "" && f.Code != "invalid_json":
		t.Fatalf("%q: a 400 (%s: %s) that names no field", input, f.Code, f.Message)
	case f.Message == "":
		t.Fatalf("%q: a 400 without a message", input)
	}
}

var fuzzMerchant = merchant.Merchant{ID: "0123456789", DefaultCurrency: "CAD",
	Settings: merchant.Settings{Currencies: []string{"CAD", "USD", "JPY"}, MaxAmountCents: 99999999}}

// The intent body parser never panics; what it refuses is a 400 naming the field, and what it accepts
// keeps every rule — at creation and as an update of an existing intent.
func FuzzPaymentIntentRequest(f *testing.F) {
	for _, s := range []string{
		`{"amount":1000,"currency":"cad"}`,
		`{"amount":250000,"currency":"usd","capture_method":"manual","metadata":{"order":"6735"},"description":"Lamp",` +
			`"receipt_email":"ada@example.com","statement_descriptor_suffix":"LAMP","payment_method_types":["card"]}`,
		`{"amount":1.5,"currency":"CAD"}`, `{"amount":"100"}`, `{"metadata":{"k":1}}`, `{"amount":1,"currency":"jpy","payment_method":"pm_X"}`,
		`{"colour":"red"}`, `[]`, `null`, `{"amount":99999999999999999999}`, `{"metadata":{"":""}}`, `{"payment_method_types":[]}`,
	} {
		f.Add([]byte(s))
	}
	cad, _ := money.Lookup("CAD")
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := ParseIntentBody(body)
		if err != nil {
			checkFault(t, string(body), err)
			return
		}
		p, err := b.Params(fuzzMerchant)
		if err != nil {
			checkFault(t, string(body), err)
		} else {
			checkIntent(t, string(body), Intent{Amount: p.Amount, Currency: p.Currency, CaptureMethod: p.CaptureMethod, Metadata: p.Metadata,
				Description: p.Description, StatementDescriptorSuffix: p.StatementDescriptorSuffix})
		}
		in := Intent{Amount: 1000, Currency: cad, CaptureMethod: CaptureAutomatic, Metadata: map[string]string{"kept": "yes"}}
		if err := b.apply(&in, fuzzMerchant); err != nil {
			checkFault(t, string(body), err)
			return
		}
		checkIntent(t, string(body), in)
	})
}

// checkIntent fails t unless in keeps the rules of an intent's fields.
func checkIntent(t *testing.T, input string, in Intent) {
	t.Helper()
	switch {
	case in.Amount <= 0 || !fuzzMerchant.WithinMax(in.Amount, in.Currency):
		t.Fatalf("%q: accepted amount %d", input, in.Amount)
	case !fuzzMerchant.Accepts(in.Currency.Code):
		t.Fatalf("%q: accepted currency %q", input, in.Currency.Code)
	case in.CaptureMethod != CaptureAutomatic && in.CaptureMethod != CaptureManual:
		t.Fatalf("%q: accepted capture_method %q", input, in.CaptureMethod)
	case len(in.Metadata) > maxMetadataKeys:
		t.Fatalf("%q: accepted %d metadata keys", input, len(in.Metadata))
	case utf8.RuneCountInString(in.Description) > maxDescription || len(in.StatementDescriptorSuffix) > maxSuffix:
		t.Fatalf("%q: accepted an overlong text", input)
	}
	for k, v := range in.Metadata {
		if k == "" || v == "" || utf8.RuneCountInString(k) > maxMetadataKeyLen || utf8.RuneCountInString(v) > maxMetadataValueLen {
			t.Fatalf("%q: accepted metadata %q: %q", input, k, v)
		}
	}
}

// The API-key body parser never panics, refuses with a 400 naming the field, and grants no permission
// the creating key lacks.
func FuzzAPIKeyRequest(f *testing.F) {
	for _, s := range []string{`{"permissions":["payment_intents:read"]}`, `{"permissions":["api_keys:write","refunds:write"]}`,
		`{"permissions":"api_keys:read"}`, `{}`, `{"permissions":[]}`, `{"name":"x"}`} {
		f.Add([]byte(s), uint16(AllPermissions))
	}
	f.Fuzz(func(t *testing.T, body []byte, holder uint16) {
		p, err := parseKeyBody(body, Permissions(holder)&AllPermissions)
		if err != nil {
			checkFault(t, string(body), err)
			return
		}
		if p == 0 || p&^(Permissions(holder)&AllPermissions) != 0 {
			t.Fatalf("%q: granted %v to a key holding %v", body, p.Names(), Permissions(holder).Names())
		}
	})
}

// The bodies of confirm, capture and cancel, and the list's query, never panic and refuse with a 400
// naming the field.
func FuzzOperationRequest(f *testing.F) {
	for _, s := range []string{`{"payment_method_id":"pm_X"}`, `{"payment_method":"pm_X","payment_method_id":"pm_Y"}`,
		`{"amount_to_capture":500}`, `{"amount_to_capture":5.5}`, `{"cancellation_reason":"duplicate"}`, `{"cancellation_reason":"bored"}`,
		`limit=5&starting_after=pi_X`, `limit=0`, `{}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := parseConfirm(body); err != nil {
			checkFault(t, string(body), err)
		}
		if _, err := parseCapture(body); err != nil {
			checkFault(t, string(body), err)
		}
		if reason, err := parseCancel(body); err != nil {
			checkFault(t, string(body), err)
		} else if reason != "" && reason != "duplicate" && reason != "fraudulent" && reason != "requested_by_customer" && reason != "abandoned" {
			t.Fatalf("%q: accepted cancellation_reason %q", body, reason)
		}
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return
		}
		if p, err := ParseListParams(q); err != nil {
			checkFault(t, string(body), err)
		} else if p.Limit < 1 || p.Limit > MaxListLimit || p.StartingAfter != "" && p.EndingBefore != "" {
			t.Fatalf("%q: accepted %+v", body, p)
		}
	})
}

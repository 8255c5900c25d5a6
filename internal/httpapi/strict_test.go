package httpapi_test

import (
	"errors"
	"testing"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
)

type strictInner struct {
	Month *int64 `json:"exp_month"`
	Where *struct {
		City string `json:"city"`
	} `json:"where"`
}

func (s *strictInner) UnmarshalJSON(b []byte) error {
	type plain strictInner
	return httpapi.UnmarshalStrict(b, (*plain)(s), "card.")
}

type strictOuter struct {
	Amount   *int64            `json:"amount"`
	Currency string            `json:"currency"`
	Metadata map[string]string `json:"metadata"`
	Types    []string          `json:"payment_method_types"`
	Card     *strictInner      `json:"card"`
}

func TestUnmarshalStrict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body  string
		code, field string
	}{
		{"fraction", `{"amount":1.5}`, "invalid_request", "amount"},
		{"numeric string", `{"amount":"100"}`, "invalid_request", "amount"},
		{"exponent", `{"amount":1e2}`, "invalid_request", "amount"},
		{"too large", `{"amount":100000000000000000000000}`, "invalid_request", "amount"},
		{"number for string", `{"currency":5}`, "invalid_request", "currency"},
		{"unknown field", `{"amount":1,"colour":"red"}`, "unknown_field", "colour"},
		{"letter case", `{"Amount":1}`, "unknown_field", "Amount"},
		{"first unknown in order", `{"zz":1,"aa":1}`, "unknown_field", "aa"},
		{"metadata value", `{"metadata":{"k":1}}`, "invalid_request", "metadata"},
		{"array element", `{"payment_method_types":["card",1]}`, "invalid_request", "payment_method_types"},
		{"empty key", `{"":1}`, "unknown_field", `""`},
		{"nested empty key", `{"card":{"":1}}`, "unknown_field", `card.""`},
		{"nested unknown", `{"card":{"exp_month":1,"cvv":"1"}}`, "unknown_field", "card.cvv"},
		{"nested type", `{"card":{"exp_month":"12"}}`, "invalid_request", "card.exp_month"},
		{"nested not an object", `{"card":"4242"}`, "invalid_request", "card"},
		{"deeper type", `{"card":{"where":{"city":1}}}`, "invalid_request", "card.where.city"},
		{"not an object", `[1]`, "invalid_json", ""},
		{"malformed", `{"amount":`, "invalid_json", ""},
		{"trailing data", `{"amount":1} {}`, "invalid_json", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v strictOuter
			err := httpapi.UnmarshalStrict([]byte(tc.body), &v, "")
			var f *fault.Error
			if !errors.As(err, &f) {
				t.Fatalf("%s: error %v, want a *fault.Error", tc.body, err)
			}
			if f.Status != 400 || f.Code != tc.code || f.Field != tc.field {
				t.Fatalf("%s: %d %s field %q (%s); want 400 %s field %q", tc.body, f.Status, f.Code, f.Field, f.Message, tc.code, tc.field)
			}
		})
	}
	var v strictOuter
	if err := httpapi.UnmarshalStrict([]byte(`{"amount":250,"currency":"cad","metadata":{"order":"7"},"card":{"exp_month":12}}`), &v, ""); err != nil {
		t.Fatal(err)
	}
	if *v.Amount != 250 || v.Currency != "cad" || v.Metadata["order"] != "7" || *v.Card.Month != 12 {
		t.Fatalf("decoded %+v", v)
	}
	if err := httpapi.UnmarshalStrict(nil, &v, ""); err != nil {
		t.Fatalf("an empty body: %v", err)
	}
}

// StorableJSON refuses exactly what a database would not keep as sent: invalid UTF-8, NUL, lone
// surrogates; escapes of anything else, and an escaped backslash before "u0000", are text.
func TestStorableJSON(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		`"plain"`: true, `"Zoë"`: true, `"tab\tquote\"slash\/"`: true, `"\u00e9"`: true, `"\ud83d\ude00"`: true, `"\\u0000"`: true,
		`{"k":["a","\\"]}`: true, `12`: true, `"\uD83D\uDE00"`: true,
		`"\u0000"`: false, `"a\u0000b"`: false, "\"a\xffb\"": false, "\"\xc3\"": false, `"\ud800"`: false, `"\udc00"`: false,
		`"\ud800x"`: false, `"\ud800\u0041"`: false, `{"k":"\u0000"}`: false, `["ok","\u0000"]`: false, `"\\\u0000"`: false,
	} {
		if got := httpapi.StorableJSON([]byte(raw)); got != want {
			t.Errorf("StorableJSON(%q) = %v, want %v", raw, got, want)
		}
	}
}

// A strict body names the field whose text no database would keep, by its path; a value that is not
// a strict object itself (a map, a list, a plain struct) is named by its key.
func TestStrictRefusesUnstorableText(t *testing.T) {
	t.Parallel()
	for body, field := range map[string]string{
		`{"currency":"c\u0000d"}`:                            "currency",
		`{"metadata":{"k":"\u0000"}}`:                        "metadata",
		"{\"payment_method_types\":[\"\xff\"]}":              "payment_method_types",
		`{"card":{"exp_month":1,"where":{"city":"\ud800"}}}`: "card.where", // a strict object names its own fields; "where" is not one
	} {
		var v strictOuter
		var f *fault.Error
		if err := httpapi.UnmarshalStrict([]byte(body), &v, ""); !errors.As(err, &f) || f.Field != field || f.Status != 400 {
			t.Errorf("%s: %v, want a 400 naming %s", body, err, field)
		}
	}
}

package stripe_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/processor/stripe"
	"github.com/kassapay/kassa/internal/readmetest"
)

// A full-length key, as Stripe issues them.
const liveKey = "sk_live_51HfAbCdEfGhIjKlMnOpQrStUvWxYz0123456789wxyz"

func TestParse(t *testing.T) {
	t.Parallel()
	k := stripe.NewKind(stripe.KindConfig{})
	if k.Name() != "stripe" {
		t.Errorf("Name() = %q", k.Name())
	}
	for _, tc := range []struct {
		config string
		test   bool
		fields map[string]string
	}{
		{`{"secret_key":"` + liveKey + `"}`, false, map[string]string{"secret_key": "sk_live_…wxyz"}},
		{`{"secret_key":"sk_test_4eC39HqLyjWDarjtT1zdp7dc"}`, true, map[string]string{"secret_key": "sk_test_…p7dc"}},
		// Too short for its last four to say nothing of it.
		{`{"secret_key":"sk_test_abc123"}`, true, map[string]string{"secret_key": "sk_test_…"}},
		// Restricted keys: the least privilege Stripe offers.
		{`{"secret_key":"rk_live_51HfAbCdEfGhIjKlMnOpQrStUv", "api_base":"https://stripe-proxy.example.com"}`, false,
			map[string]string{"secret_key": "rk_live_…StUv", "api_base": "https://stripe-proxy.example.com"}},
		{`{"secret_key":"rk_test_51HfAbCdEfGhIjKlMnOpQrStUv"}`, true, map[string]string{"secret_key": "rk_test_…StUv"}},
		{`{"secret_key":"sk_test_abc","api_base":"http://127.0.0.1:12111"}`, true,
			map[string]string{"secret_key": "sk_test_…", "api_base": "http://127.0.0.1:12111"}},
		{`{"secret_key":"sk_test_abc","api_base":"http://localhost:12111/"}`, true,
			map[string]string{"secret_key": "sk_test_…", "api_base": "http://localhost:12111/"}},
		{`{"secret_key":"sk_test_abc","api_base":"http://[::1]:12111"}`, true,
			map[string]string{"secret_key": "sk_test_…", "api_base": "http://[::1]:12111"}},
	} {
		s, err := k.Parse([]byte(tc.config))
		if err != nil || s.Test != tc.test || !reflect.DeepEqual(s.Fields, tc.fields) {
			t.Errorf("Parse(%s) = %+v, %v; want test %v, fields %v", tc.config, s, err, tc.test, tc.fields)
		}
		if _, err := k.Open([]byte(tc.config)); err != nil {
			t.Errorf("Open(%s): %v", tc.config, err)
		}
	}
}

// The README's configuration is one that Parse takes, shown as the README says.
func TestREADMEConfiguration(t *testing.T) {
	t.Parallel()
	config := readmetest.Block(t, "a JSON file, `stripe.json`:", "json")
	s, err := stripe.NewKind(stripe.KindConfig{}).Parse([]byte(config))
	if err != nil || !s.Test || !reflect.DeepEqual(s.Fields, map[string]string{"secret_key": "sk_test_…1y2z"}) {
		t.Fatalf("Parse(README) = %+v, %v", s, err)
	}
}

// A bad configuration is refused naming the field at fault, and never quotes the key.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	k := stripe.NewKind(stripe.KindConfig{})
	const secret = "Zq8xYt3Wv"
	for _, tc := range []struct {
		config, field string
	}{
		{`sk_live_` + secret, ""},
		{`{"secret_key": sk_live_` + secret + `}`, ""},
		{`{"secret_key":"sk_live_` + secret + `"} {}`, ""},
		{`["sk_live_` + secret + `"]`, ""},
		{`null`, ""},
		{``, ""},
		{`{}`, "secret_key"},
		{`{"secret_key":""}`, "secret_key"},
		{`{"secret_key":7}`, "secret_key"},
		{`{"secret_key":"pk_live_` + secret + `"}`, "secret_key"},
		{`{"secret_key":"whsec_` + secret + `"}`, "secret_key"},
		{`{"secret_key":"sk_live_"}`, "secret_key"},
		{`{"secret_key":"sk_live_` + secret + ` "}`, "secret_key"},
		{`{"secret_key":"sk_live_` + secret + `\n"}`, "secret_key"},
		{`{"secret_key":"sk_prod_` + secret + `"}`, "secret_key"},
		{`{"secret_key":"sk_live_` + secret + `","test":true}`, "test"},
		{`{"secret_key":"sk_live_` + secret + `","api_base":"http://api.stripe.com"}`, "api_base"},
		{`{"secret_key":"sk_live_` + secret + `","api_base":"api.stripe.com"}`, "api_base"},
		{`{"secret_key":"sk_live_` + secret + `","api_base":"https://u:p@api.stripe.com"}`, "api_base"},
		{`{"secret_key":"sk_live_` + secret + `","api_base":"https://api.stripe.com/?x=1"}`, "api_base"},
		{`{"secret_key":"sk_live_` + secret + `","api_base":"ftp://api.stripe.com"}`, "api_base"},
		{`{"secret_key":"sk_live_` + secret + `","api_base":7}`, "api_base"},
	} {
		for name, do := range map[string]func([]byte) error{
			"Parse": func(b []byte) error { _, err := k.Parse(b); return err },
			"Open":  func(b []byte) error { _, err := k.Open(b); return err },
		} {
			err := do([]byte(tc.config))
			var f *fault.Error
			if !errors.As(err, &f) || f.Field != tc.field {
				t.Errorf("%s(%s) = %v; want an error naming %q", name, tc.config, err, tc.field)
				continue
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s(%s) quotes the key: %v", name, tc.config, err)
			}
		}
	}
}

// Open points the account's own client at the configured api_base, with its key.
func TestOpenUsesTheAccountsKeyAndBase(t *testing.T) {
	t.Parallel()
	a, b := newFake(t), newFake(t)
	b.key = "sk_live_" + strings.Repeat("b", 24)
	pa, pb := a.open(stripe.KindConfig{}), b.open(stripe.KindConfig{})
	ctx := context.Background()
	if r, err := pa.Authorize(ctx, payment(t, "open-a", cardtest.Visa, 100, true)); err != nil || !r.Approved {
		t.Fatalf("a: %+v, %v", r, err)
	}
	if r, err := pb.Authorize(ctx, payment(t, "open-b", cardtest.Visa, 100, true)); err != nil || !r.Approved {
		t.Fatalf("b: %+v, %v", r, err)
	}
	if len(a.received("POST /v1/payment_intents")) != 1 || len(b.received("POST /v1/payment_intents")) != 1 {
		t.Errorf("a received %d payment intents, b %d", len(a.received("POST /v1/payment_intents")), len(b.received("POST /v1/payment_intents")))
	}
}

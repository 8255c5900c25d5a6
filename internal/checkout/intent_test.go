package checkout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// num reads an integer field of a response.
func num(r servertest.Response, k string) int64 {
	n, _ := strconv.ParseInt(r.Num(k), 10, 64)
	return n
}

// A new intent shows every field of the wire shape; GET answers the same.
func TestCreateIntent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		bare := a.intent(t, map[string]any{"amount": 1099, "currency": "cad"})
		var fields map[string]json.RawMessage
		json.Unmarshal(bare.Raw, &fields)
		want := `{"amount":1099,"amount_capturable":0,"amount_received":0,"amount_refunded":0,"canceled_at":null,"cancellation_reason":null,` +
			`"capture_method":"automatic","currency":"cad","description":null,"last_payment_error":null,"latest_charge":null,` +
			`"livemode":false,"metadata":{},"next_action":null,"object":"payment_intent","payment_method":null,"payment_method_types":["card"],` +
			`"receipt_email":null,"statement_descriptor_suffix":null,"status":"requires_payment_method"}`
		delete(fields, "id")
		delete(fields, "created")
		if got, _ := json.Marshal(fields); string(got) != want {
			t.Fatalf("created %s\nwant (besides id and created) %s", got, want)
		}
		if id := bare.Str("id"); !strings.HasPrefix(id, "pi_") || len(id) != 27 || num(bare, "created") == 0 {
			t.Fatalf("id %q created %q", id, bare.Num("created"))
		}
		full := a.intent(t, map[string]any{"amount": 250000, "currency": "usd", "capture_method": "manual",
			"metadata": map[string]any{"order_id": "6735", "note": ""}, "description": "  Two brass lamps ", "receipt_email": "ada@example.com",
			"statement_descriptor_suffix": "LAMPS 6735", "payment_method_types": []string{"card"}})
		if full.Str("currency") != "usd" || full.Str("capture_method") != "manual" || full.Str("description") != "Two brass lamps" ||
			full.Str("receipt_email") != "ada@example.com" || full.Str("statement_descriptor_suffix") != "LAMPS 6735" ||
			fmt.Sprint(full.Body["metadata"]) != "map[order_id:6735]" || num(full, "amount") != 250000 {
			t.Fatalf("created %s", full.Raw)
		}
		got := a.ok(t, "GET", "/v1/payment-intents/"+full.Str("id"), nil)
		if string(got.Raw) != string(full.Raw) {
			t.Fatalf("get %s\nwant %s", got.Raw, full.Raw)
		}
		// A zero-decimal currency takes its minor unit as is.
		a.m.Update(t, merchant.Update{Currencies: []string{"CAD", "USD", "JPY"}})
		if jpy := a.intent(t, map[string]any{"amount": 500, "currency": "jpy"}); num(jpy, "amount") != 500 || jpy.Str("currency") != "jpy" {
			t.Fatalf("jpy %s", jpy.Raw)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM `+intentRecords+` WHERE operation = 'payment_intent.create' AND client_id = $1`, a.keyID); n != 3 {
			t.Fatalf("%d audit records of creations, want 3", n)
		}
	})
}

// Every rule of an intent's fields is a 400 naming the field.
func TestIntentValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		a.m.Update(t, merchant.Update{MaxAmount: ptr("5000.00")})
		foreign := b.method(t, cardtest.Visa)
		with := func(change map[string]any) map[string]any {
			body := map[string]any{"amount": 1000, "currency": "cad"}
			for k, v := range change {
				if v == nil {
					delete(body, k)
				} else {
					body[k] = v
				}
			}
			return body
		}
		many := map[string]any{}
		for i := range 51 {
			many[fmt.Sprintf("k%02d", i)] = "v"
		}
		for _, tc := range []struct {
			name   string
			body   any
			status int
			code   string
			field  string
		}{
			{"no amount", with(map[string]any{"amount": nil}), 400, "invalid_request", "amount"},
			{"amount 0", with(map[string]any{"amount": 0}), 400, "invalid_request", "amount"},
			{"negative amount", with(map[string]any{"amount": -5}), 400, "invalid_request", "amount"},
			{"fractional amount", with(map[string]any{"amount": 10.5}), 400, "invalid_request", "amount"},
			{"amount as a string", with(map[string]any{"amount": "1000"}), 400, "invalid_request", "amount"},
			{"amount beyond int64", `{"amount": 99999999999999999999, "currency": "cad"}`, 400, "invalid_request", "amount"},
			{"amount above the maximum", with(map[string]any{"amount": 500001}), 400, "invalid_request", "amount"},
			{"no currency", with(map[string]any{"currency": nil}), 400, "invalid_request", "currency"},
			{"upper-case currency", with(map[string]any{"currency": "CAD"}), 400, "invalid_request", "currency"},
			{"unknown currency", with(map[string]any{"currency": "xyz"}), 400, "invalid_request", "currency"},
			{"currency not enabled", with(map[string]any{"currency": "eur"}), 400, "invalid_request", "currency"},
			{"currency as a number", with(map[string]any{"currency": 124}), 400, "invalid_request", "currency"},
			{"capture method", with(map[string]any{"capture_method": "later"}), 400, "invalid_request", "capture_method"},
			{"payment method types", with(map[string]any{"payment_method_types": []string{"card", "sepa_debit"}}), 400, "invalid_request", "payment_method_types"},
			{"no payment method type", with(map[string]any{"payment_method_types": []string{}}), 400, "invalid_request", "payment_method_types"},
			{"payment method types as a string", with(map[string]any{"payment_method_types": "card"}), 400, "invalid_request", "payment_method_types"},
			{"51 metadata keys", with(map[string]any{"metadata": many}), 400, "invalid_request", "metadata"},
			{"metadata key of 41", with(map[string]any{"metadata": map[string]any{strings.Repeat("k", 41): "v"}}), 400, "invalid_request", "metadata"},
			{"empty metadata key", with(map[string]any{"metadata": map[string]any{"": "v"}}), 400, "invalid_request", "metadata"},
			{"metadata value of 501", with(map[string]any{"metadata": map[string]any{"k": strings.Repeat("v", 501)}}), 400, "invalid_request", "metadata"},
			{"metadata number", with(map[string]any{"metadata": map[string]any{"k": 5}}), 400, "invalid_request", "metadata"},
			{"metadata not an object", with(map[string]any{"metadata": "k=v"}), 400, "invalid_request", "metadata"},
			{"description too long", with(map[string]any{"description": strings.Repeat("d", 1001)}), 400, "invalid_request", "description"},
			{"receipt e-mail", with(map[string]any{"receipt_email": "ada at example"}), 400, "invalid_request", "receipt_email"},
			{"suffix too long", with(map[string]any{"statement_descriptor_suffix": strings.Repeat("S", 23)}), 400, "invalid_request", "statement_descriptor_suffix"},
			{"suffix with a quote", with(map[string]any{"statement_descriptor_suffix": `LAMP'S`}), 400, "invalid_request", "statement_descriptor_suffix"},
			{"suffix without a letter", with(map[string]any{"statement_descriptor_suffix": "6735"}), 400, "invalid_request", "statement_descriptor_suffix"},
			{"unknown field", with(map[string]any{"confirm": true}), 400, "unknown_field", "confirm"},
			{"letter case", with(map[string]any{"Amount": 5}), 400, "unknown_field", "Amount"},
			{"no such payment method", with(map[string]any{"payment_method": "pm_NOSUCHMETHOD"}), 404, "not_found", "payment_method"},
			{"another account's payment method", with(map[string]any{"payment_method": foreign}), 404, "not_found", "payment_method"},
			{"empty payment method", with(map[string]any{"payment_method": ""}), 400, "invalid_request", "payment_method"},
			{"not an object", `[{"amount": 1000}]`, 400, "invalid_json", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantError(t, a.do(t, "POST", "/v1/payment-intents", tc.body), tc.status, tc.code, tc.field)
			})
		}
		// The limits themselves are allowed.
		at := map[string]any{}
		for i := range 50 {
			at[fmt.Sprintf("%040d", i)] = strings.Repeat("v", 500)
		}
		a.intent(t, with(map[string]any{"amount": 500000, "metadata": at, "description": strings.Repeat("d", 1000),
			"statement_descriptor_suffix": strings.Repeat("S", 22)}))
		if n := count(t, db, `SELECT COUNT(*) FROM payment_intents`); n != 1 {
			t.Fatalf("%d intents stored, want the one valid", n)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// GET /v1/payment-intents pages newest first with limit, starting_after and ending_before.
func TestListIntents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		var ids []string // oldest first
		for i := range 13 {
			ids = append(ids, a.intent(t, map[string]any{"amount": 100 + i, "currency": "cad"}).Str("id"))
		}
		b.intent(t, map[string]any{"amount": 1, "currency": "cad"})
		page := func(query string) ([]string, bool) {
			t.Helper()
			r := a.ok(t, "GET", "/v1/payment-intents"+query, nil)
			if r.Str("object") != "list" {
				t.Fatalf("list %s", r.Raw)
			}
			var out []string
			for _, d := range r.Body["data"].([]any) {
				out = append(out, d.(map[string]any)["id"].(string))
			}
			return out, r.Bool("has_more")
		}
		newest := func(from, n int) []string { // ids[from], ids[from-1], …
			var out []string
			for i := from; i > from-n; i-- {
				out = append(out, ids[i])
			}
			return out
		}
		first, more := page("")
		if fmt.Sprint(first) != fmt.Sprint(newest(12, 10)) || !more {
			t.Fatalf("first page %v more %v", first, more)
		}
		rest, more := page("?starting_after=" + first[9])
		if fmt.Sprint(rest) != fmt.Sprint(newest(2, 3)) || more {
			t.Fatalf("second page %v more %v", rest, more)
		}
		back, more := page("?limit=4&ending_before=" + rest[0])
		if fmt.Sprint(back) != fmt.Sprint(newest(6, 4)) || !more {
			t.Fatalf("page before %v more %v", back, more)
		}
		top, more := page("?limit=100&ending_before=" + ids[10])
		if fmt.Sprint(top) != fmt.Sprint(newest(12, 2)) || more {
			t.Fatalf("newest page %v more %v", top, more)
		}
		for _, tc := range []struct{ query, field string }{
			{"?limit=0", "limit"}, {"?limit=101", "limit"}, {"?limit=ten", "limit"},
			{"?starting_after=pi_NOSUCHINTENT", "starting_after"}, {"?ending_before=nope", "ending_before"},
			{"?starting_after=" + ids[1] + "&ending_before=" + ids[5], "ending_before"},
		} {
			wantError(t, a.do(t, "GET", "/v1/payment-intents"+tc.query, nil), 400, "invalid_request", tc.field)
		}
		// Another account's intent is no cursor.
		wantError(t, b.do(t, "GET", "/v1/payment-intents?starting_after="+ids[3], nil), 400, "invalid_request", "starting_after")
		if r := b.ok(t, "GET", "/v1/payment-intents", nil); len(r.Body["data"].([]any)) != 1 || r.Bool("has_more") {
			t.Fatalf("another account lists %s", r.Raw)
		}
	})
}

// livemode says whether the merchant's payments went to a live processor account when the object was
// created: false on the simulator and on a test account, true on a live one.
func TestLivemodeIsTheMerchantsProcessors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{Connectors: []processor.Kind{&processortest.Journal{}}})
		a := newAccount(t, srv)
		ctx := context.Background()
		use := func(kind, config string) {
			t.Helper()
			if err := db.Write(ctx, func(tx *store.Tx) error {
				_, err := srv.Accounts().Set(ctx, tx, a.m.ID, kind, []byte(config))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := srv.Accounts().Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		check := func(want bool) {
			t.Helper()
			pm := a.ok(t, "POST", "/v1/payment-methods", cardBody(cardtest.Visa))
			in := a.ok(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad", "payment_method": pm.Str("id")})
			if pm.Bool("livemode") != want || in.Bool("livemode") != want {
				t.Fatalf("livemode: payment method %v, intent %v; want %v", pm.Bool("livemode"), in.Bool("livemode"), want)
			}
			if got := a.ok(t, "GET", "/v1/payment-intents/"+in.Str("id"), nil); got.Bool("livemode") != want {
				t.Fatalf("livemode read back: %v, want %v", got.Bool("livemode"), want)
			}
		}
		check(false)
		use("journal", `{"name":"live","test":false}`)
		check(true)
		use("journal", `{"name":"sandbox","test":true}`)
		check(false)
	})
}

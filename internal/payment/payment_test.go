package payment_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }

// counting wraps a real processor and counts the calls that reach it.
type counting struct {
	processor.Processor
	calls atomic.Int64
}

func (c *counting) Authorize(ctx context.Context, p processor.Payment) (processor.Result, error) {
	c.calls.Add(1)
	return c.Processor.Authorize(ctx, p)
}

func (c *counting) Capture(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	c.calls.Add(1)
	return c.Processor.Capture(ctx, f)
}

func (c *counting) Refund(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	c.calls.Add(1)
	return c.Processor.Refund(ctx, f)
}

func (c *counting) Void(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	c.calls.Add(1)
	return c.Processor.Void(ctx, f)
}

// fixture is a server with a counted simulator and a clock, and one merchant.
type fixture struct {
	srv   *servertest.Server
	m     *servertest.Merchant
	proc  *counting
	clock *clock.Manual
}

func newFixture(t *testing.T, db *store.DB, sim simulator.Config) *fixture {
	t.Helper()
	return newFixtureWith(t, db, sim, server.Config{}, nil)
}

// newFixtureWith is newFixture with the server configured by cfg, and the counted simulator wrapped
// by wrap (nil: as it is).
func newFixtureWith(t *testing.T, db *store.DB, sim simulator.Config, cfg server.Config,
	wrap func(processor.Processor) processor.Processor) *fixture {
	t.Helper()
	// Noon UTC today: date filters in the tests never straddle midnight.
	f := &fixture{clock: clock.NewManual(time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour))}
	sim.Now = f.clock.Now
	f.proc = &counting{Processor: simulator.New(sim)}
	cfg.Processor, cfg.Now = f.proc, f.clock.Now
	if wrap != nil {
		cfg.Processor = wrap(f.proc)
	}
	f.srv = servertest.Start(t, db, cfg)
	f.m = f.srv.NewMerchant(t)
	return f
}

// card returns a sale body for pan, valid in every other respect, with extra fields.
func card(pan string, extra ...any) map[string]any {
	cvv := "123"
	if strings.HasPrefix(pan, "3") && len(pan) == 15 {
		cvv = "1234"
	}
	b := map[string]any{"amount": "10.00", "currency": "CAD", "card_number": pan, "card_expiry_month": "12",
		"card_expiry_year": "30", "cvv2": cvv}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(b, extra[i].(string))
			continue
		}
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

var txID = regexp.MustCompile(`^[A-Za-z0-9]{20}$`)

func TestSaleResponseIsTheWireContract(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		customer := map[string]string{"email": "ada@example.com", "first_name": "Ada", "last_name": "Lovelace",
			"company": "Engines Ltd", "telephone": "+1 555 0100", "address1": "1 Main St", "address2": "Unit 2",
			"city": "Toronto", "province": "ON", "country": "CA", "postal_code": "M5V 2T6", "custom_id": "c-9",
			"invoice_id": "inv-7", "order_id": "1234", "description": "Two widgets"}
		body := card(cardtest.Visa, "amount", 59.99)
		for k, v := range customer {
			body[k] = v
		}
		body["order_id"] = 1234 // some plugins send it as an integer
		body["amount_tax"], body["ecom_source"], body["do_not_store"] = "1.00", "plugin", "true"
		r := f.m.Do(t, "POST", "/transaction-service/sale", body)
		if r.Status != 200 {
			t.Fatalf("sale: %d %s", r.Status, r.Raw)
		}
		want := map[string]any{"transaction_type": "SALE", "transaction_result": "APPROVED", "transaction_success": true,
			"transaction_message": "Approved", "currency": "CAD", "card_type": "VISA", "card_suffix": "4242",
			"captured": true, "test_mode": true, "transaction_source": "E_COMMERCE"}
		for k, v := range want {
			if r.Body[k] != v {
				t.Errorf("%s = %v, want %v", k, r.Body[k], v)
			}
		}
		for k, v := range customer {
			if r.Str(k) != v {
				t.Errorf("%s = %q, want %q echoed", k, r.Str(k), v)
			}
		}
		if r.Num("amount") != "59.99" || !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(r.Num("id")) || !txID.MatchString(r.Str("transaction_id")) {
			t.Errorf("amount %q id %q transaction_id %q", r.Num("amount"), r.Num("id"), r.Str("transaction_id"))
		}
		if tm, _ := r.Body["transaction_time"].(interface{ Int64() (int64, error) }).Int64(); tm != f.clock.Now().UnixMilli() {
			t.Errorf("transaction_time %d is not now in epoch milliseconds", tm)
		}
		for _, k := range []string{"card_number", "cvv2", "card_expiry_month", "amount_tax"} {
			if _, ok := r.Body[k]; ok {
				t.Errorf("response carries %s", k)
			}
		}

		a := f.m.Do(t, "POST", "/transaction-service/authorize", card(cardtest.Mastercard, "amount", "25"))
		if a.Status != 200 || a.Str("transaction_type") != "AUTHORIZATION" || a.Bool("captured") || a.Num("amount") != "25.00" ||
			a.Str("card_type") != "MASTERCARD" || a.Str("transaction_result") != "APPROVED" {
			t.Fatalf("authorize: %d %s", a.Status, a.Raw)
		}
	})
}

// Text that is not valid UTF-8 is a 400 naming the field, on both backends, never a 500 and never
// stored altered (encoding/json would have replaced it with U+FFFD); escapes of
// real characters are text like any other.
func TestInvalidUTF8IsRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		body := `{"amount":"5.00","card_number":"4242424242424242","card_expiry_month":"12","card_expiry_year":"30",` +
			`"cvv2":"123","description":"caf\xe9 \u00e9t\u00e9","first_name":"Ren\xe9"}`
		body = strings.NewReplacer(`\xe9`, "\xe9").Replace(body) // raw byte 0xE9: Latin-1, not UTF-8
		r := f.m.Do(t, "POST", "/transaction-service/sale", body)
		if r.Status != 400 || r.Str("field") != "first_name" {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		var n int
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM transactions`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d transactions after the refusal (%v)", n, err)
		}
		body = strings.NewReplacer("\xe9", `\u00e9`).Replace(body)
		if r := f.m.Do(t, "POST", "/transaction-service/sale", body); r.Status != 200 || r.Str("description") != "café été" || r.Str("first_name") != "René" {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
	})
}

func TestTestCardsDecide(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	for _, tc := range []struct{ pan, brand, message string }{
		{cardtest.Visa, "VISA", "Approved"},
		{cardtest.Visa2, "VISA", "Approved"},
		{cardtest.Mastercard, "MASTERCARD", "Approved"},
		{cardtest.Amex, "AMEX", "Approved"},
		{cardtest.Discover, "DISCOVER", "Approved"},
		{cardtest.Declined, "VISA", "Declined"},
		{cardtest.InsufficientFunds, "VISA", "Insufficient funds"},
		{cardtest.LostCard, "VISA", "Lost card"},
		{cardtest.StolenCard, "VISA", "Stolen card"},
		{cardtest.ExpiredCard, "VISA", "Expired card"},
		{cardtest.IncorrectCVC, "VISA", "Incorrect CVC"},
		{cardtest.ProcessingError, "VISA", "Processing error"},
	} {
		r := f.m.Do(t, "POST", "/transaction-service/sale", card(tc.pan))
		approved := tc.message == "Approved"
		// A decline is HTTP 200 with DECLINED: shop plugins treat any other status as a broken integration.
		if r.Status != 200 || r.Str("transaction_message") != tc.message || r.Bool("transaction_success") != approved ||
			r.Str("card_type") != tc.brand || (r.Str("transaction_result") == "APPROVED") != approved {
			t.Errorf("%s…%s: %d %s", tc.pan[:6], tc.pan[len(tc.pan)-4:], r.Status, r.Raw)
		}
	}
	// An expiry in the past declines (it is not a validation error).
	last := time.Now().AddDate(0, -1, 0)
	r := f.m.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa, "card_expiry_month", int(last.Month()), "card_expiry_year", last.Year()))
	if r.Status != 200 || r.Str("transaction_result") != "DECLINED" || r.Str("transaction_message") != "Expired card" {
		t.Fatalf("past expiry: %d %s", r.Status, r.Raw)
	}
}

func TestTolerantInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	for _, tc := range []struct {
		name   string
		body   map[string]any
		amount string
	}{
		{"amount as number", card(cardtest.Visa, "amount", 11), "11.00"},
		{"amount as string", card(cardtest.Visa, "amount", "11.00"), "11.00"},
		{"amount with trailing zeros", card(cardtest.Visa, "amount", "11.500"), "11.50"},
		{"card fields as integers", card(cardtest.Visa, "card_number", 4242424242424242, "card_expiry_month", 8, "card_expiry_year", 30, "cvv2", 123), "10.00"},
		{"four-digit year", card(cardtest.Visa, "card_expiry_year", "2030"), "10.00"},
		{"CVV as integer with leading zero lost", card(cardtest.Visa, "cvv2", 12), "10.00"},
		{"flags as strings", card(cardtest.Visa, "test_mode", "true", "sending_receipt", "false"), "10.00"},
		{"currency in lower case", card(cardtest.Visa, "currency", "usd"), "10.00"},
		{"no currency: the merchant's default", card(cardtest.Visa, "currency", nil), "10.00"},
	} {
		r := f.m.Do(t, "POST", "/transaction-service/sale", tc.body)
		if r.Status != 200 || r.Str("transaction_result") != "APPROVED" || r.Num("amount") != tc.amount {
			t.Errorf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
		if tc.name == "flags as strings" && !r.Bool("test_mode") {
			t.Errorf("test_mode \"true\" not honoured: %s", r.Raw)
		}
		if tc.name == "currency in lower case" && r.Str("currency") != "USD" {
			t.Errorf("currency %q", r.Str("currency"))
		}
		if tc.name == "no currency: the merchant's default" && r.Str("currency") != "CAD" {
			t.Errorf("currency %q", r.Str("currency"))
		}
	}
}

func TestValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		for _, tc := range []struct {
			name  string
			path  string
			body  any
			field string
		}{
			{"amount missing", "sale", card(cardtest.Visa, "amount", nil), "amount"},
			{"amount negative", "sale", card(cardtest.Visa, "amount", -5), "amount"},
			{"amount not numeric", "sale", card(cardtest.Visa, "amount", "ten"), "amount"},
			{"amount as boolean", "sale", card(cardtest.Visa, "amount", true), "amount"},
			{"amount with an exponent", "sale", card(cardtest.Visa, "amount", "1e3"), "amount"},
			{"amount with three decimals", "sale", card(cardtest.Visa, "amount", "10.999"), "amount"},
			{"amount zero on a sale", "sale", card(cardtest.Visa, "amount", 0), "amount"},
			{"amount above the maximum", "sale", card(cardtest.Visa, "amount", "1000000.00"), "amount"},
			{"currency not ISO 4217", "sale", card(cardtest.Visa, "currency", "ABC"), "currency"},
			{"currency not accepted", "sale", card(cardtest.Visa, "currency", "EUR"), "currency"},
			{"currency as number", "sale", card(cardtest.Visa, "currency", 124), "currency"},
			{"card number missing", "sale", card(cardtest.Visa, "card_number", nil), "card_number"},
			{"card number fails Luhn", "sale", card("4242424242424241"), "card_number"},
			{"card number wrong length for Amex", "sale", card("37828224631000", "cvv2", "1234"), "card_number"},
			{"card number too short", "sale", card("42424242"), "card_number"},
			{"card number not numeric", "sale", card("4242-abcd-4242-4242"), "card_number"},
			{"card number negative integer", "sale", card(cardtest.Visa, "card_number", -4242424242424242), "card_number"},
			{"month 0", "sale", card(cardtest.Visa, "card_expiry_month", 0), "card_expiry_month"},
			{"month 13", "sale", card(cardtest.Visa, "card_expiry_month", "13"), "card_expiry_month"},
			{"month not numeric", "sale", card(cardtest.Visa, "card_expiry_month", "Dec"), "card_expiry_month"},
			{"month missing", "sale", card(cardtest.Visa, "card_expiry_month", nil), "card_expiry_month"},
			{"year of three digits", "sale", card(cardtest.Visa, "card_expiry_year", "203"), "card_expiry_year"},
			{"year of one digit", "sale", card(cardtest.Visa, "card_expiry_year", 3), "card_expiry_year"},
			{"year not numeric", "sale", card(cardtest.Visa, "card_expiry_year", "20x0"), "card_expiry_year"},
			{"CVV of two digits", "sale", card(cardtest.Visa, "cvv2", "12"), "cvv2"},
			{"CVV of four digits on Visa", "sale", card(cardtest.Visa, "cvv2", "1234"), "cvv2"},
			{"CVV of three digits on Amex", "sale", card(cardtest.Amex, "cvv2", "123"), "cvv2"},
			{"CVV not numeric", "sale", card(cardtest.Visa, "cvv2", "12a"), "cvv2"},
			{"CVV missing", "sale", card(cardtest.Visa, "cvv2", nil), "cvv2"},
			{"token with a raw card field", "sale", card(cardtest.Visa, "token", "abc"), "card_number"},
			{"token with only a CVV", "sale", card(cardtest.Visa, "token", "abc", "card_number", nil, "card_expiry_month", nil, "card_expiry_year", nil), "cvv2"},
			{"token as a number", "sale", card(cardtest.Visa, "token", 5, "card_number", nil, "card_expiry_month", nil, "card_expiry_year", nil, "cvv2", nil), "token"},
			{"email not an address", "sale", card(cardtest.Visa, "email", "nobody"), "email"},
			{"first name too long", "sale", card(cardtest.Visa, "first_name", strings.Repeat("x", 101)), "first_name"},
			{"description as object", "sale", card(cardtest.Visa, "description", map[string]any{}), "description"},
			{"test_mode not a flag", "sale", card(cardtest.Visa, "test_mode", "maybe"), "test_mode"},
			{"authorize amount negative", "authorize", card(cardtest.Visa, "amount", "-0.01"), "amount"},
			{"malformed JSON", "sale", `{"amount": `, ""},
			{"not an object", "sale", `[1]`, ""},
		} {
			r := f.m.Do(t, "POST", "/transaction-service/"+tc.path, tc.body)
			if r.Status != 400 || r.Str("field") != tc.field || r.Str("message") == "" || r.Str("error") == "" {
				t.Errorf("%s: %d %s; want 400 naming %q", tc.name, r.Status, r.Raw, tc.field)
			}
		}
		if list := f.m.Do(t, "GET", "/transaction-service/transaction", nil); len(list.Body["entities"].([]any)) != 0 {
			t.Fatalf("rejected requests left transactions: %s", list.Raw)
		}
		if n := f.proc.calls.Load(); n != 0 {
			t.Fatalf("rejected requests reached the processor %d times", n)
		}
	})
}

func TestMerchantSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	max, profile := "50.00", merchant.ProfilePayfirma
	f.m.Update(t, merchant.Update{MaxAmount: &max, Currencies: []string{"EUR"}, SimulatorProfile: &profile})
	if r := f.m.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa, "amount", "50.01")); r.Status != 400 || r.Str("field") != "amount" ||
		!strings.Contains(r.Str("message"), "50.00") {
		t.Fatalf("above the merchant's maximum: %d %s", r.Status, r.Raw)
	}
	if r := f.m.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa, "currency", "USD")); r.Status != 400 || r.Str("field") != "currency" {
		t.Fatalf("currency no longer accepted: %d %s", r.Status, r.Raw)
	}
	// The original sandbox's rule: an odd whole part approves, an even one declines, whatever the card.
	for amount, result := range map[string]string{"41.20": "APPROVED", "40.11": "DECLINED", "3.00": "APPROVED"} {
		r := f.m.Do(t, "POST", "/transaction-service/sale", card(cardtest.Declined, "amount", amount, "currency", "EUR"))
		if r.Status != 200 || r.Str("transaction_result") != result {
			t.Errorf("payfirma profile, %s: %d %s", amount, r.Status, r.Raw)
		}
	}
}

func TestRequiresBearerTokenWithEcomScope(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	for _, path := range []string{"/transaction-service/sale", "/transaction-service/transaction"} {
		r := f.srv.Do(t, "POST", path, card(cardtest.Visa))
		if r.Status != 401 || r.Str("error") != "invalid_token" || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s without token: %d %s", path, r.Status, r.Raw)
		}
		r = f.srv.Do(t, "POST", path, card(cardtest.Visa), "Authorization", "Bearer kat_forged")
		if r.Status != 401 || r.Str("error") != "invalid_token" {
			t.Errorf("%s with a forged token: %d %s", path, r.Status, r.Raw)
		}
	}
}

package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/stripe"
	"github.com/kassapay/kassa/internal/processor/stripe/stripemock"
)

// recorder is a transport that records every call's route and status, and can make the events
// stripe-mock lists (fixtures) carry a given Idempotency-Key, so that Lookup takes its paths that
// follow a found event.
type recorder struct {
	mu    sync.Mutex
	calls map[string][]string // route → "status: body" of each call
	stamp string
}

// The ids of stripe-mock's fixtures; an event lists a price.
var mockID = regexp.MustCompile(`/(pi|seti|re|pm|price)_[A-Za-z0-9]+`)

func (rec *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if req.URL.Path == "/v1/events" && rec.stamp != "" && resp.StatusCode == http.StatusOK {
		var list map[string]any
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, err
		}
		for _, ev := range list["data"].([]any) {
			ev.(map[string]any)["request"] = map[string]any{"id": "req_stamped", "idempotency_key": rec.stamp}
		}
		body, _ = json.Marshal(list)
	}
	route := req.Method + " " + mockID.ReplaceAllString(req.URL.Path, "/{id}")
	rec.calls[route] = append(rec.calls[route], fmt.Sprintf("%d: %.300s", resp.StatusCode, body))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// Every call the connector makes is one Stripe's API accepts: stripe-mock checks each against
// Stripe's OpenAPI description (its answers are fixtures, so what they decide is not looked at).
func TestRequestsAcceptedByStripeMock(t *testing.T) {
	t.Parallel()
	base := stripemock.Start(t)
	rec := &recorder{calls: map[string][]string{}}
	logger, _ := cardtest.Logger(t)
	p, err := stripe.NewKind(stripe.KindConfig{HTTPClient: &http.Client{Transport: rec, Timeout: 30 * time.Second}, Logger: logger, NetworkRetries: -1}).
		Open([]byte(fmt.Sprintf(`{"secret_key":"sk_test_stripemock","api_base":%q}`, base)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	trace, _ := p.(processor.Preparer).Prepare(ctx, processor.Merchant{})
	jpy, _ := money.Lookup("JPY")
	isk, _ := money.Lookup("ISK")

	sale := payment(t, "mock-sale", cardtest.Visa, 1000, true)
	auth := payment(t, "mock-auth", cardtest.Mastercard, 1000, false)
	stored := payment(t, "mock-stored", cardtest.Visa, 1000, true)
	stored.StoredCard, stored.CVV = true, ""
	recurring := payment(t, "mock-recurring", cardtest.Visa, 1000, true)
	recurring.StoredCard, recurring.Recurring, recurring.CVV = true, true, ""
	moto := payment(t, "mock-moto", cardtest.Visa, 1000, true)
	moto.MailOrder = true
	verify := payment(t, "mock-verify", cardtest.Amex, 0, false)
	verify.CVV = "1234"
	yen := payment(t, "mock-jpy", cardtest.Visa, 500, true)
	yen.Currency = jpy
	krona := payment(t, "mock-isk", cardtest.Visa, 500, false)
	krona.Currency = isk
	for _, pay := range []processor.Payment{sale, auth, stored, recurring, moto, verify, yen, krona} {
		p.Authorize(ctx, pay)
	}
	follow := processor.FollowUp{Original: "pi_3MtwBwLkdIwHu7ix28a3tqPa", Amount: 600, Currency: cad, AuthorizedAt: time.Now()}
	for ref, call := range map[string]func(context.Context, processor.FollowUp) (processor.Result, error){
		"mock-capture": p.Capture, "mock-refund": p.Refund, "mock-void": p.Void,
	} {
		f := follow
		f.Reference = ref
		call(ctx, f)
	}
	for _, op := range []processor.Operation{
		{Reference: "mock-sale", Kind: processor.OperationSale, Amount: 1000, Currency: cad, Trace: trace},
		{Reference: "mock-verify", Kind: processor.OperationAuthorization, Amount: 0, Currency: cad, Trace: trace},
		{Reference: "mock-capture", Kind: processor.OperationCapture, Amount: 600, Currency: cad, Trace: trace},
		{Reference: "mock-void", Kind: processor.OperationVoid, Amount: 600, Currency: cad, Trace: trace},
		{Reference: "mock-refund", Kind: processor.OperationRefund, Amount: 600, Currency: cad, Trace: trace},
	} {
		rec.mu.Lock()
		rec.stamp = op.Reference
		rec.mu.Unlock()
		p.Lookup(ctx, op)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	routes := []string{}
	for route, calls := range rec.calls {
		routes = append(routes, route)
		for _, c := range calls {
			if status, _ := strconv.Atoi(c[:3]); status >= 300 {
				t.Errorf("%s: stripe-mock answered %s", route, c)
			}
		}
	}
	slices.Sort(routes)
	want := []string{"GET /v1/events", "GET /v1/payment_intents/search", "GET /v1/payment_intents/{id}", "GET /v1/setup_intents/{id}",
		"POST /v1/payment_intents", "POST /v1/payment_intents/{id}/cancel", "POST /v1/payment_intents/{id}/capture",
		"POST /v1/payment_methods", "POST /v1/refunds", "POST /v1/setup_intents"}
	if !slices.Equal(routes, want) {
		t.Errorf("calls made: %v\nwant every call the connector makes: %v", routes, want)
	}
}

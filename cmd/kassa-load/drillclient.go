package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// fleet is the drill's clients: shops that share the merchant's OAuth client and API key and take the
// nodes in turn (a simple round-robin, per request and per retry).
type fleet struct {
	nodes         []*node
	m             merchant
	token, apiKey string
	bound         time.Duration
	outages       *outages
	http          *http.Client
	next          atomic.Uint64
	// pace, when set, spaces the calls out to its rate, over all the clients (the soak's).
	pace *rate.Limiter
	mu   sync.Mutex
	log  []call
}

// drillRequestTimeout bounds one try: longer than the processor's timeout and a reversal, so that a
// try times out only when its node does not answer at all.
const drillRequestTimeout = 15 * time.Second

func newFleet(ctx context.Context, nodes []*node, m merchant, apiKey string, bound time.Duration, o *outages) (*fleet, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	f := &fleet{nodes: nodes, m: m, apiKey: apiKey, bound: bound, outages: o, http: &http.Client{Transport: transport, Timeout: drillRequestTimeout}}
	c := f.call(ctx, "setup", "token", "POST", "/oauth/token?grant_type=client_credentials", nil, "", authBasic)
	var t struct {
		AccessToken string `json:"access_token"`
	}
	if c.status != http.StatusOK || json.Unmarshal(c.body, &t) != nil || t.AccessToken == "" {
		return nil, fmt.Errorf("no access token: %d %s", c.status, c.body)
	}
	f.token = t.AccessToken
	return f, nil
}

// call is one request of a client, with its retries: what the books check.
type call struct {
	flow, op, key string
	req           []byte // the request's body
	tries         int
	status        int    // the answer's status; 0 when none came within the bound
	body          []byte // the answer
	// failures are the tries answered with a 5xx, and whether a component was down meanwhile.
	failures []failure
	// refused counts the tries that got no answer: a refused or reset connection, or a timeout.
	refused int
	// last is the status of the last try, which for a call left without an answer says why.
	last     int
	lastBody []byte
	// end is when the call got its answer (or gave up), took how long it took with its retries.
	end  time.Time
	took time.Duration
}

// failure is a 5xx answer.
type failure struct {
	status int
	during string // the component down meanwhile, or ""
	at     time.Time
	body   string // the start of the answer, for a failure no outage explains
}

type authKind int

const (
	authBearer authKind = iota // the OAuth token: the gateway API
	authBasic                  // the client's id and secret: the token endpoint
	authAPIKey                 // the API key: the v1 API
	authNone                   // the hosted page's own requests
)

// retryable reports whether a client tries again: the node did not answer, answered 5xx, or said the
// request is in progress elsewhere (a 409 or 429 with Retry-After).
func retryable(status int, h http.Header) bool {
	return status == 0 || status >= 500 || (status == http.StatusConflict || status == http.StatusTooManyRequests) && h.Get("Retry-After") != ""
}

// call sends a request until it gets an answer, retrying with the same Idempotency-Key (key; none when
// empty) on the next node, with a growing pause, for at most f.bound. It logs the call.
func (f *fleet) call(ctx context.Context, flow, op, method, path string, body []byte, key string, auth authKind) call {
	if f.pace != nil {
		f.pace.Wait(ctx) // an error is ctx's end: the call goes ahead unpaced, as the flow finishes
	}
	c := call{flow: flow, op: op, key: key, req: body}
	begin := time.Now()
	deadline := begin.Add(f.bound)
	pause := 50 * time.Millisecond
	for {
		c.tries++
		n := f.nodes[f.next.Add(1)%uint64(len(f.nodes))]
		t0 := time.Now()
		status, h, b := f.try(ctx, n.url()+path, method, body, key, auth)
		c.last, c.lastBody = status, b
		switch {
		case status >= 500:
			c.failures = append(c.failures, failure{status: status, during: f.outages.overlaps(t0, time.Now()), at: t0, body: string(b[:min(len(b), 160)])})
		case status == 0:
			c.refused++
		}
		if !retryable(status, h) {
			c.status, c.body = status, b
			break
		}
		if time.Now().Add(pause).After(deadline) || context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
	c.end = time.Now()
	c.took = c.end.Sub(begin)
	f.mu.Lock()
	f.log = append(f.log, c)
	f.mu.Unlock()
	return c
}

// try sends one request; status 0 when no answer came.
func (f *fleet) try(ctx context.Context, u, method string, body []byte, key string, auth authKind) (int, http.Header, []byte) {
	// A request begun is finished even when the run ends: a client does not abandon a payment.
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), method, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	switch auth {
	case authBearer:
		req.Header.Set("Authorization", "Bearer "+f.token)
	case authBasic:
		req.SetBasicAuth(f.m.ClientID, f.m.ClientSecret)
	case authAPIKey:
		req.Header.Set("payments-api-key", f.apiKey)
		req.Header.Set("payments-account", f.m.AccountID)
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil
	}
	return resp.StatusCode, resp.Header, b
}

// calls are the calls made so far.
func (f *fleet) calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.log...)
}

// client runs client i's flows, chosen at random, until ctx is done.
func (f *fleet) client(ctx context.Context, i int, rng *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("drill-%d-%d-%d", i, n, rng.Uint32())
		amount := 100 + rng.Int64N(9900) // 1.00 to 99.99
		switch r := rng.IntN(100); {
		case r < 35:
			f.sale(ctx, key, amount)
		case r < 60:
			f.authorizeCaptureRefund(ctx, key, amount, rng)
		case r < 80:
			f.intent(ctx, key, amount, rng)
		default:
			f.hostedPage(ctx, key, amount)
		}
	}
}

// drillCard is the card the drill pays with: the profile's approving Visa.
const drillCard = "4242424242424242"

// cardBody is a gateway API payment of amount minor units (CAD) whose order_id is key, which the books
// find its transactions by.
func cardBody(key string, amount int64) []byte {
	return fmt.Appendf(nil, `{"amount":%q,"currency":"CAD","card_number":%q,"card_expiry_month":"12","card_expiry_year":"30","cvv2":"123","order_id":%q}`,
		decimal(amount), drillCard, key)
}

// decimal writes minor units of CAD as the gateway API's decimal string.
func decimal(minor int64) string { return fmt.Sprintf("%d.%02d", minor/100, minor%100) }

// result is a gateway API answer's transaction, when it was approved.
func approved(c call) (string, bool) {
	var t struct {
		TransactionID string `json:"transaction_id"`
		Result        string `json:"transaction_result"`
	}
	if c.status != http.StatusOK || json.Unmarshal(c.body, &t) != nil {
		return "", false
	}
	return t.TransactionID, t.Result == "APPROVED"
}

func (f *fleet) sale(ctx context.Context, key string, amount int64) {
	f.call(ctx, "sale", "sale", "POST", "/transaction-service/sale", cardBody(key, amount), key, authBearer)
}

// authorizeCaptureRefund authorizes amount, captures part of it, and refunds two parts of the capture.
func (f *fleet) authorizeCaptureRefund(ctx context.Context, key string, amount int64, rng *rand.Rand) {
	const flow = "authorize → capture → refunds"
	auth, ok := approved(f.call(ctx, flow, "authorize", "POST", "/transaction-service/authorize", cardBody(key, amount), key, authBearer))
	if !ok {
		return
	}
	captured := amount - rng.Int64N(amount/2)
	capture, ok := approved(f.call(ctx, flow, "capture", "POST", "/transaction-service/capture/"+auth,
		fmt.Appendf(nil, `{"amount":%q}`, decimal(captured)), key+"-capture", authBearer))
	if !ok {
		return
	}
	for i, part := range []int64{captured / 3, captured / 4} {
		f.call(ctx, flow, "refund", "POST", "/transaction-service/refund/"+capture, fmt.Appendf(nil, `{"amount":%q}`, decimal(max(part, 1))),
			key+"-refund"+strconv.Itoa(i+1), authBearer)
	}
}

// intent creates a payment intent of amount to be captured by hand, confirms it with a payment method
// of the drill's card, and captures part of it.
func (f *fleet) intent(ctx context.Context, key string, amount int64, rng *rand.Rand) {
	const flow = "v1 payment intent"
	var in struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	c := f.call(ctx, flow, "create", "POST", "/v1/payment-intents", fmt.Appendf(nil, `{"amount":%d,"currency":"cad","capture_method":"manual"}`, amount),
		key+"-create", authAPIKey)
	if c.status != http.StatusOK || json.Unmarshal(c.body, &in) != nil {
		return
	}
	var pm struct {
		ID string `json:"id"`
	}
	c = f.call(ctx, flow, "payment method", "POST", "/v1/payment-methods",
		fmt.Appendf(nil, `{"type":"card","card":{"number":%q,"exp_month":12,"exp_year":2030,"cvc":"123"}}`, drillCard), key+"-method", authAPIKey)
	if c.status != http.StatusOK || json.Unmarshal(c.body, &pm) != nil {
		return
	}
	c = f.call(ctx, flow, "confirm", "POST", "/v1/payment-intents/"+in.ID+"/confirm", fmt.Appendf(nil, `{"payment_method_id":%q}`, pm.ID),
		key+"-confirm", authAPIKey)
	if c.status != http.StatusOK || json.Unmarshal(c.body, &in) != nil || in.Status != "requires_capture" {
		return
	}
	f.call(ctx, flow, "capture", "POST", "/v1/payment-intents/"+in.ID+"/capture",
		fmt.Appendf(nil, `{"amount_to_capture":%d}`, amount-rng.Int64N(amount/2)), key+"-capture", authAPIKey)
}

// hostedPage creates a hosted-page session of amount with the API key, then posts its card form as
// the page's script does: JSON to the session's pay endpoint, no credentials, no Idempotency-Key.
func (f *fleet) hostedPage(ctx context.Context, key string, amount int64) {
	const flow = "hosted page"
	var s struct {
		URL string `json:"url"`
	}
	c := f.call(ctx, flow, "session", "POST", "/v1/checkout/hosted-payment-page/sessions",
		fmt.Appendf(nil, `{"amount":%d,"currency":"cad","capture_method":"automatic"}`, amount), key+"-session", authAPIKey)
	if c.status != http.StatusOK || json.Unmarshal(c.body, &s) != nil {
		return
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return
	}
	f.call(ctx, flow, "pay", "POST", u.Path+"/pay", fmt.Appendf(nil, `{"type":"card","card":{"number":%q,"exp_month":12,"exp_year":2030,"cvc":"123"},`+
		`"billing_details":{"name":"Ada Lovelace"}}`, drillCard), "", authNone)
}

// subscribe creates n customers with the drill's card stored, each subscribed to a daily plan that the
// billing engine charges at once; it returns how many subscriptions it made.
func (f *fleet) subscribe(ctx context.Context, n int) (int, error) {
	const flow = "subscription setup"
	must := func(op, path, body, key string) (map[string]any, error) {
		c := f.call(ctx, flow, op, "POST", path, []byte(body), key, authBearer)
		var out map[string]any
		if c.status != http.StatusOK || json.Unmarshal(c.body, &out) != nil {
			return nil, fmt.Errorf("%s: %d %s", op, c.status, c.body)
		}
		return out, nil
	}
	if n == 0 {
		return 0, nil
	}
	p, err := must("plan", "/plan-service/plan", `{"name":"Drill daily","amount":"3.00","currency":"CAD","frequency":"DAILY"}`, "drill-plan")
	if err != nil {
		return 0, err
	}
	for i := range n {
		c, err := must("customer", "/customer-service/customer", `{"email":"drill@example.com"}`, fmt.Sprintf("drill-customer-%d", i))
		if err != nil {
			return i, err
		}
		id := c["lookup_id"].(string)
		if _, err := must("card", "/customer-service/customer/"+id+"/card",
			fmt.Sprintf(`{"card_number":%q,"card_expiry_month":12,"card_expiry_year":2030}`, drillCard), fmt.Sprintf("drill-card-%d", i)); err != nil {
			return i, err
		}
		if _, err := must("subscribe", "/customer-service/customer/"+id+"/subscription", fmt.Sprintf(`{"plan_lookup_id":%q}`, p["lookup_id"]),
			fmt.Sprintf("drill-subscribe-%d", i)); err != nil {
			return i, err
		}
	}
	return n, nil
}

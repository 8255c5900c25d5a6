package stripe_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/stripe"
)

// fake is a local Stripe for the connector's behaviour: the endpoints the connector calls, answering
// as Stripe documents (https://docs.stripe.com/api, https://docs.stripe.com/testing for the test
// cards, https://docs.stripe.com/api/errors for the error shape), with its idempotency (a key replays
// its first answer, and refuses other parameters), its events, and a search index that lags. Faults
// are injected per route.
type fake struct {
	t     *testing.T
	srv   *httptest.Server
	clock *clock.Manual
	key   string

	mu        sync.Mutex
	seq       int
	methods   map[string]url.Values // payment method id → its card
	objects   map[string]obj        // payment intents, setup intents and refunds by id
	events    []obj                 // oldest first
	replays   map[string]replay     // by Idempotency-Key
	requests  []request
	faults    map[string]*injected
	searchLag time.Duration // how long after it is created a PaymentIntent becomes searchable
	pageSize  int           // the most events one page lists, whatever the limit asked
}

type obj = map[string]any

type replay struct {
	route, params string
	status        int
	body          []byte
}

// request is what the fake received.
type request struct {
	Route          string // "POST /v1/payment_intents", "POST /v1/payment_intents/{id}/capture", …
	Form           url.Values
	IdempotencyKey string
}

// injected is a failure of a route: "hang" (never answers, does nothing), "lose" (does the
// work, then never answers), "drop" (closes the connection without doing anything), or an HTTP
// status answered without doing anything.
type injected struct {
	how   string
	times int    // how many requests it hits; < 0 for all
	then  func() // called once a "hang" request has arrived, or a "lose" one is done; may be nil
}

func newFake(t *testing.T) *fake {
	f := &fake{t: t, clock: clock.NewManual(time.Now().Truncate(time.Second)), key: "sk_test_" + strings.Repeat("k", 24),
		methods: map[string]url.Values{}, objects: map[string]obj{}, replays: map[string]replay{}, faults: map[string]*injected{},
		pageSize: 100}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// config is the connector's configuration for an account on the fake.
func (f *fake) config() []byte {
	return []byte(fmt.Sprintf(`{"secret_key":%q,"api_base":%q}`, f.key, f.srv.URL))
}

// open opens an account on the fake, with no network retries unless cfg says otherwise, the fake's
// clock, and a logger that fails the test if a card number reaches it.
func (f *fake) open(cfg stripe.KindConfig) processor.Processor {
	f.t.Helper()
	if cfg.NetworkRetries == 0 {
		cfg.NetworkRetries = -1
	}
	cfg.Now = f.clock.Now
	if cfg.Logger == nil {
		cfg.Logger, _ = cardtest.Logger(f.t)
	}
	p, err := stripe.NewKind(cfg).Open(f.config())
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// start starts a fake and opens an account on it with the defaults of open.
func start(t *testing.T) (*fake, processor.Processor) {
	f := newFake(t)
	return f, f.open(stripe.KindConfig{})
}

// inject makes the next times requests of route fail as how says (times < 0: all of them).
func (f *fake) inject(route, how string, times int) { f.injectThen(route, how, times, nil) }

// injectThen is inject, calling then when each request hangs for good (see injected).
func (f *fake) injectThen(route, how string, times int, then func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[route] = &injected{how: how, times: times, then: then}
}

// received returns the requests of route so far.
func (f *fake) received(route string) []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rs []request
	for _, r := range f.requests {
		if r.Route == route {
			rs = append(rs, r)
		}
	}
	return rs
}

func (f *fake) object(id string) obj {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.objects[id]
}

var idInPath = regexp.MustCompile(`/(pi|seti|re|pm)_[0-9]+`)

// Stripe's documented test cards, and what a confirmation of each answers
// (https://docs.stripe.com/testing#declined-payments).
var testDeclines = map[string][2]string{ // number → code, decline_code
	cardtest.Declined:          {"card_declined", "generic_decline"},
	cardtest.InsufficientFunds: {"card_declined", "insufficient_funds"},
	cardtest.LostCard:          {"card_declined", "lost_card"},
	cardtest.StolenCard:        {"card_declined", "stolen_card"},
	cardtest.ExpiredCard:       {"expired_card", ""},
	cardtest.IncorrectCVC:      {"incorrect_cvc", ""},
	cardtest.ProcessingError:   {"processing_error", ""},
	"4000000000006975":         {"card_declined", "card_velocity_exceeded"},
	"4100000000000019":         {"card_declined", "fraudulent"},
}

// testAuthentication are the test cards that require 3-D Secure.
var testAuthentication = map[string]bool{cardtest.ThreeDSecure: true, cardtest.ThreeDSecure2: true}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	route := r.Method + " " + idInPath.ReplaceAllString(r.URL.Path, "/{id}")
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.requests = append(f.requests, request{Route: route, Form: r.Form, IdempotencyKey: key})
	var how string
	then := func() {}
	if ft := f.faults[route]; ft != nil && ft.times != 0 {
		how = ft.how
		ft.times--
		if ft.then != nil {
			then = ft.then
		}
	}
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		f.write(w, 401, errorBody(obj{"type": "invalid_request_error", "message": "Invalid API Key provided"}))
		return
	}
	switch how {
	case "hang":
		then()
		<-r.Context().Done()
		return
	case "":
	case "drop":
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	case "lose":
		defer func() {
			then()
			<-r.Context().Done()
		}()
	default:
		status, _ := strconv.Atoi(how)
		typ, code := "api_error", ""
		if status == 429 {
			typ, code = "invalid_request_error", "rate_limit"
		}
		f.write(w, status, errorBody(obj{"type": typ, "code": code, "message": "Injected"}))
		return
	}

	f.mu.Lock()
	params := paramsOf(r.Form)
	if prev, ok := f.replays[key]; ok && key != "" && r.Method == http.MethodPost {
		f.mu.Unlock()
		if prev.route != route || prev.params != params {
			f.write(w, 400, errorBody(obj{"type": "idempotency_error",
				"message": "Keys for idempotent requests can only be used with the same parameters they were first used with."}))
			return
		}
		if how == "" {
			w.Header().Set("Idempotent-Replayed", "true")
			f.write(w, prev.status, prev.body)
		}
		return
	}
	status, body := f.handle(route, r, key)
	if key != "" && r.Method == http.MethodPost {
		f.replays[key] = replay{route: route, params: params, status: status, body: body}
	}
	f.mu.Unlock()
	if how == "" {
		f.write(w, status, body)
	}
}

func (f *fake) write(w http.ResponseWriter, status int, body []byte) {
	f.mu.Lock()
	f.seq++
	w.Header().Set("Request-Id", fmt.Sprintf("req_%d", f.seq))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

func paramsOf(form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%v&", k, form[k])
	}
	return b.String()
}

func errorBody(e obj) []byte {
	b, _ := json.Marshal(obj{"error": e})
	return b
}

func jsonOf(o obj) []byte {
	b, _ := json.Marshal(o)
	return b
}

// newID returns a new id with prefix; f.mu is held.
func (f *fake) newID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s_%d", prefix, f.seq)
}

// emit records an event of typ about o, caused by the request with Idempotency-Key key; f.mu is held.
func (f *fake) emit(typ, key string, o obj) {
	snapshot := obj{}
	for k, v := range o {
		snapshot[k] = v
	}
	var req obj
	if key != "" {
		req = obj{"id": fmt.Sprintf("req_%d", f.seq), "idempotency_key": key}
	}
	f.events = append(f.events, obj{"id": f.newID("evt"), "object": "event", "type": typ, "created": f.clock.Now().Unix(),
		"livemode": false, "pending_webhooks": 0, "api_version": "2026-06-24.dahlia", "request": req, "data": obj{"object": snapshot}})
}

// handle carries out a request that got through; f.mu is held.
func (f *fake) handle(route string, r *http.Request, key string) (int, []byte) {
	id := ""
	if m := idInPath.FindString(r.URL.Path); m != "" {
		id = m[1:]
	}
	switch route {
	case "POST /v1/payment_methods":
		return f.createPaymentMethod(r.Form)
	case "POST /v1/payment_intents", "POST /v1/setup_intents":
		return f.createIntent(route == "POST /v1/setup_intents", r.Form, key)
	case "POST /v1/payment_intents/{id}/capture":
		return f.capture(id, r.Form, key)
	case "POST /v1/payment_intents/{id}/cancel":
		return f.cancel(id, key)
	case "POST /v1/refunds":
		return f.refund(r.Form, key)
	case "GET /v1/payment_intents/{id}", "GET /v1/setup_intents/{id}", "GET /v1/refunds/{id}":
		if o, ok := f.objects[id]; ok {
			return 200, jsonOf(o)
		}
		return 404, errorBody(obj{"type": "invalid_request_error", "code": "resource_missing", "message": "No such object"})
	case "GET /v1/payment_intents/search":
		return f.search(r.Form.Get("query"))
	case "GET /v1/events":
		return f.listEvents(r.Form)
	}
	return 404, errorBody(obj{"type": "invalid_request_error", "message": "Unrecognized request URL"})
}

func (f *fake) createPaymentMethod(form url.Values) (int, []byte) {
	if form.Get("type") != "card" || form.Get("card[number]") == "" {
		return 400, errorBody(obj{"type": "invalid_request_error", "code": "parameter_missing", "param": "card[number]"})
	}
	month, _ := strconv.Atoi(form.Get("card[exp_month]"))
	year, _ := strconv.Atoi(form.Get("card[exp_year]"))
	now := f.clock.Now()
	if year < now.Year() || year == now.Year() && month < int(now.Month()) {
		return 402, errorBody(obj{"type": "card_error", "code": "invalid_expiry_year", "param": "exp_year",
			"message": "Your card's expiration year is invalid."})
	}
	id := f.newID("pm")
	f.methods[id] = url.Values{"number": {form.Get("card[number]")}, "cvc": {form.Get("card[cvc]")}}
	number := form.Get("card[number]")
	return 200, jsonOf(obj{"id": id, "object": "payment_method", "type": "card",
		"card": obj{"last4": number[len(number)-4:], "exp_month": month, "exp_year": year}})
}

// createIntent creates and confirms a PaymentIntent (or a SetupIntent), deciding by the test card.
func (f *fake) createIntent(setup bool, form url.Values, key string) (int, []byte) {
	card, ok := f.methods[form.Get("payment_method")]
	if !ok || form.Get("confirm") != "true" || form.Get("payment_method_types[0]") != "card" {
		return 400, errorBody(obj{"type": "invalid_request_error", "code": "parameter_invalid_empty", "param": "payment_method"})
	}
	prefix, object, kind := "pi", "payment_intent", "payment_intent"
	if setup {
		prefix, object, kind = "seti", "setup_intent", "setup_intent"
	}
	metadata := obj{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok {
			metadata[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	o := obj{"id": f.newID(prefix), "object": object, "created": f.clock.Now().Unix(), "livemode": false,
		"payment_method": form.Get("payment_method"), "metadata": metadata, "status": "succeeded",
		"last_payment_error": nil, "last_setup_error": nil, "latest_charge": nil}
	amount, _ := strconv.ParseInt(form.Get("amount"), 10, 64)
	if !setup {
		o["amount"], o["currency"], o["capture_method"] = amount, form.Get("currency"), form.Get("capture_method")
		o["amount_capturable"], o["amount_received"] = int64(0), int64(0)
	}
	f.objects[o["id"].(string)] = o
	f.emit(kind+".created", key, o)

	number := card.Get("number")
	decline, declines := testDeclines[number]
	if testAuthentication[number] {
		if form.Get("off_session") != "true" {
			o["status"] = "requires_action"
			o["next_action"] = obj{"type": "use_stripe_sdk"}
			f.emit(kind+".requires_action", key, o)
			return 200, jsonOf(o)
		}
		// "If the payment requires authentication, the PaymentIntent fails with an authentication_required error."
		decline, declines = [2]string{"authentication_required", "authentication_required"}, true
	}
	if declines {
		e := obj{"type": "card_error", "code": decline[0], "message": "Your card was declined."}
		if decline[1] != "" {
			e["decline_code"] = decline[1]
		}
		o["status"] = "requires_payment_method"
		if setup {
			o["last_setup_error"] = e
		} else {
			o["last_payment_error"] = e
			o["latest_charge"] = f.newID("ch")
		}
		f.emit(kind+".payment_failed", key, o)
		withIntent := obj{}
		for k, v := range e {
			withIntent[k] = v
		}
		withIntent[kind] = o
		return 402, errorBody(withIntent)
	}
	if !setup {
		o["latest_charge"] = f.newID("ch")
		if form.Get("capture_method") == "manual" {
			o["status"], o["amount_capturable"] = "requires_capture", amount
			f.emit("payment_intent.amount_capturable_updated", key, o)
		} else {
			o["amount_received"] = amount
			f.emit("payment_intent.succeeded", key, o)
		}
	} else {
		f.emit("setup_intent.succeeded", key, o)
	}
	return 200, jsonOf(o)
}

func unexpectedState(o obj) (int, []byte) {
	return 400, errorBody(obj{"type": "invalid_request_error", "code": "payment_intent_unexpected_state",
		"message": fmt.Sprintf("This PaymentIntent's status is %s.", o["status"]), "payment_intent": o})
}

func (f *fake) capture(id string, form url.Values, key string) (int, []byte) {
	o, ok := f.objects[id]
	if !ok {
		return 404, errorBody(obj{"type": "invalid_request_error", "code": "resource_missing", "param": "intent"})
	}
	if o["status"] != "requires_capture" {
		return unexpectedState(o)
	}
	amount, _ := strconv.ParseInt(form.Get("amount_to_capture"), 10, 64)
	if amount > o["amount_capturable"].(int64) {
		return 400, errorBody(obj{"type": "invalid_request_error", "code": "amount_too_large", "param": "amount_to_capture"})
	}
	o["status"], o["amount_received"], o["amount_capturable"] = "succeeded", amount, int64(0)
	f.emit("payment_intent.succeeded", key, o)
	return 200, jsonOf(o)
}

func (f *fake) cancel(id, key string) (int, []byte) {
	o, ok := f.objects[id]
	if !ok {
		return 404, errorBody(obj{"type": "invalid_request_error", "code": "resource_missing", "param": "intent"})
	}
	if s := o["status"]; s == "succeeded" || s == "canceled" || s == "processing" {
		return unexpectedState(o)
	}
	o["status"], o["canceled_at"] = "canceled", f.clock.Now().Unix()
	f.emit("payment_intent.canceled", key, o)
	return 200, jsonOf(o)
}

func (f *fake) refund(form url.Values, key string) (int, []byte) {
	pi, ok := f.objects[form.Get("payment_intent")]
	if !ok || pi["object"] != "payment_intent" {
		return 404, errorBody(obj{"type": "invalid_request_error", "code": "resource_missing", "param": "payment_intent"})
	}
	amount, _ := strconv.ParseInt(form.Get("amount"), 10, 64)
	refunded, _ := pi["amount_refunded"].(int64)
	if pi["status"] != "succeeded" || amount > pi["amount_received"].(int64)-refunded {
		return 400, errorBody(obj{"type": "invalid_request_error", "code": "amount_too_large", "param": "amount"})
	}
	pi["amount_refunded"] = refunded + amount
	r := obj{"id": f.newID("re"), "object": "refund", "amount": amount, "currency": pi["currency"], "payment_intent": pi["id"],
		"status": "succeeded", "created": f.clock.Now().Unix(), "metadata": obj{"kassa_reference": form.Get("metadata[kassa_reference]")}}
	f.objects[r["id"].(string)] = r
	f.emit("refund.created", key, r)
	f.emit("charge.refunded", key, obj{"id": pi["latest_charge"], "object": "charge"})
	return 200, jsonOf(r)
}

var metadataQuery = regexp.MustCompile(`^metadata\['kassa_reference'\]:'((?:[^'\\]|\\.)*)'$`)

func (f *fake) search(query string) (int, []byte) {
	m := metadataQuery.FindStringSubmatch(query)
	if m == nil {
		return 400, errorBody(obj{"type": "invalid_request_error", "code": "parameter_invalid_string", "param": "query"})
	}
	ref := strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[1])
	data := []obj{}
	for _, o := range f.objects {
		md, _ := o["metadata"].(obj)
		if o["object"] == "payment_intent" && md["kassa_reference"] == ref &&
			!time.Unix(o["created"].(int64), 0).Add(f.searchLag).After(f.clock.Now()) {
			data = append(data, o)
		}
	}
	return 200, jsonOf(obj{"object": "search_result", "url": "/v1/payment_intents/search", "data": data, "has_more": false, "next_page": nil})
}

func (f *fake) listEvents(form url.Values) (int, []byte) {
	bound := func(name string, dflt int64) int64 {
		if v := form.Get("created[" + name + "]"); v != "" {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
		return dflt
	}
	from, to := bound("gte", 0), bound("lte", 1<<62)
	limit, _ := strconv.Atoi(form.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 10
	}
	limit = min(limit, f.pageSize)
	after := form.Get("starting_after")
	var page []obj
	more := false
	for i := len(f.events) - 1; i >= 0; i-- { // newest first
		ev := f.events[i]
		if after != "" {
			if ev["id"] == after {
				after = ""
			}
			continue
		}
		c := ev["created"].(int64)
		if (form.Get("type") != "" && ev["type"] != form.Get("type")) || c < from || c > to {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, ev)
	}
	return 200, jsonOf(obj{"object": "list", "url": "/v1/events", "data": page, "has_more": more})
}

package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/client"
)

// fast is a retry policy for tests: the real one's shape with short backoffs.
var fast = client.Retry{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 3 * time.Second}

// attempt is one request as it left the client, and what came of it.
type attempt struct {
	method, path, key string
	status            int // 0: no answer
	retryAfter        string
	at                time.Time
}

// recorder is the base transport of a client under test: it sends each attempt on a connection of its
// own (so that net/http never replays a request by itself, which it does on a reused connection for
// a request with an Idempotency-Key) and records it.
type recorder struct {
	mu       sync.Mutex
	attempts []attempt
	next     http.RoundTripper
}

func newRecorder() *recorder {
	return &recorder{next: &http.Transport{DisableKeepAlives: true}}
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	a := attempt{method: req.Method, path: req.URL.Path, key: req.Header.Get("Idempotency-Key"), at: time.Now()}
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	}
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
	return resp, err
}

// to returns the attempts sent to path.
func (r *recorder) to(path string) []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []attempt
	for _, a := range r.attempts {
		if a.path == path {
			out = append(out, a)
		}
	}
	return out
}

// newClient returns a generated client of server whose transport retries as policy says over rec.
func newClient(t *testing.T, server string, auth client.Auth, policy client.Retry, rec *recorder) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(server,
		client.WithHTTPClient(&http.Client{Transport: client.Transport(server, auth, policy, rec)}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func merchantAuth() client.Auth {
	return client.ClientCredentials(os.Getenv("KASSA_CLIENT_ID"), os.Getenv("KASSA_CLIENT_SECRET"))
}

// TestLostAnswerIsRetriedWithItsKey: a sale reaches Kassa, which charges the card, but its answer is
// lost on the way back (a proxy in between closes the connection). The client tries again with the
// same Idempotency-Key, Kassa replays the first answer, and the card is charged once.
func TestLostAnswerIsRetriedWithItsKey(t *testing.T) {
	t.Parallel()
	upstream, err := url.Parse(os.Getenv("KASSA_URL"))
	if err != nil {
		t.Fatal(err)
	}
	var dropped atomic.Bool
	var lost []byte
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up := r.Clone(r.Context())
		up.URL.Scheme, up.URL.Host, up.Host, up.RequestURI = upstream.Scheme, upstream.Host, "", ""
		resp, err := http.DefaultTransport.RoundTrip(up)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if r.URL.Path == "/transaction-service/sale" && dropped.CompareAndSwap(false, true) {
			lost = body
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
	}))
	defer proxy.Close()

	rec := newRecorder()
	kassa := newClient(t, proxy.URL, merchantAuth(), fast, rec)
	email := "lost-answer@example.com"
	sale, err := kassa.SaleWithResponse(context.Background(), nil, client.ChargeRequest{
		Amount: "12.34", Currency: new("CAD"), Email: &email,
		CardNumber: new("4242424242424242"), CardExpiryMonth: new("08"), CardExpiryYear: new("30"), Cvv2: new("123"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if sale.JSON200 == nil {
		t.Fatalf("sale: %s %s", sale.Status(), sale.Body)
	}
	attempts := rec.to("/transaction-service/sale")
	if len(attempts) != 2 || attempts[0].status != 0 || attempts[1].status != http.StatusOK {
		t.Fatalf("attempts %+v, want one without an answer, then a 200", attempts)
	}
	if attempts[0].key == "" || attempts[1].key != attempts[0].key {
		t.Errorf("Idempotency-Keys %q then %q, want one key for both attempts", attempts[0].key, attempts[1].key)
	}
	var first client.Transaction
	if err := json.Unmarshal(lost, &first); err != nil {
		t.Fatalf("the lost answer %s: %v", lost, err)
	}
	if sale.JSON200.TransactionId != first.TransactionId || sale.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry answered %s (Idempotent-Replayed %q), want a replay of %s", sale.JSON200.TransactionId,
			sale.HTTPResponse.Header.Get("Idempotent-Replayed"), first.TransactionId)
	}
	list, err := kassa.ListTransactionsWithResponse(context.Background(), &client.ListTransactionsParams{EmailAddress: &email})
	if err != nil || list.JSON200 == nil {
		t.Fatalf("list: %v %s", err, list.Body)
	}
	if n := len(list.JSON200.Entities); n != 1 {
		t.Errorf("%d transactions for %s, want the one sale", n, email)
	}
}

// TestRateLimitedCallWaitsForRetryAfter: a merchant allowed one request a second sends three at once;
// Kassa refuses the extra ones with 429 and a Retry-After, and the client waits that long and tries
// again, so that every call succeeds, the sale among them charged once.
func TestRateLimitedCallWaitsForRetryAfter(t *testing.T) {
	t.Parallel()
	m, err := newMerchant("Slow Shop", "slow@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := operator("merchant", "update", "--merchant-id", m["merchant_id"], "--velocity-request-rate", "1"); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	kassa := newClient(t, os.Getenv("KASSA_URL"), client.ClientCredentials(m["client_id"], m["client_secret"]), fast, rec)
	ctx := context.Background()
	for range 2 {
		list, err := kassa.ListTransactionsWithResponse(ctx, nil)
		if err != nil || list.JSON200 == nil {
			t.Fatalf("list: %v %s", err, list.Body)
		}
	}
	sale, err := kassa.SaleWithResponse(ctx, nil, client.ChargeRequest{
		Amount: "5.00", CardNumber: new("4242424242424242"), CardExpiryMonth: new("08"), CardExpiryYear: new("30"), Cvv2: new("123"),
	})
	if err != nil || sale.JSON200 == nil {
		t.Fatalf("sale: %v %s", err, sale.Body)
	}
	for _, path := range []string{"/transaction-service/transaction", "/transaction-service/sale"} {
		attempts := rec.to(path)
		var refused int
		for i, a := range attempts {
			if a.status != http.StatusTooManyRequests {
				continue
			}
			refused++
			wait, err := strconv.Atoi(a.retryAfter)
			if err != nil || wait < 1 {
				t.Fatalf("429 with Retry-After %q", a.retryAfter)
			}
			if i+1 == len(attempts) {
				t.Fatalf("%s: the last attempt was refused: %+v", path, attempts)
			}
			next := attempts[i+1]
			if gap := next.at.Sub(a.at); gap < time.Duration(wait)*time.Second-50*time.Millisecond {
				t.Errorf("%s: retried %v after a 429 with Retry-After %d", path, gap, wait)
			}
			if next.key != a.key {
				t.Errorf("%s: Idempotency-Key %q after %q", path, next.key, a.key)
			}
		}
		if refused == 0 {
			t.Errorf("%s: no attempt was refused at one request a second: %+v", path, attempts)
		}
	}
	list, err := kassa.ListTransactionsWithResponse(ctx, nil)
	if err != nil || list.JSON200 == nil {
		t.Fatalf("list: %v %s", err, list.Body)
	}
	if n := len(list.JSON200.Entities); n != 1 {
		t.Errorf("%d transactions, want the one sale", n)
	}
}

// script is a server that answers each request with the next of its answers (the last one for
// ever): a status and its headers, or 0 to close the connection without an answer.
type script struct {
	answers []answer
	n       atomic.Int32
}

type answer struct {
	status int
	header map[string]string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := s.answers[min(int(s.n.Add(1))-1, len(s.answers)-1)]
	if a.status == 0 {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, `{"error":"e","message":"m"}`)
}

// TestRetryPolicy sends one call per case to a scripted server and counts its attempts: which outcomes
// are retried, for which methods, and that every attempt of a POST carries the same Idempotency-Key,
// the caller's when it sent one.
func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	ok := answer{status: 200}
	status := func(code int, header ...string) answer {
		a := answer{status: code, header: map[string]string{}}
		for i := 0; i+1 < len(header); i += 2 {
			a.header[header[i]] = header[i+1]
		}
		return a
	}
	inAMinute := time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)
	cases := []struct {
		name     string
		method   string
		key      string // the caller's Idempotency-Key
		answers  []answer
		attempts int
		status   int // of the call; 0: an error
	}{
		{"POST after 503", "POST", "", []answer{status(503), ok}, 2, 200},
		{"POST after 502 and 504", "POST", "", []answer{status(502), status(504), ok}, 3, 200},
		{"POST after a lost answer", "POST", "", []answer{{}, ok}, 2, 200},
		{"the caller's key", "POST", "order-1001", []answer{status(503), ok}, 2, 200},
		{"GET after a lost answer, without a key", "GET", "", []answer{{}, ok}, 2, 200},
		{"PUT and DELETE are idempotent", "DELETE", "", []answer{status(503), ok}, 2, 200},
		{"PATCH after 503 is not retried", "PATCH", "", []answer{status(503), ok}, 1, 503},
		{"PATCH after a lost answer is not retried", "PATCH", "", []answer{{}, ok}, 1, 0},
		{"PATCH after 429 is retried", "PATCH", "", []answer{status(429, "Retry-After", "0"), ok}, 2, 200},
		{"429 after Retry-After", "POST", "", []answer{status(429, "Retry-After", "0"), ok}, 2, 200},
		{"429 asking for longer than MaxDelay", "POST", "", []answer{status(429, "Retry-After", "60"), ok}, 1, 429},
		{"429 until an HTTP date beyond MaxDelay", "GET", "", []answer{status(429, "Retry-After", inAMinute), ok}, 1, 429},
		{"503 asking for longer than MaxDelay", "GET", "", []answer{status(503, "Retry-After", "60"), ok}, 1, 503},
		{"at most MaxAttempts", "POST", "", []answer{status(503)}, fast.MaxAttempts, 503},
		{"400", "POST", "", []answer{status(400), ok}, 1, 400},
		{"401", "GET", "", []answer{status(401), ok}, 1, 401},
		{"404", "GET", "", []answer{status(404), ok}, 1, 404},
		{"409 with Retry-After: in progress", "POST", "", []answer{status(409, "Retry-After", "0"), ok}, 2, 200},
		{"409 without Retry-After", "POST", "", []answer{status(409), ok}, 1, 409},
		{"409 with Retry-After on a PATCH", "PATCH", "", []answer{status(409, "Retry-After", "0"), ok}, 1, 409},
		{"422", "POST", "", []answer{status(422), ok}, 1, 422},
		{"500", "POST", "", []answer{status(500), ok}, 1, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(&script{answers: c.answers})
			defer srv.Close()
			rec := newRecorder()
			hc := &http.Client{Transport: client.Transport(srv.URL, client.BearerToken("kat_test"), fast, rec)}
			req, err := http.NewRequest(c.method, srv.URL+"/v1/thing", strings.NewReader(`{"amount":100}`))
			if err != nil {
				t.Fatal(err)
			}
			if c.key != "" {
				req.Header.Set("Idempotency-Key", c.key)
			}
			resp, err := hc.Do(req)
			got := 0
			if err == nil {
				got = resp.StatusCode
				resp.Body.Close()
			}
			if got != c.status {
				t.Errorf("status %d (err %v), want %d", got, err, c.status)
			}
			attempts := rec.to("/v1/thing")
			if len(attempts) != c.attempts {
				t.Errorf("%d attempts, want %d: %+v", len(attempts), c.attempts, attempts)
			}
			for _, a := range attempts {
				switch {
				case c.method != "POST" && a.key != "":
					t.Errorf("%s sent an Idempotency-Key", c.method)
				case c.method == "POST" && a.key != attempts[0].key, c.method == "POST" && a.key == "":
					t.Errorf("Idempotency-Keys %+v, want one for every attempt", attempts)
				case c.key != "" && a.key != c.key:
					t.Errorf("Idempotency-Key %q, want the caller's %q", a.key, c.key)
				}
			}
		})
	}
}

// TestEachCallHasItsOwnKey: two calls with the same body are two operations.
func TestEachCallHasItsOwnKey(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&script{answers: []answer{{status: 200}}})
	defer srv.Close()
	rec := newRecorder()
	hc := &http.Client{Transport: client.Transport(srv.URL, client.BearerToken("kat_test"), fast, rec)}
	for range 2 {
		resp, err := hc.Post(srv.URL+"/v1/thing", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	a := rec.to("/v1/thing")
	if len(a) != 2 || a[0].key == "" || a[0].key == a[1].key {
		t.Errorf("keys %q and %q, want two different keys", a[0].key, a[1].key)
	}
}

// TestRetryStopsAtTheDeadline: a wait that the call's context deadline would not allow ends the call
// with the answer in hand, and a context canceled during a wait ends it at once.
func TestRetryStopsAtTheDeadline(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&script{answers: []answer{{status: 429, header: map[string]string{"Retry-After": "2"}}}})
	defer srv.Close()
	hc := &http.Client{Transport: client.Transport(srv.URL, client.BearerToken("kat_test"), fast, newRecorder())}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/thing", nil)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != 429 || time.Since(start) > 500*time.Millisecond {
		t.Errorf("got %v %v after %v, want the 429 at once", resp, err, time.Since(start))
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	req, _ = http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/thing", nil)
	start = time.Now()
	if _, err := hc.Do(req); err == nil || time.Since(start) > time.Second {
		t.Errorf("got err %v after %v, want the cancellation within the wait", err, time.Since(start))
	}
}

// TestManyAttemptsKeepTheBackoffBounded: the backoff stops doubling at MaxDelay, however many attempts
// a policy allows (doubling 1 ms 44 times overflows a time.Duration).
func TestManyAttemptsKeepTheBackoffBounded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&script{answers: []answer{{status: 503}}})
	defer srv.Close()
	rec := newRecorder()
	policy := client.Retry{MaxAttempts: 60, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	hc := &http.Client{Transport: client.Transport(srv.URL, client.BearerToken("kat_test"), policy, rec)}
	start := time.Now()
	resp, err := hc.Get(srv.URL + "/v1/thing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := len(rec.to("/v1/thing")); n != policy.MaxAttempts || resp.StatusCode != 503 {
		t.Errorf("%d attempts ending in %d, want %d ending in 503", n, resp.StatusCode, policy.MaxAttempts)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("%d attempts took %v", policy.MaxAttempts, took)
	}
}

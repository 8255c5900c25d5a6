package idempotency_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// server answers with the body it was sent, a counter and the key it sees; status 503 when the body
// says "fail", 429 when it says "limited", 409 when it says "conflict", and 409 with Retry-After when
// it says "busy". A request's principal is the account and credential of its
// Account and Credential headers; without Account it has none.
func server(t *testing.T, db *store.DB, c *clock.Manual) (*httptest.Server, *idempotency.Store, *atomic.Int64) {
	ctx := context.Background()
	kek, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		t.Fatal(err)
	}
	ring, err := envelope.NewKeyring(ctx, db, kek, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	s, err := idempotency.New(ctx, idempotency.Config{DB: db, Keyring: ring, Now: c.Now, Lock: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	unstick := make(chan struct{})
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		b, _ := io.ReadAll(r.Body)
		if string(b) == "hang" && n%2 == 1 {
			<-unstick // the first of each pair answers only when the test ends
		}
		switch string(b) {
		case "fail":
			w.WriteHeader(503)
		case "limited":
			w.WriteHeader(429)
		case "busy":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(409)
		case "conflict":
			w.WriteHeader(409)
		}
		w.Write([]byte(`{"run":` + strconv.FormatInt(n, 10) + `,"key":"` + idempotency.Key(r.Context()) + `"}`))
	}))
	authenticated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Account") != "" {
			p := httpapi.Principal{Account: r.Header.Get("Account"), Credential: r.Header.Get("Credential")}
			r = r.WithContext(httpapi.WithPrincipal(r.Context(), p))
		}
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(httpapi.Middleware(slog.New(slog.DiscardHandler), nil, authenticated))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(unstick) }) // runs before srv.Close, which waits for handlers
	return srv, s, &runs
}

// send posts body with the key as the principal "account credential" and returns the status, the
// body and the Idempotent-Replayed header.
func send(t *testing.T, url, principal, key, body string) (int, string, string) {
	code, b, h := sendHeaders(t, url, principal, key, body)
	return code, b, h.Get("Idempotent-Replayed")
}

func sendHeaders(t *testing.T, url, principal, key, body string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	account, credential, _ := strings.Cut(principal, " ")
	req.Header.Set("Account", account)
	req.Header.Set("Credential", credential)
	req.Header.Set(idempotency.Header, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestReplayExpiryAndFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := clock.NewManual(time.Now())
		srv, _, runs := server(t, db, c)
		const a = "acct_m1 client:c1"
		if code, body, _ := send(t, srv.URL, a, "k", "a"); code != 200 || body != `{"run":1,"key":"client:c1/k"}` {
			t.Fatalf("first: %d %s", code, body)
		}
		if code, body, replayed := send(t, srv.URL, a, "k", "a"); code != 200 || body != `{"run":1,"key":"client:c1/k"}` || replayed != "true" {
			t.Fatalf("retry: %d %s %q", code, body, replayed)
		}
		if code, _, _ := send(t, srv.URL, a, "k", "b"); code != 422 {
			t.Fatalf("other body: %d", code)
		}
		// After 24 hours a key is free again.
		c.Advance(24*time.Hour + time.Second)
		if code, body, replayed := send(t, srv.URL, a, "k", "b"); code != 200 || body != `{"run":2,"key":"client:c1/k"}` || replayed != "" {
			t.Fatalf("after retention: %d %s %q", code, body, replayed)
		}
		for _, tc := range []struct {
			why, body string
			status    int
			replayed  string
		}{
			// A failure on our side (5xx) is not recorded: the retry runs again.
			{"503", "fail", 503, ""},
			// Nor is a velocity limit's refusal (429): the request did not run, and its retry must.
			{"429", "limited", 429, ""},
			// Nor is a conflict that passes (a 409 with Retry-After, fault.Busy), such as the ledger's
			// "still being processed; retry shortly": the retry runs again, and finds the operation as
			// it stands then.
			{"a 409 with Retry-After", "busy", 409, ""},
			// A conflict that stays (a capture of a sale) is the request's answer: replayed.
			{"a 409", "conflict", 409, "true"},
		} {
			runs.Store(0)
			send(t, srv.URL, a, tc.body, tc.body)
			want := int64(2)
			if tc.replayed != "" {
				want = 1
			}
			if code, _, replayed := send(t, srv.URL, a, tc.body, tc.body); code != tc.status || replayed != tc.replayed || runs.Load() != want {
				t.Fatalf("retry after %s: %d %q, %d runs", tc.why, code, replayed, runs.Load())
			}
		}
	})
}

// Every idempotency record is scoped to the account and the credential that made it. The same
// key and body from another credential of the same account, or from the same credential acting for
// another account, runs as a request of its own; the handler sees the key qualified by the credential.
func TestRecordsArePerPrincipal(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv, _, _ := server(t, db, clock.NewManual(time.Now()))
		for i, tc := range []struct{ principal, key string }{
			{"acct_m1 key:k1", "key:k1/order-1"},
			{"acct_m1 key:k2", "key:k2/order-1"},       // another key of the account
			{"acct_m2 client:c1", "client:c1/order-1"}, // a partner's client acting for another account
			{"acct_m2 key:k1", "key:k1/order-1"},       // the same (partner's) key acting for another account
			{"acct_m1 client:c1", "client:c1/order-1"}, // a client-credentials token
		} {
			code, body, replayed := send(t, srv.URL, tc.principal, "order-1", "same body")
			if want := `{"run":` + strconv.Itoa(i+1) + `,"key":"` + tc.key + `"}`; code != 200 || body != want || replayed != "" {
				t.Errorf("%s: %d %s %q; want its own run %s", tc.principal, code, body, replayed, want)
			}
		}
	})
}

// A request without a principal (the middleware mounted before authentication) is refused rather
// than recorded in a scope that every such request would share.
func TestRequestWithoutPrincipal(t *testing.T) {
	t.Parallel()
	srv, _, runs := server(t, storetest.SQLite(t), clock.NewManual(time.Now()))
	if code, body, _ := send(t, srv.URL, "", "k", "a"); code != 500 || runs.Load() != 0 {
		t.Fatalf("%d %s, runs %d", code, body, runs.Load())
	}
}

// The records hold no secret in clear. The request is known by a keyed MAC, not a plain
// hash, and the response is sealed; a replay says that it must not be cached.
func TestRecordsHoldNoSecrets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv, _, _ := server(t, db, clock.NewManual(time.Now()))
		const body = `{"card_number":"4242424242424242","cvv2":"7391"}`
		first, _, _ := sendHeaders(t, srv.URL, "acct_m1 key:k1", "k", body)
		code, replay, h := sendHeaders(t, srv.URL, "acct_m1 key:k1", "k", body)
		if first != 200 || code != 200 || h.Get("Idempotent-Replayed") != "true" || h.Get("Cache-Control") != "no-store" ||
			!strings.Contains(replay, `"run":1`) {
			t.Fatalf("replay: %d %s %v", code, replay, h)
		}
		var mac, sealed []byte
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT request_mac, body FROM idempotency_keys`).Scan(&mac, &sealed); err != nil {
			t.Fatal(err)
		}
		for _, plain := range []string{"POST /?\n" + body, body} {
			if sum := sha256.Sum256([]byte(plain)); bytes.Equal(mac, sum[:]) {
				t.Errorf("the request's fingerprint is a plain SHA-256 of %q", plain)
			}
		}
		if bytes.Contains(sealed, []byte(`"run"`)) {
			t.Errorf("the response is stored in clear: %q", sealed)
		}
	})
}

// A request that stopped answering (its process died) holds its key until its lock runs out; then a
// retry takes over. On a single server ReleaseAll frees such keys at start-up.
func TestStuckRequestsKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := clock.NewManual(time.Now())
		srv, s, runs := server(t, db, c)
		for _, tc := range []struct {
			key   string
			unjam func()
		}{
			{"stuck-1", func() { c.Advance(time.Minute + time.Second) }},
			{"stuck-2", func() {
				if err := s.ReleaseAll(context.Background()); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			before := runs.Load()
			go func() {
				req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("hang"))
				req.Header.Set("Account", "acct_m1")
				req.Header.Set("Credential", "client:c1")
				req.Header.Set(idempotency.Header, tc.key)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			for runs.Load() == before {
				time.Sleep(time.Millisecond)
			}
			if code, _, _ := send(t, srv.URL, "acct_m1 client:c1", tc.key, "hang"); code != 409 {
				t.Fatalf("%s while the first runs: %d, want 409", tc.key, code)
			}
			tc.unjam()
			if code, _, _ := send(t, srv.URL, "acct_m1 client:c1", tc.key, "hang"); code != 200 || runs.Load() != before+2 {
				t.Fatalf("%s after the lock is gone: %d, runs %d", tc.key, code, runs.Load()-before)
			}
		}
	})
}

func TestKeyValidation(t *testing.T) {
	t.Parallel()
	c := clock.NewManual(time.Now())
	srv, _, runs := server(t, storetest.SQLite(t), c)
	for _, k := range []string{strings.Repeat("x", 256), "with space", "tab\tkey", "ünïcode"} {
		if code, body, _ := send(t, srv.URL, "acct_m client:c", k, "a"); code != 400 || !strings.Contains(body, `"field":"Idempotency-Key"`) {
			t.Errorf("key %q: %d %s", k, code, body)
		}
	}
	if runs.Load() != 0 {
		t.Fatal("an invalid key reached the handler")
	}
}

// Requests with one key sent at the same moment run once, on both backends (on PostgreSQL each reads
// no record before either writes one): through the middleware, the others answered 409 while the
// first runs or its replay after; through Once, likewise, do run once. Once replays the result
// to the same request, refuses another request under the key, and records nothing when do fails.
func TestConcurrentRequestsRunOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := clock.NewManual(time.Now())
		srv, s, runs := server(t, db, c)
		for round := range 5 {
			key := "race-" + strconv.Itoa(round)
			before := runs.Load()
			var wg sync.WaitGroup
			start := make(chan struct{})
			codes := make([]int, 8)
			for i := range codes {
				wg.Go(func() {
					<-start
					codes[i], _, _ = send(t, srv.URL, "acct_m1 client:c1", key, "once")
				})
			}
			close(start)
			wg.Wait()
			if n := runs.Load() - before; n != 1 {
				t.Fatalf("round %d: %d requests at once with one key ran %d times (%v)", round, len(codes), n, codes)
			}
			for _, code := range codes {
				if code != 200 && code != 409 {
					t.Fatalf("round %d: the answers %v", round, codes)
				}
			}
		}

		p := httpapi.Principal{Account: "acct_m1", Credential: "user:u1"}
		var done atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				out, _, err := s.Once(context.Background(), p, "form-1", []byte("request"), func() ([]byte, error) {
					done.Add(1)
					time.Sleep(50 * time.Millisecond)
					return []byte("result"), nil
				})
				var f *fault.Error
				if err != nil && !(errors.As(err, &f) && f.Code == "idempotency_key_in_use") || err == nil && string(out) != "result" {
					t.Errorf("Once at once: %q %v", out, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if done.Load() != 1 {
			t.Fatalf("Once ran do %d times for calls at once", done.Load())
		}
		out, replayed, err := s.Once(context.Background(), p, "form-1", []byte("request"), func() ([]byte, error) { return nil, errors.New("ran again") })
		if err != nil || !replayed || string(out) != "result" {
			t.Fatalf("Once after: %q %v %v", out, replayed, err)
		}
		var f *fault.Error
		if _, _, err := s.Once(context.Background(), p, "form-1", []byte("another"), nil); !errors.As(err, &f) || f.Code != "idempotency_key_reused" {
			t.Fatalf("Once with another request: %v", err)
		}
		if _, _, err := s.Once(context.Background(), p, "form-2", nil, func() ([]byte, error) { return nil, errors.New("refused") }); err == nil {
			t.Fatal("a failed do answered no error")
		}
		if out, replayed, err := s.Once(context.Background(), p, "form-2", []byte("corrected"), func() ([]byte, error) { return []byte("ok"), nil }); err != nil || replayed || string(out) != "ok" {
			t.Fatalf("the key of a failed do, used again: %q %v %v", out, replayed, err)
		}
	})
}

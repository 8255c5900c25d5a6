package idempotency_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// server answers with the body it was sent and a counter; status 503 when the body says "fail", 429
// when it says "limited".
func server(t *testing.T, db *store.DB, c *clock.Manual) (*httptest.Server, *idempotency.Store, *atomic.Int64) {
	s := idempotency.New(idempotency.Config{DB: db, Now: c.Now, Lock: time.Minute})
	var runs atomic.Int64
	unstick := make(chan struct{})
	h := s.Middleware(func(r *http.Request) string { return r.Header.Get("Merchant") },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			}
			if idempotency.Key(r.Context()) == "" {
				t.Error("the handler does not see the key")
			}
			w.Write([]byte(`{"run":` + string(rune('0'+n)) + `}`))
		}))
	srv := httptest.NewServer(httpapi.Middleware(slog.New(slog.DiscardHandler), h))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(unstick) }) // runs before srv.Close, which waits for handlers
	return srv, s, &runs
}

func send(t *testing.T, url, merchant, key, body string) (int, string, string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Merchant", merchant)
	req.Header.Set(idempotency.Header, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
}

func TestReplayExpiryAndFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := clock.NewManual(time.Now())
		srv, _, runs := server(t, db, c)
		if code, body, _ := send(t, srv.URL, "m1", "k", "a"); code != 200 || body != `{"run":1}` {
			t.Fatalf("first: %d %s", code, body)
		}
		if code, body, replayed := send(t, srv.URL, "m1", "k", "a"); code != 200 || body != `{"run":1}` || replayed != "true" {
			t.Fatalf("retry: %d %s %q", code, body, replayed)
		}
		if code, _, _ := send(t, srv.URL, "m1", "k", "b"); code != 422 {
			t.Fatalf("other body: %d", code)
		}
		if code, body, _ := send(t, srv.URL, "m2", "k", "b"); code != 200 || body != `{"run":2}` {
			t.Fatalf("another merchant's key: %d %s", code, body)
		}
		// After 24 hours a key is free again.
		c.Advance(24*time.Hour + time.Second)
		if code, body, replayed := send(t, srv.URL, "m1", "k", "b"); code != 200 || body != `{"run":3}` || replayed != "" {
			t.Fatalf("after retention: %d %s %q", code, body, replayed)
		}
		// A failure on our side (5xx) is not recorded: the retry runs again.
		send(t, srv.URL, "m1", "f", "fail")
		if code, _, replayed := send(t, srv.URL, "m1", "f", "fail"); code != 503 || replayed != "" || runs.Load() != 5 {
			t.Fatalf("retry after 503: %d %q runs %d", code, replayed, runs.Load())
		}
		// Nor is a velocity limit's refusal (429): the request did not run, and its retry must.
		send(t, srv.URL, "m1", "l", "limited")
		if code, _, replayed := send(t, srv.URL, "m1", "l", "limited"); code != 429 || replayed != "" || runs.Load() != 7 {
			t.Fatalf("retry after 429: %d %q runs %d", code, replayed, runs.Load())
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
				req.Header.Set("Merchant", "m1")
				req.Header.Set(idempotency.Header, tc.key)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			for runs.Load() == before {
				time.Sleep(time.Millisecond)
			}
			if code, _, _ := send(t, srv.URL, "m1", tc.key, "hang"); code != 409 {
				t.Fatalf("%s while the first runs: %d, want 409", tc.key, code)
			}
			tc.unjam()
			if code, _, _ := send(t, srv.URL, "m1", tc.key, "hang"); code != 200 || runs.Load() != before+2 {
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
		if code, body, _ := send(t, srv.URL, "m", k, "a"); code != 400 || !strings.Contains(body, `"field":"Idempotency-Key"`) {
			t.Errorf("key %q: %d %s", k, code, body)
		}
	}
	if runs.Load() != 0 {
		t.Fatal("an invalid key reached the handler")
	}
}

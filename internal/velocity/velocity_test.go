package velocity_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// newLimiter returns a limiter over db on clk, with the key-encryption key kek (nil: a fresh one).
func newLimiter(t testing.TB, db *store.DB, clk *clock.Manual, kek *envelope.KEK) *velocity.Limiter {
	t.Helper()
	ctx := context.Background()
	if kek == nil {
		var err error
		if kek, err = envelope.ParseKEK(envelope.NewKEKText()); err != nil {
			t.Fatal(err)
		}
	}
	ring, err := envelope.NewKeyring(ctx, db, kek, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	l, err := velocity.New(ctx, velocity.Config{DB: db, Keyring: ring, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func pan(t testing.TB, s string) card.Number {
	t.Helper()
	n, err := card.ParseNumber(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantLimit fails t unless rl reports a used-up quota of policy, with reset seconds left.
func wantLimit(t *testing.T, rl *fault.RateLimit, policy string, quota int, window, reset time.Duration) {
	t.Helper()
	if rl == nil || rl.Policy != policy || rl.Quota != quota || rl.Window != window || rl.Remaining != 0 || rl.Reset != reset {
		t.Fatalf("limit %+v; want %s used up (quota %d per %v), %v to go", rl, policy, quota, window, reset)
	}
}

// A card's declines: the quota'th decline uses the quota up until the window ends, counted from the
// first decline; a raised quota frees the card at once; the window's end starts a fresh count.
func TestDeclinesWithinAWindow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewManual(time.Now().Truncate(time.Millisecond)) // counters keep milliseconds
		l := newLimiter(t, db, clk, nil)
		lim := velocity.Limits{CardDeclines: 3}
		visa := l.CardDeclines("m1", pan(t, cardtest.Declined))
		for i := range 2 {
			if err := l.Record(ctx, lim, visa); err != nil {
				t.Fatal(err)
			}
			if rl := l.Over(visa, lim); rl != nil {
				t.Fatalf("after %d declines of 3 the card is refused: %+v", i+1, rl)
			}
			clk.Advance(10 * time.Minute)
		}
		if err := l.Record(ctx, lim, visa); err != nil {
			t.Fatal(err)
		}
		wantLimit(t, l.Over(visa, lim), "card-declines", 3, time.Hour, 40*time.Minute)
		if rl := l.Over(visa, velocity.Limits{CardDeclines: 4}); rl != nil {
			t.Fatalf("a raised quota still refuses: %+v", rl)
		}
		if rl := l.Over(l.CardDeclines("m2", pan(t, cardtest.Declined)), lim); rl != nil {
			t.Fatal("the card is refused at another merchant")
		}
		if rl := l.Over(l.CardDeclines("m1", pan(t, cardtest.InsufficientFunds)), lim); rl != nil {
			t.Fatal("another card is refused")
		}
		clk.Advance(40 * time.Minute)
		if rl := l.Over(visa, lim); rl != nil {
			t.Fatalf("the window has ended, the card is still refused: %+v", rl)
		}
		if err := l.Record(ctx, lim, visa); err != nil {
			t.Fatal(err)
		}
		if rl := l.Over(visa, lim); rl != nil {
			t.Fatal("the first decline of a new window used up the quota")
		}
		// The counters hold no card number, nor an unkeyed hash of one.
		var subject string
		if err := db.Reader().QueryRowContext(ctx, `SELECT subject FROM velocity_counters WHERE subject LIKE 'card-declines m1 %'`).
			Scan(&subject); err != nil {
			t.Fatal(err)
		}
		if cardtest.Find(subject) != "" || len(subject) != len("card-declines m1 ")+32 {
			t.Fatalf("card subject %q", subject)
		}
	})
}

// Take counts before the event: the quota'th event passes, the next is a 429 that says when the
// window ends, in its message and its limit.
func TestTakeRefusesBeyondTheQuota(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewManual(time.Now().Truncate(time.Millisecond)) // counters keep milliseconds
		l := newLimiter(t, db, clk, nil)
		lim := velocity.Limits{Sessions: 2}
		key := velocity.Sessions(httpapi.Principal{Account: "acct_m1", Credential: "key:k1"})
		for range 2 {
			if err := l.Take(ctx, key, lim); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(15 * time.Second)
		err := l.Take(ctx, key, lim)
		f, _ := err.(*fault.Error)
		if f == nil || f.Status != 429 || f.Code != "rate_limited" || f.Message != "This API key has created 2 hosted-page sessions within a minute; retry in 45 seconds." {
			t.Fatalf("third session: %v", err)
		}
		wantLimit(t, f.Limit, "sessions", 2, time.Minute, 45*time.Second)
		if err := l.Take(ctx, velocity.Sessions(httpapi.Principal{Account: "acct_m1", Credential: "key:k2"}), lim); err != nil {
			t.Fatalf("another key: %v", err)
		}
		clk.Advance(45 * time.Second)
		if err := l.Take(ctx, key, lim); err != nil {
			t.Fatalf("a new window: %v", err)
		}
	})
}

// Two nodes over one PostgreSQL database share the counts: a count taken before the event is exact
// across nodes; a count of events after the fact reaches a node at its own next counted event, so it
// lets through one event more than the quota.
func TestNodesShareCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.Postgres(t)
	clk := clock.NewManual(time.Now().Truncate(time.Millisecond)) // counters keep milliseconds
	kek, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		t.Fatal(err)
	}
	one, two := newLimiter(t, db, clk, kek), newLimiter(t, db, clk, kek)

	lim := velocity.Limits{Sessions: 3}
	key := velocity.Sessions(httpapi.Principal{Account: "acct_m1", Credential: "key:k1"})
	for _, node := range []*velocity.Limiter{one, two, one} {
		if err := node.Take(ctx, key, lim); err != nil {
			t.Fatal(err)
		}
	}
	if err := two.Take(ctx, key, lim); err == nil {
		t.Fatal("the other node let a fourth session through")
	}

	// Declines are counted after the fact (the processor has answered).
	lim = velocity.Limits{CardDeclines: 2}
	for range 2 {
		if err := one.Record(ctx, lim, one.CardDeclines("m1", pan(t, cardtest.Declined))); err != nil {
			t.Fatal(err)
		}
	}
	visa := two.CardDeclines("m1", pan(t, cardtest.Declined))
	if one.Over(one.CardDeclines("m1", pan(t, cardtest.Declined)), lim) == nil {
		t.Fatal("the node that counted does not refuse the card")
	}
	if two.Over(visa, lim) != nil {
		t.Fatal("the other node knew before its own count") // nothing was read: the hot path reads no database
	}
	if err := two.Record(ctx, lim, visa); err != nil { // the one decline more than the quota
		t.Fatal(err)
	}
	wantLimit(t, two.Over(visa, lim), "card-declines", 2, time.Hour, time.Hour)
}

// The request rate is a token bucket per principal: as many requests at once as the rate, then the
// rate; beyond it a 429 with the rate-limit headers, before the handler runs.
func TestRequestRate(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Now().Truncate(time.Millisecond)) // counters keep milliseconds
	l := newLimiter(t, storetest.SQLite(t), clk, nil)
	ran := 0
	h := l.Requests(func(*http.Request) velocity.Limits { return velocity.Limits{RequestRate: 4} },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++ }))
	send := func(p httpapi.Principal) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil).WithContext(httpapi.WithPrincipal(context.Background(), p)))
		return w
	}
	shop := httpapi.Principal{Account: "acct_m1", Credential: "client:c1"}
	for range 4 {
		if w := send(shop); w.Code != 200 {
			t.Fatalf("within the rate: %d %s", w.Code, w.Body)
		}
	}
	w := send(shop)
	if w.Code != 429 || ran != 4 || w.Header().Get("Retry-After") != "1" ||
		w.Header().Get("RateLimit-Policy") != `"requests";q=4;w=1` || w.Header().Get("RateLimit") != `"requests";r=0;t=1` {
		t.Fatalf("beyond the rate: %d %v %s (handler ran %d times)", w.Code, w.Header(), w.Body, ran)
	}
	if w := send(httpapi.Principal{Account: "acct_m1", Credential: "client:c2"}); w.Code != 200 {
		t.Fatal("another credential shares the bucket")
	}
	clk.Advance(250 * time.Millisecond) // one token back
	if send(shop).Code != 200 || send(shop).Code != 429 {
		t.Fatal("the bucket does not refill at the rate")
	}
}

// BenchmarkCheckBeforeCharge is what every sale pays for the limits: the request-rate bucket of its
// credential, and the credential's and the card's checks — all in memory. While nothing is over its
// quota on the node (the common case) the card is not even hashed; once some card is, every payment's
// card is fingerprinted to be looked up.
func BenchmarkCheckBeforeCharge(b *testing.B) {
	for _, tc := range []struct {
		name      string
		cardsOver int
	}{{"nothing over", 0}, {"a card over", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			clk := clock.NewManual(time.Now().Truncate(time.Millisecond)) // counters keep milliseconds
			l := newLimiter(b, storetest.SQLite(b), clk, nil)
			p := httpapi.Principal{Account: "acct_0a1b2c3d4e", Credential: "client:00112233445566778899aabbccddeeff"}
			lim := velocity.Limits{RequestRate: velocity.MaxLimit, CardDeclines: 1}
			for range tc.cardsOver {
				if err := l.Record(context.Background(), lim, l.CardDeclines("0a1b2c3d4e", pan(b, cardtest.Mastercard))); err != nil {
					b.Fatal(err)
				}
			}
			h := l.Requests(func(*http.Request) velocity.Limits { return lim }, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := httptest.NewRequest("POST", "/transaction-service/sale", nil).WithContext(httpapi.WithPrincipal(context.Background(), p))
			w := httptest.NewRecorder()
			visa := pan(b, cardtest.Visa)
			b.ReportAllocs()
			for b.Loop() {
				clk.Advance(time.Millisecond)
				h.ServeHTTP(w, r)
				if err := l.Check(lim, velocity.CredentialDeclines(p)); err != nil {
					b.Fatal(err)
				}
				if l.Over(l.CardDeclines("0a1b2c3d4e", visa), lim) != nil {
					b.Fatal("refused")
				}
			}
		})
	}
}

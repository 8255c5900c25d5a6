package signin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

const partnerCallback = "https://partner.example/callback"

// behindProxy is a server behind a reverse proxy on the loopback network, where every test request
// comes from: X-Forwarded-For names the client, so that tests can speak from many addresses.
var behindProxy = server.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// attempt is the answer to one sign-in form.
type attempt struct {
	status     int
	retryAfter string
}

// post submits the sign-in form to the Kassa at base with c's cookies, from the client address from
// (as X-Forwarded-For; "" sends none). It is safe to call from any goroutine.
func post(c *http.Client, base, request, from, email, pw string) (attempt, error) {
	form := url.Values{"request": {request}, "email": {email}, "password": {pw}}
	req, _ := http.NewRequest("POST", base+"/oauth/authorize/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if from != "" {
		req.Header.Set("X-Forwarded-For", from)
	}
	return send(c, req)
}

// send sends req with c and reads the answer.
func send(c *http.Client, req *http.Request) (attempt, error) {
	resp, err := c.Do(req)
	if err != nil {
		return attempt{}, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return attempt{resp.StatusCode, resp.Header.Get("Retry-After")}, nil
}

// signIn is post for the test's goroutine.
func (f *fixture) signIn(t *testing.T, c *http.Client, from, email, pw string) attempt {
	t.Helper()
	a, err := post(c, f.srv.URL, f.request(t), from, email, pw)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// request is the authorization request the sign-in form carries.
func (f *fixture) request(t *testing.T) string {
	t.Helper()
	return signintest.Field(t, signintest.Get(t, signintest.Client(), f.authorizeURL()), "request")
}

// race submits n sign-ins at once, each from a fresh browser, and counts the answers by status.
func race(t *testing.T, n int, submit func(i int) (attempt, error)) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	servertest.Parallel(n, func(i int) {
		a, err := submit(i)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Error(err)
			return
		}
		statuses[a.status]++
	})
	return statuses
}

// checkRace fails unless at most limit of the racing guesses were checked (401) and the others
// refused unchecked (429).
func checkRace(t *testing.T, statuses map[int]int, n, limit int) {
	t.Helper()
	if statuses[401] < 1 || statuses[401] > limit || statuses[401]+statuses[429] != n {
		t.Fatalf("%d racing guesses: %v; want at most %d checked (401), the rest 429", n, statuses, limit)
	}
}

// Thirty guesses racing at one account get at most the account's limit of
// password checks; the rest are refused without one.
func TestSignInCountsBeforeChecking(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, partnerCallback)
		request := f.request(t)
		statuses := race(t, 30, func(i int) (attempt, error) {
			return post(signintest.Client(), f.srv.URL, request, "", "owner@example.com", "guess "+strconv.Itoa(i))
		})
		checkRace(t, statuses, 30, auth.AccountAttemptLimit)
	})
}

// The same across two nodes of one PostgreSQL database, half of the guesses to each: the count is
// in the database, and each reservation is one conditional upsert under the row's lock.
func TestSignInCountsBeforeCheckingAcrossNodes(t *testing.T) {
	t.Parallel()
	dbURL := storetest.PostgresURL(t)
	kek := servertest.NewKEK(t)
	var nodes [2]*fixture
	for i := range nodes {
		db, err := store.Open(context.Background(), store.Config{DatabaseURL: dbURL})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		nodes[i] = &fixture{srv: servertest.Start(t, db, server.Config{KEK: kek}), callback: partnerCallback}
	}
	f := nodes[0]
	f.partner = f.newPartner(t, partnerCallback)
	f.merchant = f.newMerchant(t, "owner@example.com")
	request := f.request(t)
	statuses := race(t, 30, func(i int) (attempt, error) {
		return post(signintest.Client(), nodes[i%2].srv.URL, request, "", "owner@example.com", "guess "+strconv.Itoa(i))
	})
	checkRace(t, statuses, 30, auth.AccountAttemptLimit)
}

// An attacker who does not know the password, guessing from many addresses,
// exhausts only what untrusted clients may try. The merchant still signs in with its browser's
// device cookie from anywhere, from its usual address without the cookie, and with its
// integration's password grant.
func TestGuessesCannotLockTheMerchantOut(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixtureWith(t, db, partnerCallback, behindProxy)
		const owner, office = "owner@example.com", "203.0.113.7"
		browser := signintest.Client()
		if a := f.signIn(t, browser, office, owner, password); a.status != 303 {
			t.Fatalf("the merchant's first sign-in: %d", a.status)
		}
		creds := f.srv.NewClient(t, f.merchant.ID)

		checked := 0
		for i := range 30 {
			a := f.signIn(t, signintest.Client(), "198.51.100."+strconv.Itoa(i+1), owner, "guess "+strconv.Itoa(i))
			switch a.status {
			case 401:
				checked++
			case 429:
				if wait, _ := strconv.Atoi(a.retryAfter); wait < 1 || wait > 900 {
					t.Fatalf("Retry-After %q", a.retryAfter)
				}
			default:
				t.Fatalf("guess %d: %d", i, a.status)
			}
		}
		if checked != auth.AccountAttemptLimit {
			t.Fatalf("%d guesses from 30 addresses were checked, want %d", checked, auth.AccountAttemptLimit)
		}
		// Untrusted, even the right password waits for the window's end: guessing is bounded.
		if a := f.signIn(t, signintest.Client(), "192.0.2.50", owner, password); a.status != 429 {
			t.Fatalf("the right password from a stranger's browser at a new address: %d, want 429", a.status)
		}
		if a := f.signIn(t, browser, "192.0.2.99", owner, password); a.status != 303 {
			t.Fatalf("the merchant's own browser (device cookie) from a new address: %d, want 303", a.status)
		}
		if a := f.signIn(t, signintest.Client(), office, owner, password); a.status != 303 {
			t.Fatalf("the merchant from its usual address, without the cookie: %d, want 303", a.status)
		}
		if status := f.passwordGrant(t, creds, owner, password); status != 200 {
			t.Fatalf("the merchant's password grant with its client credentials: %d, want 200", status)
		}
		// A device cookie vouches only for the account it names: another merchant's browser is a
		// stranger to this account.
		second := f.newMerchant(t, "second@example.com")
		elsewhere := signintest.Client()
		if a := f.signIn(t, elsewhere, "192.0.2.77", second.Email, password); a.status != 303 {
			t.Fatalf("another merchant's sign-in: %d", a.status)
		}
		if a := f.signIn(t, elsewhere, "192.0.2.77", owner, password); a.status != 429 {
			t.Fatalf("the account with another merchant's device cookie: %d, want 429", a.status)
		}
	})
}

// Guesses from one address are bounded whichever accounts they name; the merchants who signed in
// from that address lately are not locked out by them, a merchant new to it is. An IPv6 client holds
// a whole /64, so the addresses of one /64 count as one.
func TestGuessesFromOneAddress(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixtureWith(t, db, partnerCallback, behindProxy)
		const owner, office = "owner@example.com", "2001:db8:1:2::1"
		if a := f.signIn(t, signintest.Client(), office, owner, password); a.status != 303 {
			t.Fatalf("the merchant's first sign-in: %d", a.status)
		}
		second := f.newMerchant(t, "second@example.com")
		for i := range auth.AddressAttemptLimit + 3 {
			want := 401
			if i >= auth.AddressAttemptLimit {
				want = 429
			}
			from := fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+2) // each guess from another address of the office's /64
			if a := f.signIn(t, signintest.Client(), from, "user"+strconv.Itoa(i)+"@example.com", "guess"); a.status != want {
				t.Fatalf("guess %d from %s: %d, want %d", i+1, from, a.status, want)
			}
		}
		if a := f.signIn(t, signintest.Client(), office, second.Email, password); a.status != 429 {
			t.Fatalf("a merchant new to the address: %d, want 429", a.status)
		}
		if a := f.signIn(t, signintest.Client(), "2001:db8:1:2::99", owner, password); a.status != 303 {
			t.Fatalf("the merchant who signs in from that /64: %d, want 303", a.status)
		}
		if a := f.signIn(t, signintest.Client(), "2001:db8:1:3::1", second.Email, password); a.status != 303 {
			t.Fatalf("the next /64: %d, want 303", a.status)
		}
	})
}

// Without trusted proxies X-Forwarded-For is never read: changing it does not change the address.
func TestForwardedForFromAnUntrustedPeerIsIgnored(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), partnerCallback)
	for i := range auth.AddressAttemptLimit + 1 {
		want := 401
		if i == auth.AddressAttemptLimit {
			want = 429
		}
		if a := f.signIn(t, signintest.Client(), "198.51.100."+strconv.Itoa(i+1), "user"+strconv.Itoa(i)+"@example.com", "guess"); a.status != want {
			t.Fatalf("guess %d with a forged X-Forwarded-For: %d, want %d", i+1, a.status, want)
		}
	}
}

// 200 wrong passwords at once, half on the sign-in page and half through the
// password grant, hash within one bound: the heap grows by less than 300 MiB (each argon2id check
// holds 64 MiB), and the attempts beyond the bound's queue are answered 429 with Retry-After,
// unchecked. Not parallel, so that no other test's allocations count.
func TestPasswordHashingMemoryIsBounded(t *testing.T) {
	f := newFixtureWith(t, storetest.SQLite(t), partnerCallback, behindProxy)
	request := f.request(t)
	clients := make([]auth.Credentials, 100)
	for i := range clients {
		clients[i] = f.srv.NewClient(t, f.merchant.ID) // one attempt each: no client's count refuses
	}
	transport := &http.Transport{MaxIdleConnsPerHost: 200}
	t.Cleanup(transport.CloseIdleConnections)
	hc := &http.Client{Transport: transport}

	var mu sync.Mutex
	answers := map[string]int{}
	growth := servertest.HeapGrowth(func() {
		servertest.Parallel(200, func(i int) {
			var a attempt
			var err error
			kind := "page"
			if i%2 == 0 {
				// Each guess from its own address and for its own e-mail, so that no count refuses it.
				a, err = post(hc, f.srv.URL, request, fmt.Sprintf("198.51.%d.%d", i/256, i%256), fmt.Sprintf("nobody%d@example.com", i), "wrong")
			} else {
				kind = "grant"
				a, err = grant(hc, f.srv.URL, clients[i/2], "owner@example.com", "wrong wrong wrong")
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			if a.status == 429 {
				if wait, _ := strconv.Atoi(a.retryAfter); wait < 1 {
					t.Errorf("%s answered 429 with Retry-After %q", kind, a.retryAfter)
				}
			}
			answers[kind+" "+strconv.Itoa(a.status)]++
		})
	})
	t.Logf("answers %v; heap grew by %d MiB at its peak", answers, growth)
	if growth >= 300 {
		t.Errorf("the heap grew by %d MiB, want less than 300", growth)
	}
	checked := answers["page 401"] + answers["grant 400"]
	if checked < 1 || answers["page 429"] == 0 || answers["grant 429"] == 0 || checked+answers["page 429"]+answers["grant 429"] != 200 {
		t.Errorf("answers %v: want some checked (401, 400), the rest 429", answers)
	}
}

// grant asks the Kassa at base for a token with the password grant, in the body. It is safe to call
// from any goroutine.
func grant(c *http.Client, base string, creds auth.Credentials, user, pw string) (attempt, error) {
	req, _ := http.NewRequest("POST", base+"/oauth/token",
		strings.NewReader(url.Values{"grant_type": {"password"}, "username": {user}, "password": {pw}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(creds.ClientID, creds.ClientSecret)
	return send(c, req)
}

// passwordGrant is grant for the test's goroutine, and returns the status.
func (f *fixture) passwordGrant(t *testing.T, creds auth.Credentials, user, pw string) int {
	t.Helper()
	a, err := grant(http.DefaultClient, f.srv.URL, creds, user, pw)
	if err != nil {
		t.Fatal(err)
	}
	return a.status
}

package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }

// pw is every test user's password.
const pw = "correct horse battery"

// shop is a merchant with a user of each role, all with the password pw.
type shop struct {
	srv        *servertest.Server
	merchantID string
	users      map[user.Role]user.User
}

// clock is a settable time for the server.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func (c *clock) Set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// pwHash is pw's argon2id hash, computed once for the test binary: every test user has it (a new hash
// takes a fifth of a second of both cores, more under the race detector), and each sign-in still
// verifies it in full.
var pwHash = sync.OnceValues(func() (string, error) {
	return user.HashPassword(context.Background(), password.NewGate(password.GateConfig{}), pw)
})

func newShop(t testing.TB, db *store.DB, cfg server.Config) *shop {
	t.Helper()
	s := &shop{srv: servertest.Start(t, db, cfg), users: map[user.Role]user.User{}}
	hash, err := pwHash()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := db.Write(ctx, func(tx *store.Tx) error {
		m, owner, err := user.CreateMerchant(ctx, tx, merchant.New{Name: "Maple & Birch Goods", Email: "owner@maple.example"}, hash, time.Now())
		if err != nil {
			return err
		}
		s.merchantID, s.users[user.Owner] = m.ID, owner
		for _, r := range []user.Role{user.Admin, user.Reporting, user.Sales} {
			if s.users[r], err = user.Create(ctx, tx, user.New{MerchantID: m.ID, Email: string(r) + "@maple.example", Role: r, Hash: hash}, time.Now()); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// browser is a client with cookies that does not follow redirects, as a browser without script.
type browser struct {
	t    testing.TB
	c    *http.Client
	base string
}

func (s *shop) browser(t testing.TB) *browser {
	return &browser{t: t, c: signintest.Client(), base: s.srv.URL}
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.base+path, nil)
	return b.do(req)
}

// post sends a form, as a page of Kassa's own origin would.
func (b *browser) post(path string, form url.Values, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return b.do(req)
}

// signIn signs in as email and returns the session's CSRF token, read from the home page.
func (b *browser) signIn(email string) string {
	b.t.Helper()
	resp, body := b.post("/dashboard/sign-in", url.Values{"email": {email}, "password": {pw}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		b.t.Fatalf("sign in as %s: %d %s", email, resp.StatusCode, body)
	}
	resp, body = b.get("/dashboard")
	if resp.StatusCode != 200 {
		b.t.Fatalf("home page: %d", resp.StatusCode)
	}
	return signintest.Field(b.t, body, "csrf_token")
}

func wantStatus(t testing.TB, what string, resp *http.Response, body string, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s: %d, want %d\n%s", what, resp.StatusCode, status, body)
	}
}

// Sign in wrong then right, see the home page, sign out; the session's cookie is HttpOnly, SameSite=Lax
// and kept to /dashboard, and every page has a strict CSP.
func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		b := s.browser(t)
		resp, body := b.get("/dashboard")
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in" {
			t.Fatalf("signed out, /dashboard: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		resp, body = b.post("/dashboard/sign-in", url.Values{"email": {"owner@maple.example"}, "password": {"not the password"}})
		wantStatus(t, "wrong password", resp, body, http.StatusUnauthorized)
		if !strings.Contains(body, "The e-mail or password is wrong.") || !strings.Contains(body, `value="owner@maple.example"`) {
			t.Fatalf("wrong password page: %s", body)
		}
		resp, _ = b.post("/dashboard/sign-in", url.Values{"email": {"Owner@Maple.example"}, "password": {pw}})
		wantStatus(t, "right password", resp, "", http.StatusSeeOther)
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "kassa_dashboard" {
				cookie = c
			}
		}
		if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/dashboard" || cookie.Secure {
			t.Fatalf("session cookie %+v", cookie)
		}
		resp, body = b.get("/dashboard")
		wantStatus(t, "home", resp, body, http.StatusOK)
		for _, want := range []string{"Maple &amp; Birch Goods", "owner@maple.example", "Owner", `href="/dashboard/staff"`, "Sign out"} {
			if !strings.Contains(body, want) {
				t.Errorf("the home page lacks %q", want)
			}
		}
		csp := resp.Header.Get("Content-Security-Policy")
		nonce := regexp.MustCompile(`'nonce-([^']+)'`).FindStringSubmatch(csp)
		if nonce == nil || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") ||
			strings.Contains(csp, "script-src") || !strings.Contains(body, `<style nonce="`+nonce[1]+`">`) || regexp.MustCompile(`\son[a-z]+=`).MatchString(body) {
			t.Fatalf("CSP %q", csp)
		}
		resp, _ = b.get("/dashboard/sign-in")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the sign-in page, signed in: %d", resp.StatusCode)
		}
		resp, body = b.post("/dashboard/sign-out", url.Values{"csrf_token": {signintest.Field(t, body, "csrf_token")}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in" {
			t.Fatalf("sign out: %d %s", resp.StatusCode, body)
		}
		// The old cookie, replayed, opens nothing.
		req, _ := http.NewRequest("GET", s.srv.URL+"/dashboard", nil)
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
		if resp, _ := b.do(req); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the signed-out cookie: %d", resp.StatusCode)
		}
	})
}

// Over https the session cookie is Secure.
func TestSecureCookieOverHTTPS(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{PublicURL: "https://pay.maple.example"})
	resp, _ := s.browser(t).post("/dashboard/sign-in", url.Values{"email": {"owner@maple.example"}, "password": {pw}})
	for _, c := range resp.Cookies() {
		if !c.Secure {
			t.Errorf("cookie %s is not Secure over https", c.Name)
		}
	}
	if len(resp.Cookies()) != 2 {
		t.Fatalf("cookies %v", resp.Cookies())
	}
}

// A session ends after 30 minutes without a request (the server's clock is the test's).
func TestIdleSessionEnds(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	s := newShop(t, storetest.SQLite(t), server.Config{Now: clk.Now})
	b := s.browser(t)
	b.signIn("sales@maple.example")
	clk.Add(29 * time.Minute)
	if resp, _ := b.get("/dashboard"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after 29 minutes: %d", resp.StatusCode)
	}
	clk.Add(30 * time.Minute)
	if resp, _ := b.get("/dashboard"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in" {
		t.Fatalf("after 30 idle minutes: %d", resp.StatusCode)
	}
}

// Every state-changing route, POSTed as each role: 403 where the role may not, and never 403 where
// it may. The Staff page itself is the managers'.
func TestRoleChecks(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		var target string
		if err := db.Write(context.Background(), func(tx *store.Tx) error {
			u, err := user.Create(context.Background(), tx, user.New{MerchantID: s.merchantID, Email: "target@maple.example", Role: user.Sales}, time.Now())
			target = u.ID
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, role := range user.Roles {
			t.Run(string(role), func(t *testing.T) {
				b := s.browser(t)
				csrf := b.signIn(string(role) + "@maple.example")
				allowed := role == user.Owner || role == user.Admin
				resp, body := b.get("/dashboard")
				if strings.Contains(body, `href="/dashboard/staff"`) != allowed {
					t.Errorf("the Staff link shows: %v", !allowed)
				}
				resp, body = b.get("/dashboard/staff")
				if (resp.StatusCode == http.StatusForbidden) == allowed {
					t.Errorf("GET /dashboard/staff: %d", resp.StatusCode)
				}
				for _, tc := range []struct {
					path string
					form url.Values
				}{
					{"/dashboard/staff/invite", url.Values{"email": {"new-" + string(role) + "@maple.example"}, "role": {"sales"}}},
					{"/dashboard/staff/" + target + "/role", url.Values{"role": {"sales"}}},
					{"/dashboard/staff/" + target + "/remove", url.Values{}},
					{"/dashboard/staff/two-factor", url.Values{}},
					{"/dashboard/settings/ecommerce/clients", url.Values{"validity": {"12h0m0s"}}},
					{"/dashboard/settings/ecommerce/partners/0000000000/revoke", url.Values{}},
					{"/dashboard/settings/ecommerce/card-key/rotate", url.Values{"grace": {"0s"}}},
					{"/dashboard/settings/ecommerce/api-keys", url.Values{"permission": {"api_keys:read"}}},
					{"/dashboard/settings/ecommerce/api-keys/key_none/revoke", url.Values{}},
					{"/dashboard/settings/ecommerce/origins", url.Values{"origins": {""}}},
				} {
					if tc.path == "/dashboard/staff/"+target+"/remove" && role == user.Owner {
						continue // the admin's turn removes it
					}
					tc.form.Set("csrf_token", csrf)
					resp, body := b.post(tc.path, tc.form)
					if (resp.StatusCode == http.StatusForbidden) == allowed || resp.StatusCode >= 500 {
						t.Errorf("POST %s as %s: %d %s", tc.path, role, resp.StatusCode, body)
					}
				}
				resp, body = b.post("/dashboard/sign-out", url.Values{"csrf_token": {csrf}})
				wantStatus(t, "sign out", resp, body, http.StatusSeeOther)
			})
		}
	})
}

// An admin manages everyone but owners; an owner cannot demote or remove the last owner.
func TestOwnersAreManagedByOwners(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
	owner := s.users[user.Owner].ID
	admin := s.browser(t)
	csrf := admin.signIn("admin@maple.example")
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/dashboard/staff/" + owner + "/role", url.Values{"role": {"sales"}}},
		{"/dashboard/staff/" + owner + "/remove", url.Values{}},
		{"/dashboard/staff/" + s.users[user.Sales].ID + "/role", url.Values{"role": {"owner"}}},
		{"/dashboard/staff/invite", url.Values{"email": {"boss@maple.example"}, "role": {"owner"}}},
	} {
		tc.form.Set("csrf_token", csrf)
		resp, body := admin.post(tc.path, tc.form)
		wantStatus(t, "admin: POST "+tc.path, resp, body, http.StatusForbidden)
	}
	b := s.browser(t)
	csrf = b.signIn("owner@maple.example")
	resp, body := b.post("/dashboard/staff/"+owner+"/role", url.Values{"csrf_token": {csrf}, "role": {"admin"}})
	wantStatus(t, "demote the last owner", resp, body, http.StatusConflict)
	if !strings.Contains(body, "at least one owner") {
		t.Fatalf("the refusal does not say why: %s", body)
	}
	resp, body = b.post("/dashboard/staff/"+owner+"/remove", url.Values{"csrf_token": {csrf}})
	wantStatus(t, "remove the last owner", resp, body, http.StatusConflict)
	resp, body = b.post("/dashboard/staff/ffffffffff/remove", url.Values{"csrf_token": {csrf}})
	wantStatus(t, "remove nobody", resp, body, http.StatusNotFound)
	resp, body = b.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {"not an e-mail"}, "role": {"sales"}})
	wantStatus(t, "invite a bad e-mail", resp, body, http.StatusBadRequest)
	// A removed user's session ends.
	clerk := s.browser(t)
	clerk.signIn("sales@maple.example")
	resp, body = b.post("/dashboard/staff/"+s.users[user.Sales].ID+"/remove", url.Values{"csrf_token": {csrf}})
	wantStatus(t, "remove the clerk", resp, body, http.StatusSeeOther)
	if resp, _ := clerk.get("/dashboard"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the removed clerk's session: %d", resp.StatusCode)
	}
}

// A form sent from another site is refused, before and after sign-in; a signed-in POST without the
// session's token is refused too.
func TestCrossSiteRequestsAreRefused(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
	b := s.browser(t)
	resp, body := b.post("/dashboard/sign-in", url.Values{"email": {"owner@maple.example"}, "password": {pw}},
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	wantStatus(t, "a cross-site sign-in", resp, body, http.StatusForbidden)
	csrf := b.signIn("owner@maple.example")
	invite := url.Values{"email": {"new@maple.example"}, "role": {"admin"}, "csrf_token": {csrf}}
	resp, body = b.post("/dashboard/staff/invite", invite, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	wantStatus(t, "a cross-site invitation", resp, body, http.StatusForbidden)
	invite.Set("csrf_token", "forged")
	resp, body = b.post("/dashboard/staff/invite", invite)
	wantStatus(t, "an invitation with another token", resp, body, http.StatusForbidden)
	invite.Del("csrf_token")
	resp, body = b.post("/dashboard/staff/invite", invite)
	wantStatus(t, "an invitation without a token", resp, body, http.StatusForbidden)
	if list, _ := user.List(context.Background(), s.srv.DB.Reader(), s.merchantID); len(list) != 4 {
		t.Fatalf("a refused invitation made a user: %d users", len(list))
	}
}

// outboxLink reads the password link of the last e-mail to addr in the outbox.
func outboxLink(t testing.TB, db *store.DB, addr string) string {
	t.Helper()
	var text string
	found := false
	for _, e := range billingtest.Outbox(t, db) {
		if e.To == addr {
			text, found = e.Text, true
		}
	}
	if !found {
		t.Fatalf("no e-mail to %s", addr)
	}
	m := regexp.MustCompile(`http\S+/dashboard/password\?token=\S+`).FindString(text)
	if m == "" {
		t.Fatalf("no link in %q", text)
	}
	return m
}

// An owner invites a reporting user, who sets a password through the e-mailed link (once; the page
// never shows it to the owner) and signs in; a
// reset link through the outbox sets a new password once, within 30 minutes, and ends the user's
// sessions.
func TestInvitationAndReset(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := &clock{t: time.Now()}
		s := newShop(t, db, server.Config{Now: clk.Now})
		owner := s.browser(t)
		csrf := owner.signIn("owner@maple.example")
		resp, body := owner.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {"books@maple.example"}, "role": {"reporting"}})
		wantStatus(t, "invite", resp, body, http.StatusOK)
		link := outboxLink(t, db, "books@maple.example")
		token := strings.TrimPrefix(link, s.srv.URL+"/dashboard/password?token=")
		if strings.Contains(body, token) || token == link {
			t.Fatalf("the page shows the invitation's link %s, which only the invitee may hold:\n%s", link, body)
		}
		invitee := s.browser(t)
		path := strings.TrimPrefix(link, s.srv.URL)
		resp, body = invitee.get(path)
		wantStatus(t, "open the invitation", resp, body, http.StatusOK)
		token = signintest.Field(t, body, "token")
		resp, body = invitee.post("/dashboard/password", url.Values{"token": {token}, "password": {"books and more books"}, "confirm": {"books and more book"}})
		wantStatus(t, "passwords that differ", resp, body, http.StatusBadRequest)
		resp, body = invitee.post("/dashboard/password", url.Values{"token": {token}, "password": {"short"}, "confirm": {"short"}})
		wantStatus(t, "a short password", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "at least 10 characters") {
			t.Fatalf("the short password's page: %s", body)
		}
		resp, body = invitee.post("/dashboard/password", url.Values{"token": {token}, "password": {"books and more books"}, "confirm": {"books and more books"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in?password=set" {
			t.Fatalf("accept: %d %s", resp.StatusCode, body)
		}
		resp, body = invitee.post("/dashboard/password", url.Values{"token": {token}, "password": {"books and more books"}, "confirm": {"books and more books"}})
		wantStatus(t, "the invitation used again", resp, body, http.StatusNotFound)
		resp, _ = invitee.post("/dashboard/sign-in", url.Values{"email": {"books@maple.example"}, "password": {"books and more books"}})
		wantStatus(t, "the invitee signs in", resp, "", http.StatusSeeOther)
		resp, body = invitee.get("/dashboard")
		if !strings.Contains(body, "Reporting") || strings.Contains(body, "/dashboard/staff") {
			t.Fatalf("the reporting user's home page: %s", body)
		}

		// Reset: the forgotten-password form answers alike for an unknown e-mail, and mails the link.
		anon := s.browser(t)
		_, unknown := anon.post("/dashboard/forgot", url.Values{"email": {"nobody@maple.example"}})
		resp, known := anon.post("/dashboard/forgot", url.Values{"email": {"owner@maple.example"}})
		wantStatus(t, "forgot", resp, known, http.StatusOK)
		nonce := regexp.MustCompile(`nonce="[^"]*"`)
		if nonce.ReplaceAllString(strings.ReplaceAll(unknown, "nobody", "owner"), "") != nonce.ReplaceAllString(known, "") {
			t.Fatal("the forgotten-password form tells which e-mails exist")
		}
		reset := strings.TrimPrefix(outboxLink(t, db, "owner@maple.example"), s.srv.URL)
		anon.post("/dashboard/forgot", url.Values{"email": {"owner@maple.example"}})
		if again := strings.TrimPrefix(outboxLink(t, db, "owner@maple.example"), s.srv.URL); again != reset {
			t.Fatal("a second reset link within a minute")
		}
		resp, body = anon.get(reset)
		wantStatus(t, "open the reset link", resp, body, http.StatusOK)
		clk.Add(31 * time.Minute)
		resp, body = anon.get(reset)
		wantStatus(t, "the reset link after 31 minutes", resp, body, http.StatusNotFound)
		anon.post("/dashboard/forgot", url.Values{"email": {"owner@maple.example"}})
		reset = strings.TrimPrefix(outboxLink(t, db, "owner@maple.example"), s.srv.URL)
		_, body = anon.get(reset)
		owner.signIn("owner@maple.example") // a session to be ended
		resp, body = anon.post("/dashboard/password", url.Values{"token": {signintest.Field(t, body, "token")}, "password": {"a brand new passphrase"},
			"confirm": {"a brand new passphrase"}})
		wantStatus(t, "reset", resp, body, http.StatusSeeOther)
		if resp, _ := owner.get("/dashboard"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the owner's session survived the reset: %d", resp.StatusCode)
		}
		resp, _ = anon.post("/dashboard/sign-in", url.Values{"email": {"owner@maple.example"}, "password": {pw}})
		wantStatus(t, "the old password", resp, "", http.StatusUnauthorized)
	})
}

// GET / sends a browser to the dashboard; an API client keeps the JSON 404.
func TestRootRedirectsBrowsers(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
	b := s.browser(t)
	req, _ := http.NewRequest("GET", s.srv.URL+"/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	if resp, _ := b.do(req); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		t.Fatalf("a browser at /: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ = http.NewRequest("GET", s.srv.URL+"/", nil)
	req.Header.Set("Accept", "application/json")
	resp, body := b.do(req)
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !strings.Contains(body, "no route") {
		t.Fatalf("an API client at /: %d %s", resp.StatusCode, body)
	}
}

// A signed-in page view: the session checked in memory, the merchant's name from its cache, the page's
// reads, the page rendered, over real HTTP on SQLite: the home page, and the
// settings pages, which read the most. It reports the median and 99th percentile of the views.
func BenchmarkPageView(b *testing.B) {
	for _, page := range []string{"home", "staff", "settings/ecommerce", "account"} {
		path := "/dashboard/" + page
		if page == "home" {
			path = "/dashboard"
		}
		b.Run(page, func(b *testing.B) {
			s := newShop(b, storetest.SQLite(b), server.Config{})
			br := s.browser(b)
			br.signIn("owner@maple.example")
			durations := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if resp, _ := br.get(path); resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", path, resp.StatusCode)
				}
				durations = append(durations, time.Since(start))
			}
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
		})
	}
}

package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/totp"
	"github.com/kassapay/kassa/internal/user"
)

// setUp turns two-factor authentication on from the signed-in user's account page, as the user would
// with an app: the key read from the page, the code computed from it. It returns the secret and the
// recovery codes the page showed.
func (b *browser) setUp(csrf string, now time.Time) (totp.Secret, []string) {
	b.t.Helper()
	resp, body := b.get("/dashboard/account/two-factor/setup")
	wantStatus(b.t, "the setup page", resp, body, http.StatusOK)
	return b.confirm(body, "/dashboard/account/two-factor/setup", csrf, now)
}

// confirm reads the key of an enrolment page, posts its first code to action and returns the secret
// and the recovery codes shown.
func (b *browser) confirm(page, action, csrf string, now time.Time) (totp.Secret, []string) {
	b.t.Helper()
	m := regexp.MustCompile(`id="totp-key"[^>]*>([A-Z2-7]+)<`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, "<svg") {
		b.t.Fatalf("no key or QR code on the enrolment page: %s", page)
	}
	secret, err := totp.ParseSecret(m[1])
	if err != nil {
		b.t.Fatal(err)
	}
	form := url.Values{"enrolment": {signintest.Field(b.t, page, "enrolment")}, "code": {totp.Code(secret, totp.Step(now))}}
	if csrf != "" {
		form.Set("csrf_token", csrf)
	}
	resp, body := b.post(action, form)
	wantStatus(b.t, "the first code", resp, body, http.StatusOK)
	codes := regexp.MustCompile(`<li><code>([A-Z2-7-]{19})</code></li>`).FindAllStringSubmatch(body, -1)
	if len(codes) != 10 {
		b.t.Fatalf("%d recovery codes shown: %s", len(codes), body)
	}
	var out []string
	for _, c := range codes {
		out = append(out, c[1])
	}
	return secret, out
}

// Two-factor sign-in: set up from the account page; then the password alone opens no session, a wrong
// code is refused, the right one signs in, once; a recovery code signs in once and says so.
func TestTwoFactorSignIn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := &clock{t: time.Now()}
		s := newShop(t, db, server.Config{Now: clk.Now})
		b := s.browser(t)
		csrf := b.signIn("admin@maple.example")
		secret, codes := b.setUp(csrf, clk.Now())
		_, body := b.get("/dashboard/account")
		if !strings.Contains(body, "On. 10 recovery codes left.") {
			t.Fatalf("account page after setup: %s", body)
		}
		resp, body := b.post("/dashboard/sign-out", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "sign out", resp, body, http.StatusSeeOther)

		clk.Add(totp.Period)
		resp, body = b.post("/dashboard/sign-in", url.Values{"email": {"admin@maple.example"}, "password": {pw}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in/code" {
			t.Fatalf("the password of a user with two-factor: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		for _, c := range resp.Cookies() {
			if c.Name == "kassa_dashboard" && c.Value != "" {
				t.Fatal("a session cookie before the code")
			}
		}
		if resp, _ := b.get("/dashboard"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the dashboard before the code: %d", resp.StatusCode)
		}
		resp, body = b.get("/dashboard/sign-in/code")
		wantStatus(t, "the code page", resp, body, http.StatusOK)
		if !strings.Contains(body, `autocomplete="one-time-code"`) {
			t.Errorf("the code page: %s", body)
		}
		code := totp.Code(secret, totp.Step(clk.Now()))
		wrong := code[:5] + string(rune('0'+(code[5]-'0'+5)%10))
		resp, body = b.post("/dashboard/sign-in/code", url.Values{"code": {wrong}})
		wantStatus(t, "a wrong code", resp, body, http.StatusBadRequest)
		if !strings.Contains(html.UnescapeString(body), "The code is not right") {
			t.Errorf("the wrong code's page: %s", body)
		}
		resp, body = b.post("/dashboard/sign-in/code", url.Values{"code": {code}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
			t.Fatalf("the right code: %d %s", resp.StatusCode, body)
		}
		resp, body = b.get("/dashboard")
		wantStatus(t, "home after the code", resp, body, http.StatusOK)
		csrf = signintest.Field(t, body, "csrf_token")
		b.post("/dashboard/sign-out", url.Values{"csrf_token": {csrf}})

		// The same code again is refused, even with the password right.
		b.post("/dashboard/sign-in", url.Values{"email": {"admin@maple.example"}, "password": {pw}})
		resp, body = b.post("/dashboard/sign-in/code", url.Values{"code": {code}})
		wantStatus(t, "a code used before", resp, body, http.StatusBadRequest)
		resp, _ = b.post("/dashboard/sign-in/code", url.Values{"code": {strings.ToLower(codes[0])}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/account?recovery=used" {
			t.Fatalf("a recovery code: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		_, body = b.get("/dashboard/account?recovery=used")
		if !strings.Contains(body, "recovery code, which is now used up") || !strings.Contains(body, "9 recovery codes left") {
			t.Errorf("the account page after a recovery code: %s", body)
		}

		// Without the password step, the code page sends the browser to sign in.
		other := s.browser(t)
		resp, body = other.post("/dashboard/sign-in/code", url.Values{"code": {totp.Code(secret, totp.Step(clk.Now()))}})
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Your sign-in has expired") {
			t.Fatalf("a code without the password: %d %s", resp.StatusCode, body)
		}
		// Nor after five minutes.
		other.post("/dashboard/sign-in", url.Values{"email": {"admin@maple.example"}, "password": {pw}})
		clk.Add(6 * time.Minute)
		resp, body = other.post("/dashboard/sign-in/code", url.Values{"code": {totp.Code(secret, totp.Step(clk.Now()))}})
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Your sign-in has expired") {
			t.Fatalf("a code six minutes after the password: %d %s", resp.StatusCode, body)
		}

		// New recovery codes and turning it off each take a current code.
		_, body = b.get("/dashboard/account")
		csrf = signintest.Field(t, body, "csrf_token")
		resp, body = b.post("/dashboard/account/two-factor/recovery-codes", url.Values{"csrf_token": {csrf}, "code": {wrong}})
		wantStatus(t, "new recovery codes with a wrong code", resp, body, http.StatusBadRequest)
		clk.Add(totp.Period)
		resp, body = b.post("/dashboard/account/two-factor/recovery-codes", url.Values{"csrf_token": {csrf},
			"code": {totp.Code(secret, totp.Step(clk.Now()))}})
		wantStatus(t, "new recovery codes", resp, body, http.StatusOK)
		if n := len(regexp.MustCompile(`<li><code>[A-Z2-7-]{19}</code></li>`).FindAllString(body, -1)); n != 10 || strings.Contains(body, codes[1]) {
			t.Errorf("new recovery codes: %d shown, the old ones among them: %v", n, strings.Contains(body, codes[1]))
		}
		clk.Add(totp.Period)
		resp, body = b.post("/dashboard/account/two-factor/disable", url.Values{"csrf_token": {csrf},
			"code": {totp.Code(secret, totp.Step(clk.Now()))}})
		wantStatus(t, "turn it off", resp, body, http.StatusOK)
		if !strings.Contains(body, "Two-factor authentication is off.") || !strings.Contains(body, "/dashboard/account/two-factor/setup") {
			t.Errorf("the account page after turning it off: %s", body)
		}
	})
}

// "Require 2FA for all staff": staff without a second factor are signed out and set one up at their
// next sign-in before any page opens; none can turn it off while it is required.
func TestRequireTwoFactorForAllStaff(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := &clock{t: time.Now()}
		s := newShop(t, db, server.Config{Now: clk.Now})
		owner := s.browser(t)
		ownerCSRF := owner.signIn("owner@maple.example")
		ownerSecret, _ := owner.setUp(ownerCSRF, clk.Now())
		sales := s.browser(t)
		sales.signIn("sales@maple.example")

		resp, body := owner.post("/dashboard/staff/two-factor", url.Values{"csrf_token": {ownerCSRF}, "required": {"on"}})
		wantStatus(t, "require two-factor", resp, body, http.StatusOK)
		if !strings.Contains(body, `id="require-2fa" name="required" type="checkbox" checked`) {
			t.Errorf("the Staff page after requiring: %s", body)
		}
		if resp, _ := owner.get("/dashboard"); resp.StatusCode != http.StatusOK {
			t.Fatalf("the owner, who has a second factor, was signed out: %d", resp.StatusCode)
		}
		if resp, _ := sales.get("/dashboard"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the sales user, without one, is still signed in: %d", resp.StatusCode)
		}

		resp, _ = sales.post("/dashboard/sign-in", url.Values{"email": {"sales@maple.example"}, "password": {pw}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in/enrol" {
			t.Fatalf("sign-in without a second factor where one is required: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp, _ := sales.get("/dashboard"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the dashboard before enrolling: %d", resp.StatusCode)
		}
		resp, body = sales.get("/dashboard/sign-in/enrol")
		wantStatus(t, "the enrolment page", resp, body, http.StatusOK)
		sales.confirm(body, "/dashboard/sign-in/enrol", "", clk.Now())
		resp, body = sales.get("/dashboard/account")
		wantStatus(t, "the account page after enrolling", resp, body, http.StatusOK)
		if !strings.Contains(body, "cannot be turned off") || strings.Contains(body, "/two-factor/disable") {
			t.Errorf("the account page where two-factor is required: %s", body)
		}

		clk.Add(totp.Period)
		resp, body = owner.post("/dashboard/account/two-factor/disable", url.Values{"csrf_token": {ownerCSRF},
			"code": {totp.Code(ownerSecret, totp.Step(clk.Now()))}})
		wantStatus(t, "turning it off where required", resp, body, http.StatusConflict)
		if !strings.Contains(body, "requires two-factor authentication for all staff") {
			t.Errorf("the refusal: %s", body)
		}
		_, body = owner.get("/dashboard/staff")
		if n := strings.Count(body, "<td>On</td>"); n != 2 {
			t.Errorf("the Staff page shows %d users with two-factor, want 2", n)
		}
	})
}

// keyOn reads the TOTP key an enrolment page shows.
func keyOn(t *testing.T, page string) totp.Secret {
	t.Helper()
	m := regexp.MustCompile(`id="totp-key"[^>]*>([A-Z2-7]+)<`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no key on the page: %s", page)
	}
	s, err := totp.ParseSecret(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pendingCookie is the browser's cookie of the step between password and second factor.
func (b *browser) pendingCookie() *http.Cookie {
	u, _ := url.Parse(b.base + "/dashboard/sign-in/code")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "kassa_dashboard_2fa" {
			return c
		}
	}
	return nil
}

// expired checks that a step answered "sign in again" and started no session.
func (b *browser) expired(what string, resp *http.Response, body string) {
	b.t.Helper()
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Your sign-in has expired") || strings.Contains(body, "totp-key") {
		b.t.Fatalf("%s: %d, want the sign-in page without a secret\n%s", what, resp.StatusCode, body)
	}
	if r, _ := b.get("/dashboard"); r.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("%s opened a session", what)
	}
}

// The second factor cannot be stepped around: the password of a user with a factor opens only the
// code step (the enrolment, which once showed a fresh secret and put it in place of the owner's, is
// closed to it in every order of steps); a user who must enrol cannot give a code instead; the
// enrolment's cookie does not enrol twice; and on the account page a session alone does not replace
// the factor, which takes a current code and is audited and e-mailed to the user.
func TestSecondFactorCannotBeSteppedAround(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := &clock{t: time.Now()}
		s := newShop(t, db, server.Config{Now: clk.Now})
		owner := s.browser(t)
		csrf := owner.signIn("admin@maple.example")
		secret, codes := owner.setUp(csrf, clk.Now())
		// A secret the owner is offered on the account page: the attacker's best guess at a token.
		_, page := owner.get("/dashboard/account/two-factor/setup")
		offered, offeredToken := keyOn(t, page), signintest.Field(t, page, "enrolment")
		clk.Add(totp.Period)

		attacker := s.browser(t)
		signInTo := func(email, want string) {
			t.Helper()
			resp, body := attacker.post("/dashboard/sign-in", url.Values{"email": {email}, "password": {pw}})
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
				t.Fatalf("the password of %s: %d %s, want %s\n%s", email, resp.StatusCode, resp.Header.Get("Location"), want, body)
			}
		}
		enrolWith := func(token string, s totp.Secret) (*http.Response, string) {
			return attacker.post("/dashboard/sign-in/enrol", url.Values{"enrolment": {token}, "code": {totp.Code(s, totp.Step(clk.Now()))}})
		}
		// Password, then the enrolment page instead of the code.
		signInTo("admin@maple.example", "/dashboard/sign-in/code")
		resp, body := attacker.get("/dashboard/sign-in/enrol")
		attacker.expired("the enrolment page after a password that needs a code", resp, body)
		// Password, then the enrolment's POST at once.
		signInTo("admin@maple.example", "/dashboard/sign-in/code")
		resp, body = enrolWith(offeredToken, offered)
		attacker.expired("an enrolment after a password that needs a code", resp, body)
		// Password, the code page, then the enrolment.
		signInTo("admin@maple.example", "/dashboard/sign-in/code")
		if resp, body := attacker.get("/dashboard/sign-in/code"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="code"`) {
			t.Fatalf("the code page: %d %s", resp.StatusCode, body)
		}
		resp, body = enrolWith(offeredToken, offered)
		attacker.expired("an enrolment after the code page", resp, body)
		// A wrong code, then the enrolment.
		signInTo("admin@maple.example", "/dashboard/sign-in/code")
		attacker.post("/dashboard/sign-in/code", url.Values{"code": {"000000"}})
		resp, body = enrolWith(offeredToken, offered)
		attacker.expired("an enrolment after a wrong code", resp, body)

		// The owner's factor is as it was: its codes sign in, its recovery codes are all there.
		signInTo("admin@maple.example", "/dashboard/sign-in/code")
		clk.Add(totp.Period)
		resp, _ = attacker.post("/dashboard/sign-in/code", url.Values{"code": {totp.Code(secret, totp.Step(clk.Now()))}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
			t.Fatalf("the owner's own code after the attempts: %d", resp.StatusCode)
		}
		if st := factorOf(t, db, s.users[user.Admin].ID); !st.Enabled || st.RecoveryCodes != len(codes) {
			t.Fatalf("the owner's factor after the attempts: %+v", st)
		}

		// A user who must enrol cannot give a code instead, and its enrolment cookie enrols once.
		_, body = owner.get("/dashboard/staff")
		resp, body = owner.post("/dashboard/staff/two-factor", url.Values{"csrf_token": {csrf}, "required": {"on"}})
		wantStatus(t, "require two-factor", resp, body, http.StatusOK)
		clerk := s.browser(t)
		resp, _ = clerk.post("/dashboard/sign-in", url.Values{"email": {"sales@maple.example"}, "password": {pw}})
		if resp.Header.Get("Location") != "/dashboard/sign-in/enrol" {
			t.Fatalf("a user who must enrol was sent to %s", resp.Header.Get("Location"))
		}
		enrolCookie := clerk.pendingCookie()
		resp, body = clerk.post("/dashboard/sign-in/code", url.Values{"code": {codes[0]}})
		clerk.expired("a code where an enrolment is due", resp, body)
		resp, _ = clerk.post("/dashboard/sign-in", url.Values{"email": {"sales@maple.example"}, "password": {pw}})
		enrolCookie = clerk.pendingCookie()
		_, page = clerk.get("/dashboard/sign-in/enrol")
		clerk.confirm(page, "/dashboard/sign-in/enrol", "", clk.Now())
		replay := s.browser(t)
		u, _ := url.Parse(s.srv.URL + "/dashboard/sign-in/enrol")
		replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: enrolCookie.Name, Value: enrolCookie.Value, Path: "/dashboard/sign-in"}})
		_, page = replay.get("/dashboard/sign-in/enrol")
		if strings.Contains(page, "totp-key") {
			resp, body = replay.post("/dashboard/sign-in/enrol", url.Values{"enrolment": {signintest.Field(t, page, "enrolment")},
				"code": {totp.Code(keyOn(t, page), totp.Step(clk.Now()))}})
			if resp.StatusCode != http.StatusConflict {
				t.Fatalf("the enrolment cookie replayed after enrolling: %d\n%s", resp.StatusCode, body)
			}
		}
		if r, _ := replay.get("/dashboard"); r.StatusCode != http.StatusSeeOther {
			t.Fatal("the replayed enrolment cookie opened a session")
		}

		// On the account page a session alone does not replace the factor.
		clk.Add(totp.Period)
		_, page = owner.get("/dashboard/account/two-factor/setup")
		if !strings.Contains(page, `name="current_code"`) {
			t.Fatalf("replacing a factor does not ask for the current one: %s", page)
		}
		fresh, token := keyOn(t, page), signintest.Field(t, page, "enrolment")
		resp, body = owner.post("/dashboard/account/two-factor/setup", url.Values{"csrf_token": {csrf}, "enrolment": {token},
			"code": {totp.Code(fresh, totp.Step(clk.Now()))}})
		wantStatus(t, "a replacement without the current code", resp, body, http.StatusBadRequest)
		if shown := keyOn(t, body); shown.String() != fresh.String() || signintest.Field(t, body, "enrolment") != token {
			t.Errorf("the refused replacement showed the key %s, not the one scanned, %s", shown, fresh)
		}
		resp, body = owner.post("/dashboard/account/two-factor/setup", url.Values{"csrf_token": {csrf}, "enrolment": {token},
			"code": {totp.Code(fresh, totp.Step(clk.Now()))}, "current_code": {codes[0]}})
		wantStatus(t, "a replacement with a recovery code of the current factor", resp, body, http.StatusOK)
		var mail *billing.Entry
		for _, e := range billingtest.Outbox(t, db) {
			if e.To == "admin@maple.example" {
				mail = &e
			}
		}
		if mail == nil || mail.Subject != "Your two-factor method changed" || !strings.Contains(mail.Text, "new authenticator") {
			t.Errorf("the e-mail about the replacement: %+v", mail)
		}
		_, body = owner.get("/dashboard/activity?action=two_factor.replace")
		if !strings.Contains(body, "two_factor.replace") {
			t.Errorf("the replacement is not in the activity: %s", body)
		}
	})
}

// factorOf reads a user's second factor.
func factorOf(t *testing.T, db *store.DB, id string) user.Status {
	t.Helper()
	st, err := user.StatusOf(context.Background(), db.Reader(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

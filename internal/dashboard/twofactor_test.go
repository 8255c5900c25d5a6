package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/totp"
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

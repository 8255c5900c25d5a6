package signin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/totp"
	"github.com/kassapay/kassa/internal/user"
)

// withFactor is a fixture whose merchant's owner has two-factor authentication on: its secret and
// recovery codes, and the two-factor store of the server's keyring.
type withFactor struct {
	*fixture
	secret  totp.Secret
	codes   []string
	factors *user.TwoFactor
	clk     *clock.Manual // the server's: it reads it from goroutines of its own
}

func newWithFactor(t *testing.T, db *store.DB) *withFactor {
	t.Helper()
	kek := servertest.NewKEK(t)
	clk := clock.NewManual(time.Now())
	f := newFixtureWith(t, db, partnerCallback, server.Config{KEK: kek, Now: clk.Now})
	ring, err := envelope.NewKeyring(context.Background(), db, kek, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &withFactor{fixture: f, factors: user.NewTwoFactor(db, ring), clk: clk}
	owner := f.owner(t)
	e, err := w.factors.Begin(owner.Person, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if w.secret, err = totp.ParseSecret(e.Key); err != nil {
		t.Fatal(err)
	}
	if w.codes, err = w.factors.Confirm(context.Background(), owner.Person, e.Token, totp.Code(w.secret, totp.Step(clk.Now())), clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(totp.Period)
	return w
}

// owner reads the merchant's first owner.
func (f *fixture) owner(t *testing.T) user.User {
	t.Helper()
	u, err := user.Get(context.Background(), f.srv.DB.Reader(), f.merchant.ID, f.merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// code is the owner's current TOTP code.
func (w *withFactor) code() string { return totp.Code(w.secret, totp.Step(w.clk.Now())) }

// sendCode posts the consent flow's second-factor form.
func (w *withFactor) sendCode(t *testing.T, c *http.Client, request, code string) page {
	t.Helper()
	return do(t, c, "POST", w.srv.URL+"/oauth/authorize/code", url.Values{"request": {request}, "code": {code}})
}

// signedIn reports whether c holds a session of the authorization pages: the consent page opens.
func (w *withFactor) signedIn(t *testing.T, c *http.Client) bool {
	t.Helper()
	p := do(t, c, "GET", w.authorizeURL(), nil)
	return strings.Contains(p.body, `value="approve"`)
}

// The consent sign-in asks a user with a second factor for its code before "Allow access": the
// password alone opens neither the consent page nor a decision; a wrong code is refused, the right one
// opens the consent, once; a recovery code works once; the code step without the password is nothing;
// and wrong codes here count towards the same lockout as the dashboard's. A user whose merchant
// requires a second factor and who has none is sent to set it up in the dashboard.
func TestConsentAsksForTheSecondFactor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWithFactor(t, db)
		request := w.request(t)
		c := signintest.Client()
		p := do(t, c, "POST", w.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@example.com"},
			"password": {password}})
		checkHeaders(t, p)
		if p.status != http.StatusOK || !strings.Contains(p.body, `action="/oauth/authorize/code"`) || !strings.Contains(p.body, `autocomplete="one-time-code"`) {
			t.Fatalf("the password of a user with a second factor: %d, want the code form\n%s", p.status, p.body)
		}
		if w.signedIn(t, c) {
			t.Fatal("the password alone opened the consent page")
		}
		if d := do(t, c, "POST", w.srv.URL+"/oauth/authorize/decision", url.Values{"request": {request}, "decision": {"approve"}, "csrf_token": {""}}); d.status == http.StatusSeeOther {
			t.Fatalf("the password alone approved: %v", d.header)
		}
		wrong := w.code()[:5] + string(rune('0'+(w.code()[5]-'0'+5)%10))
		if p := w.sendCode(t, c, request, wrong); p.status != http.StatusBadRequest || !strings.Contains(p.body, "The code is not right") {
			t.Fatalf("a wrong code: %d %s", p.status, p.body)
		}
		code := w.code()
		if p := w.sendCode(t, c, request, code); p.status != http.StatusSeeOther || p.header.Get("Location") != "/oauth/authorize?"+request {
			t.Fatalf("the right code: %d %v %s", p.status, p.header, p.body)
		}
		if !w.signedIn(t, c) {
			t.Fatal("the right code did not open the consent page")
		}

		// The same code in another sign-in is refused; a recovery code works once.
		again := signintest.Client()
		do(t, again, "POST", w.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@example.com"}, "password": {password}})
		if p := w.sendCode(t, again, request, code); p.status != http.StatusBadRequest {
			t.Fatalf("a code used before: %d", p.status)
		}
		if p := w.sendCode(t, again, request, w.codes[0]); p.status != http.StatusSeeOther {
			t.Fatalf("a recovery code: %d %s", p.status, p.body)
		}
		third := signintest.Client()
		do(t, third, "POST", w.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@example.com"}, "password": {password}})
		if p := w.sendCode(t, third, request, w.codes[0]); p.status != http.StatusBadRequest {
			t.Fatalf("a recovery code used before: %d", p.status)
		}

		// Without the password step the code form is nothing, even with a right code.
		w.clk.Advance(totp.Period)
		stranger := signintest.Client()
		if p := w.sendCode(t, stranger, request, w.code()); p.status != http.StatusOK || !strings.Contains(p.body, "Your sign-in has expired") ||
			w.signedIn(t, stranger) {
			t.Fatalf("a code without the password: %d %s", p.status, p.body)
		}

		// Wrong codes here lock the user's codes as they do on the dashboard.
		for i := range user.MaxCodeFailures {
			if p := w.sendCode(t, third, request, strconv.Itoa(100000+i)); p.status != http.StatusBadRequest && p.status != http.StatusTooManyRequests {
				t.Fatalf("wrong code %d: %d", i, p.status)
			}
		}
		p = w.sendCode(t, third, request, w.code())
		if wait, _ := strconv.Atoi(p.header.Get("Retry-After")); p.status != http.StatusTooManyRequests || wait < 1 {
			t.Fatalf("the right code after %d wrong ones: %d Retry-After %q", user.MaxCodeFailures, p.status, p.header.Get("Retry-After"))
		}

		// A user who must have a second factor and has none enrols in the dashboard, not here.
		second := w.newMerchant(t, "second@example.com")
		if err := db.Write(context.Background(), func(tx *store.Tx) error {
			return user.SetRequireTwoFactor(context.Background(), tx, second.ID, true)
		}); err != nil {
			t.Fatal(err)
		}
		c = signintest.Client()
		p = do(t, c, "POST", w.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"second@example.com"}, "password": {password}})
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "set it up") || w.signedIn(t, c) {
			t.Fatalf("a user who must enrol: %d %s", p.status, p.body)
		}
	})
}

// The password grant refuses a user with a second factor, and a user of a merchant that requires one,
// with invalid_grant naming the authorization-code flow: a password alone never gets a token for an
// account that has, or must have, two factors. A wrong password is answered as before, so that the
// refusal tells nothing to whoever does not know the password.
func TestPasswordGrantHonoursTheSecondFactor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWithFactor(t, db)
		creds := w.srv.NewClient(t, w.merchant.ID)
		grantOf := func(email, pw string) (int, map[string]any) {
			t.Helper()
			req, _ := http.NewRequest("POST", w.srv.URL+"/oauth/token",
				strings.NewReader(url.Values{"grant_type": {"password"}, "username": {email}, "password": {pw}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.SetBasicAuth(creds.ClientID, creds.ClientSecret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var out map[string]any
			json.Unmarshal(b, &out)
			return resp.StatusCode, out
		}
		status, body := grantOf("owner@example.com", password)
		desc, _ := body["error_description"].(string)
		if status != http.StatusBadRequest || body["error"] != "invalid_grant" || !strings.Contains(desc, "authorization-code flow") || body["access_token"] != nil {
			t.Fatalf("the password grant of a user with a second factor: %d %v", status, body)
		}
		if status, body := grantOf("owner@example.com", "not the password"); status != http.StatusBadRequest ||
			body["error_description"] != "The e-mail or password is wrong." {
			t.Fatalf("a wrong password: %d %v", status, body)
		}

		// Required by the merchant, without a factor yet: refused too; once the requirement is off, the
		// grant works for a user without a factor.
		second := w.newMerchant(t, "second@example.com")
		secondCreds := w.srv.NewClient(t, second.ID)
		creds = secondCreds
		setRequired := func(on bool) {
			if err := db.Write(context.Background(), func(tx *store.Tx) error {
				return user.SetRequireTwoFactor(context.Background(), tx, second.ID, on)
			}); err != nil {
				t.Fatal(err)
			}
		}
		setRequired(true)
		if status, body := grantOf("second@example.com", password); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("the password grant where the merchant requires a second factor: %d %v", status, body)
		}
		setRequired(false)
		if status, body := grantOf("second@example.com", password); status != http.StatusOK || body["access_token"] == nil {
			t.Fatalf("the password grant of a user with one factor and no requirement: %d %v", status, body)
		}
	})
}

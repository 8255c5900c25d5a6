package securitytest_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/totp"
	"github.com/kassapay/kassa/internal/user"
	"github.com/kassapay/kassa/internal/velocity"
)

// The password of a user with an authenticator app, then the enrolment page instead of the code: it
// once showed a fresh secret, whose first code gave a full session and replaced the owner's factor.
func TestPasswordAloneCannotEnrolANewFactor(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	s := k.newShop(t, "enrol.example")
	k.enrol(t, s.users[user.Owner].Person)
	attacker := k.browser(t)
	resp, body := attacker.post("/dashboard/sign-in", url.Values{"email": {"owner@enrol.example"}, "password": {pw}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in/code" {
		t.Fatalf("the password of a user with a second factor: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	_, page := attacker.get("/dashboard/sign-in/enrol")
	if key := totpKey(page); key != "" {
		secret, err := totp.ParseSecret(key)
		if err != nil {
			t.Fatal(err)
		}
		attacker.post("/dashboard/sign-in/enrol", url.Values{"enrolment": {signintest.Field(t, page, "enrolment")}, "code": {k.code(secret)}})
		t.Errorf("after the password alone the enrolment page offered a new secret")
	}
	if !strings.Contains(page, "Your sign-in has expired") {
		t.Errorf("the enrolment page after the password alone: %s", page)
	}
	if attacker.signedIn() {
		t.Fatal("the password alone and the enrolment page gave a session")
	}
}

// The consent flow (/oauth/authorize) signed in with the password alone of a user with an
// authenticator app, then "Allow access".
func TestConsentNeedsTheSecondFactor(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	s := k.newShop(t, "consent.example")
	k.enrol(t, s.users[user.Owner].Person)
	p := k.NewPartner(t)
	c := signintest.Client()
	request := signintest.Field(t, signintest.Get(t, c, k.authorizeURL(p)), "request")
	resp, err := c.PostForm(k.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@consent.example"}, "password": {pw}})
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if consent := signintest.Get(t, c, k.authorizeURL(p)); strings.Contains(consent, `value="approve"`) {
		t.Fatalf("the password alone opened \"Allow access\":\n%s", consent)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `action="/oauth/authorize/code"`) {
		t.Fatalf("the consent sign-in's answer to the password: %d, want the code form\n%s", resp.StatusCode, answer)
	}
}

// The password grant, for a user with an authenticator app.
func TestPasswordGrantCannotSkipTheSecondFactor(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	s := k.newShop(t, "grant.example")
	k.enrol(t, s.users[user.Owner].Person)
	r := k.passwordGrant(t, k.NewClient(t, s.id), "owner@grant.example", pw)
	if r.Status != http.StatusBadRequest || r.Str("error") != "invalid_grant" || !strings.Contains(r.Str("error_description"), "authorization-code flow") ||
		r.Str("access_token") != "" {
		t.Fatalf("the password grant of a user with a second factor: %d %s, want invalid_grant naming the authorization-code flow", r.Status, r.Raw)
	}
}

// Twenty-four password changes at once from one sales session, and as many uses at once of one
// set-password link: each argon2id computation holds 64 MiB, and outside the server's one bound these
// took it past 1.5 GB. The heap grows by less than 300 MiB; what the bound cannot take is refused.
// Not parallel, so that no other test's allocations count.
func TestPasswordChangesCannotExhaustMemory(t *testing.T) {
	k := start(t, server.Config{})
	s := k.newShop(t, "change.example")
	sales := k.browser(t)
	csrf := sales.signIn("sales@change.example")
	var link user.Link
	if err := k.DB.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		link, err = user.IssueLink(context.Background(), tx, s.users[user.Reporting].ID, user.Reset, "", k.clk.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	answers := map[string]int{}
	growth := servertest.HeapGrowth(func() {
		servertest.Parallel(48, func(i int) {
			kind, path := "change", "/dashboard/account/password"
			form := url.Values{"csrf_token": {csrf}, "current_password": {pw}, "new_password": {"a new passphrase " + strconv.Itoa(i)}}
			if i%2 == 1 {
				kind, path = "link", "/dashboard/password"
				form = url.Values{"token": {link.Token}, "password": {"a fresh passphrase"}, "confirm": {"a fresh passphrase"}}
			}
			resp, _ := sales.post(path, form)
			mu.Lock()
			answers[kind+" "+strconv.Itoa(resp.StatusCode)]++
			mu.Unlock()
		})
	})
	t.Logf("answers %v; the heap grew by %d MiB at its peak", answers, growth)
	if growth >= 300 {
		t.Errorf("the heap grew by %d MiB, want less than 300", growth)
	}
	for a := range answers {
		if strings.HasSuffix(a, " 500") {
			t.Errorf("answers %v: a failure", answers)
		}
	}
}

// A stolen dashboard session guesses the user's current password on the account page, where a right
// guess lets it set a password of its own.
func TestStolenSessionCannotGuessThePassword(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	k.newShop(t, "stolen.example")
	thief := k.browser(t)
	csrf := thief.signIn("reporting@stolen.example")
	change := func(current string) (*http.Response, string) {
		return thief.post("/dashboard/account/password", url.Values{"csrf_token": {csrf}, "current_password": {current}, "new_password": {"the thief's passphrase"}})
	}
	for i := range auth.AccountAttemptLimit {
		resp, body := change("guess " + strconv.Itoa(i))
		wantStatus(t, "a wrong guess", resp, body, http.StatusBadRequest)
	}
	resp, body := change(pw)
	if wait, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || wait < 1 {
		t.Fatalf("the right password after %d wrong guesses: %d Retry-After %q, want 429\n%s", auth.AccountAttemptLimit, resp.StatusCode,
			resp.Header.Get("Retry-After"), body)
	}
}

// Anyone asks for a password reset of the owner, which waits in the outbox (no SMTP is configured);
// then the database's files are copied and searched for the e-mail's link.
func TestOutboxHoldsNoUsableLink(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{NoBillingEngine: true})
	k.newShop(t, "outbox.example")
	anyone := k.browser(t)
	resp, body := anyone.post("/dashboard/forgot", url.Values{"email": {"owner@outbox.example"}})
	wantStatus(t, "forgot", resp, body, http.StatusOK)
	var link string
	for _, e := range billingtest.Outbox(t, k.DB) {
		if e.To == "owner@outbox.example" {
			link = regexp.MustCompile(`http\S+/dashboard/password\?token=\S+`).FindString(e.Text)
		}
	}
	u, err := url.Parse(link)
	if link == "" || err != nil {
		t.Fatalf("no reset link in the outbox (%v)", err)
	}
	storetest.NotStored(t, storetest.RawData(t, k.DB), map[string]string{"the reset link": link, "its token": u.Query().Get("token")})
	if resp, body := anyone.get(link); resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Fatalf("the link searched for is not the one mailed: %d\n%s", resp.StatusCode, body)
	}
}

// A sent invoice's pay link; then the database's files are copied and searched for its pay key, the
// secret of the public pay and PDF links.
func TestPayKeysAreNotStoredInClear(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{NoBillingEngine: true})
	payURL := sentInvoice(t, k.NewMerchant(t))
	_, key, _ := strings.Cut(strings.TrimSuffix(payURL, "/pay"), "/invoice/")
	if key == "" {
		t.Fatalf("no pay key in %q", payURL)
	}
	storetest.NotStored(t, storetest.RawData(t, k.DB), map[string]string{"the pay key": key})
	if resp, _ := k.browser(t).get(payURL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the pay link searched for does not open its invoice: %d", resp.StatusCode)
	}
}

// Kassa makes its data directory and database under the usual umask 022; another local user stats
// them. Not parallel: the umask is the process's.
func TestDataFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kassa-data")
	was := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(was) })
	db := storetest.SQLiteAt(t, dir)
	startOn(t, db, server.Config{}).NewMerchant(t)
	storetest.WantPrivate(t, dir, "kassa.db", "kassa.db-wal", "kassa.db-shm")
}

// Unauthenticated GETs of one invoice's pay link, each of which once made a hosted-page session.
func TestPayLinkGetsMakeNoSessions(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{NoBillingEngine: true})
	m := k.NewMerchant(t)
	payURL := sentInvoice(t, m)
	anyone := k.browser(t)
	forms := map[string]bool{}
	for i := range velocity.LinkPerMinute {
		resp, body := anyone.get(payURL)
		wantStatus(t, "GET "+strconv.Itoa(i+1)+" of the pay link", resp, body, http.StatusSeeOther)
		forms[resp.Header.Get("Location")] = true
	}
	var sessions int
	if err := k.DB.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM checkout_sessions WHERE merchant_id = $1`, m.ID).
		Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if len(forms) != 1 || sessions != 1 {
		t.Errorf("%d GETs of one pay link were sent to %d card forms and made %d sessions, want one", velocity.LinkPerMinute, len(forms), sessions)
	}
	if resp, _ := anyone.get(payURL); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the pay link past its limit: %d, want 429 with Retry-After", resp.StatusCode)
	}
}

// A merchant points a webhook at a private address, and reads its delivery log for what the server's
// network looks like.
func TestWebhookLogShowsNoNetwork(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	v1 := v1Key(t, k, m.ID)
	endpoint := webhookTo(t, k, v1, "https://10.0.0.1/hooks")
	m.Do(t, "POST", "/customer-service/customer", map[string]any{"email": "event@example.com"})
	log := firstAttempt(t, k, v1, endpoint)
	if !strings.Contains(log, `"error":"target not allowed"`) {
		t.Errorf("the delivery log: %s, want the error \"target not allowed\"", log)
	}
	for _, leak := range []string{"10.0.0.1", "not public", "address", "lookup"} {
		if strings.Contains(log, leak) {
			t.Errorf("the delivery log shows %q: %s", leak, log)
		}
	}
}

// A merchant points webhooks at loopback written as the IPv6 forms that embed an IPv4 address
// (IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo): the probe's [::7f00:1] passed the filter
// and was dialled. Each delivery is refused before any connection.
func TestWebhookCannotReachIPv4InsideIPv6(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	v1 := v1Key(t, k, m.ID)
	endpoints := map[string]string{}
	for _, host := range []string{"::7f00:1", "::ffff:0:7f00:1", "64:ff9b::7f00:1", "2002:7f00:1::1", "2001:0:7f00:1::1"} {
		endpoints[host] = webhookTo(t, k, v1, "https://["+host+"]:9/hooks")
	}
	m.Do(t, "POST", "/customer-service/customer", map[string]any{"email": "event@example.com"})
	for host, id := range endpoints {
		if log := firstAttempt(t, k, v1, id); !strings.Contains(log, `"error":"target not allowed"`) {
			t.Errorf("a delivery to [%s]: %s, want it refused as \"target not allowed\"", host, log)
		}
	}
}

// A merchant invites the address of someone on another merchant's staff, and an address nobody has,
// and compares the answers.
func TestInvitationIsNoStaffOracle(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	k.newShop(t, "maple.example")
	k.newShop(t, "birch.example")
	owner := k.browser(t)
	csrf := owner.signIn("owner@maple.example")
	nonce := regexp.MustCompile(`nonce="[^"]*"`)
	invite := func(email string) string {
		resp, body := owner.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {email}, "role": {"reporting"}})
		body = strings.ReplaceAll(nonce.ReplaceAllString(body, ""), email, "EMAIL")
		if i, j := strings.Index(body, "<main"), strings.Index(body, "<table"); i >= 0 && j > i {
			body = body[i:j] // the staff table lists everyone invited so far: compare what the answer says
		}
		return strconv.Itoa(resp.StatusCode) + " " + body
	}
	if known, unknown := invite("admin@birch.example"), invite("nobody@elsewhere.example"); known != unknown {
		t.Fatalf("the invitation tells staff of another merchant from nobody:\n%s\n---\n%s", known, unknown)
	}
}

// Sales staff name an existing customer and a made-up one in the terminal's "save to an existing
// customer", and compare the answers: the first was a 200, the second a 404.
func TestTerminalIsNoCustomerOracleForSales(t *testing.T) {
	t.Parallel()
	s := start(t, server.Config{}).newShop(t, "till.example")
	s.customerWithCard(t, "grace@example.com")
	sales := s.k.browser(t)
	csrf := sales.signIn("sales@till.example")
	nonce := regexp.MustCompile(`nonce="[^"]*"`)
	save := func(customer string) string {
		resp, body := sales.post("/dashboard/terminal", terminalSale(csrf, customer))
		return strconv.Itoa(resp.StatusCode) + " " + strings.ReplaceAll(nonce.ReplaceAllString(body, ""), customer, "CUSTOMER")
	}
	if known, unknown := save("grace@example.com"), save("nobody@example.com"); known != unknown {
		t.Fatalf("the terminal tells an existing customer from a made-up one:\n%s\n---\n%s", known, unknown)
	}
}

// Sales staff save the terminal's card to an existing customer, as its default: the card that the
// customer's subscriptions are charged.
func TestSalesCannotMakeItsCardACustomersDefault(t *testing.T) {
	t.Parallel()
	s := start(t, server.Config{}).newShop(t, "till.example")
	grace := s.customerWithCard(t, "grace@example.com")
	sales := s.k.browser(t)
	csrf := sales.signIn("sales@till.example")
	form := terminalSale(csrf, grace.LookupID)
	form.Set("make_default", "yes")
	resp, body := sales.post("/dashboard/terminal", form)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "/hpp/") {
		t.Fatalf("sales saves a card to an existing customer: %d, want 403 without a card form\n%s", resp.StatusCode, body)
	}
	if c, err := s.k.Vault().Get(context.Background(), s.id, grace.LookupID); err != nil || len(c.Cards) != 1 || !c.Cards[0].IsDefault {
		t.Fatalf("the customer's cards after the attempt: %+v, %v", c.Cards, err)
	}
}

// An owner sends an invitation without choosing a role, as the Staff page's form is when sent as it
// comes.
func TestInvitationDefaultsToTheLeastRole(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	k.newShop(t, "invite.example")
	owner := k.browser(t)
	csrf := owner.signIn("owner@invite.example")
	_, page := owner.get("/dashboard/staff")
	form := regexp.MustCompile(`(?s)<select id="invite-role" name="role">(.*?)</select>`).FindStringSubmatch(page)
	if form == nil {
		t.Fatalf("no invitation form on the Staff page:\n%s", page)
	}
	if m := regexp.MustCompile(`<option value="([a-z]+)" selected>`).FindStringSubmatch(form[1]); m == nil || m[1] != string(user.Sales) {
		t.Errorf("the invitation form's role unless changed: %v, want sales", m)
	}
	resp, body := owner.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {"new@invite.example"}})
	wantStatus(t, "an invitation without a role", resp, body, http.StatusOK)
	if !strings.Contains(body, "Invited new@invite.example as Sales.") {
		t.Fatalf("the invitation without a role:\n%s", body)
	}
}

// The merchant's only owner makes itself admin, and removes itself.
func TestLastOwnerCannotBeRemoved(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	s := k.newShop(t, "owner.example")
	owner := k.browser(t)
	csrf := owner.signIn("owner@owner.example")
	id := s.users[user.Owner].ID
	resp, body := owner.post("/dashboard/staff/"+id+"/role", url.Values{"csrf_token": {csrf}, "role": {"admin"}})
	wantStatus(t, "the last owner made admin", resp, body, http.StatusConflict)
	resp, body = owner.post("/dashboard/staff/"+id+"/remove", url.Values{"csrf_token": {csrf}})
	wantStatus(t, "the last owner removed", resp, body, http.StatusConflict)
	if resp, _ := owner.get("/dashboard/staff"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the owner's Staff page after the refusals: %d", resp.StatusCode)
	}
}

// A user setting up two-factor authentication mistypes the first code: the secret its app has just
// scanned must stay the one the page shows, or the app's entry stops working.
func TestWrongSetUpCodeKeepsTheSecretShown(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	k.newShop(t, "setup.example")
	b := k.browser(t)
	csrf := b.signIn("reporting@setup.example")
	_, page := b.get("/dashboard/account/two-factor/setup")
	key := totpKey(page)
	secret, err := totp.ParseSecret(key)
	if key == "" || err != nil {
		t.Fatalf("no key on the setup page (%v):\n%s", err, page)
	}
	form := url.Values{"csrf_token": {csrf}, "enrolment": {signintest.Field(t, page, "enrolment")}}
	code := k.code(secret)
	form.Set("code", code[:5]+string(rune('0'+(code[5]-'0'+1)%10)))
	resp, body := b.post("/dashboard/account/two-factor/setup", form)
	wantStatus(t, "a wrong first code", resp, body, http.StatusBadRequest)
	if shown := totpKey(body); shown != key {
		t.Fatalf("after a wrong code the page shows the key %q, want the one scanned, %q", shown, key)
	}
	form.Set("enrolment", signintest.Field(t, body, "enrolment"))
	form.Set("code", code)
	resp, body = b.post("/dashboard/account/two-factor/setup", form)
	wantStatus(t, "the scanned app's code", resp, body, http.StatusOK)
}

// A Kassa whose public URL is https, answered over plain http by a first request that a network
// attacker could keep on http.
func TestHTTPSKassaSendsHSTS(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{PublicURL: "https://pay.example"})
	b := k.browser(t)
	for _, path := range []string{"/healthz", "/dashboard/sign-in", "/customer-service/customer", "/no-such-route"} {
		if resp, _ := b.get(path); resp.Header.Get("Strict-Transport-Security") != "max-age=31536000" {
			t.Errorf("GET %s: %d with Strict-Transport-Security %q, want max-age=31536000", path, resp.StatusCode,
				resp.Header.Get("Strict-Transport-Security"))
		}
	}
}

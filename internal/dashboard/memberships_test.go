package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// One person, one sign-in, several merchants. An invitation answers alike whether the address is
// someone's sign-in at another merchant or nobody's; the invited person, who keeps its password,
// accepts through the e-mailed link alone (before that the merchant is nowhere in its dashboard),
// and then signs in to the merchant that invited it, switching between its merchants in the header,
// in the role it holds at each.
func TestOnePersonOnSeveralMerchants(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := &clock{t: time.Now()}
		s := newShop(t, db, server.Config{Now: clk.Now})
		ctx := context.Background()
		hash, err := pwHash()
		if err != nil {
			t.Fatal(err)
		}
		var birch merchant.Merchant
		if err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			birch, _, err = user.CreateMerchant(ctx, tx, merchant.New{Name: "Birch Supplies", Email: "owner@birch.example"}, hash, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		owner := s.browser(t)
		csrf := owner.signIn("owner@maple.example")
		invite := func(email string) string {
			t.Helper()
			resp, body := owner.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {email}, "role": {"reporting"}})
			wantStatus(t, "invite "+email, resp, body, http.StatusOK)
			return body
		}
		known, unknown := invite("owner@birch.example"), invite("nobody@elsewhere.example")
		same := func(page, email string) string {
			page = regexp.MustCompile(`nonce="[^"]*"`).ReplaceAllString(page, "")
			page = strings.ReplaceAll(page, email, "EMAIL")
			// The staff table lists everyone invited so far; compare what the answer says.
			return page[strings.Index(page, "<main"):strings.Index(page, "<table")]
		}
		if same(known, "owner@birch.example") != same(unknown, "nobody@elsewhere.example") {
			t.Fatalf("the invitation tells a sign-in at another merchant from nobody's:\n%s\n---\n%s",
				same(known, "owner@birch.example"), same(unknown, "nobody@elsewhere.example"))
		}
		_, staff := owner.get("/dashboard/staff")
		for _, email := range []string{"owner@birch.example", "nobody@elsewhere.example"} {
			row := regexp.MustCompile(`<tr>\s*<td>` + regexp.QuoteMeta(email) + `[^\n]*\n<td>[^\n]*\n<td>([^<]*)</td>`).FindStringSubmatch(staff)
			if row == nil || row[1] != "—" || !strings.Contains(staff, email+` <span class="muted">(invitation sent)</span>`) {
				t.Errorf("the Staff page's row of %s tells more than that it was invited: %v", email, row)
			}
		}

		// Before accepting, the person signs in to its own merchant only, with no switcher.
		person := s.browser(t)
		resp, _ := person.post("/dashboard/sign-in", url.Values{"email": {"owner@birch.example"}, "password": {pw}})
		wantStatus(t, "sign in before accepting", resp, "", http.StatusSeeOther)
		_, home := person.get("/dashboard")
		if !strings.Contains(home, "Kassa · Birch Supplies") || strings.Contains(home, "/dashboard/switch") {
			t.Fatalf("the person's dashboard before accepting: %s", home)
		}
		personCSRF := signintest.Field(t, home, "csrf_token")
		if resp, body := person.post("/dashboard/switch", url.Values{"csrf_token": {personCSRF}, "merchant_id": {s.merchantID}}); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("switching to a merchant whose invitation waits: %d %s", resp.StatusCode, body)
		}

		// The e-mailed link accepts, without a new password.
		link := strings.TrimPrefix(outboxLink(t, db, "owner@birch.example"), s.srv.URL)
		resp, page := person.get(link)
		wantStatus(t, "open the invitation", resp, page, http.StatusOK)
		if !strings.Contains(page, "Join Maple &amp; Birch Goods") || strings.Contains(page, `name="password"`) {
			t.Fatalf("the invitation of a person with a password: %s", page)
		}
		resp, body := person.post("/dashboard/password", url.Values{"token": {signintest.Field(t, page, "token")}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in?joined=1" {
			t.Fatalf("accept: %d %s", resp.StatusCode, body)
		}
		resp, _ = person.post("/dashboard/sign-in", url.Values{"email": {"owner@birch.example"}, "password": {pw}})
		wantStatus(t, "sign in after accepting", resp, "", http.StatusSeeOther)
		_, home = person.get("/dashboard")
		if !strings.Contains(home, "Kassa · Maple &amp; Birch Goods") || !strings.Contains(home, `action="/dashboard/switch"`) ||
			!strings.Contains(home, "Birch Supplies</option>") {
			t.Fatalf("the person's dashboard after accepting: %s", home)
		}
		if resp, _ := person.get("/dashboard/staff"); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("the reporting member at Maple opened Staff: %d", resp.StatusCode)
		}
		personCSRF = signintest.Field(t, home, "csrf_token")
		resp, body = person.post("/dashboard/switch", url.Values{"csrf_token": {personCSRF}, "merchant_id": {birch.ID}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("switch to Birch: %d %s", resp.StatusCode, body)
		}
		_, home = person.get("/dashboard")
		if !strings.Contains(home, "Kassa · Birch Supplies") {
			t.Fatalf("after switching to Birch: %s", home)
		}
		if resp, _ := person.get("/dashboard/staff"); resp.StatusCode != http.StatusOK {
			t.Fatalf("the owner of Birch at its Staff page: %d", resp.StatusCode)
		}
		// A merchant whose staff the person is not is nobody to switch to.
		if resp, _ := person.post("/dashboard/switch", url.Values{"csrf_token": {personCSRF}, "merchant_id": {"0000000000"}}); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("switching to a stranger merchant: %d", resp.StatusCode)
		}

		// Taken off Maple's staff, the person's session there ends; it keeps Birch.
		resp, _ = person.post("/dashboard/switch", url.Values{"csrf_token": {personCSRF}, "merchant_id": {s.merchantID}})
		wantStatus(t, "switch back to Maple", resp, "", http.StatusSeeOther)
		var id string
		if err := db.Reader().QueryRowContext(ctx, `SELECT id FROM users WHERE email_key = 'owner@birch.example'`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		resp, body = owner.post("/dashboard/staff/"+id+"/remove", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "remove the person from Maple", resp, body, http.StatusSeeOther)
		if resp, _ := person.get("/dashboard"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the session at Maple after the removal: %d", resp.StatusCode)
		}
		resp, _ = person.post("/dashboard/sign-in", url.Values{"email": {"owner@birch.example"}, "password": {pw}})
		wantStatus(t, "sign in after the removal", resp, "", http.StatusSeeOther)
		if _, home = person.get("/dashboard"); !strings.Contains(home, "Kassa · Birch Supplies") || strings.Contains(home, "/dashboard/switch") {
			t.Fatalf("the person's dashboard after leaving Maple: %s", home)
		}
	})
}

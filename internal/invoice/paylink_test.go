package invoice_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

// invoiceSessions counts the merchant's hosted-page sessions that pay invoices.
func invoiceSessions(t *testing.T, db *store.DB, merchantID string) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM checkout_sessions WHERE merchant_id = $1
		AND purpose = $2`, merchantID, hostedpage.PurposeInvoice).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// View after view of one pay link hands out one card form, on both backends: 200 views (a second
// apart, within the link's limit) redirect to the same form and leave one hosted-page session; the
// form is the invoice's. Once it has too little time left to be handed out (hostedpage.ReuseMargin),
// the next view makes a new one, which the views after it share.
func TestPayLinkViewsShareOneSession(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := newClocked(t, db, time.Date(2026, time.November, 20, 15, 0, 0, 0, time.UTC))
		payURL := c.get(t, c.send(t, "ONE-1", "2026-12-01", nil)).Str("payment_url")
		start := c.clock.Now()
		first := ""
		for i := range 200 {
			form, body, status := openForm(t, payURL)
			if status != http.StatusSeeOther {
				t.Fatalf("view %d of the pay link: %d %s", i, status, body)
			}
			if i == 0 {
				first = form
			} else if form != first {
				t.Fatalf("view %d of the pay link was handed another card form (%d sessions)", i, invoiceSessions(t, db, c.m.ID))
			}
			c.clock.Advance(time.Second)
		}
		if n := invoiceSessions(t, db, c.m.ID); n != 1 {
			t.Fatalf("%d hosted-page sessions after 200 views of one pay link, want 1", n)
		}
		if page, status := getPage(t, c.srv.URL+first); status != 200 || !strings.Contains(page, "Invoice ONE-1") || !strings.Contains(page, "card-form") {
			t.Fatalf("the shared card form: %d\n%s", status, page)
		}

		c.clock.Advance(start.Add(hostedpage.Lifetime - hostedpage.ReuseMargin).Sub(c.clock.Now()))
		next, _, _ := openForm(t, payURL)
		if next == "" || next == first {
			t.Fatalf("a view with a quarter of an hour left on the form was handed %q, want a new form", next)
		}
		if again, _, _ := openForm(t, payURL); again != next {
			t.Fatalf("the view after the new form was handed %q, want %q", again, next)
		}
		if n := invoiceSessions(t, db, c.m.ID); n != 2 {
			t.Fatalf("%d hosted-page sessions, want the first and the one that took its place", n)
		}
	})
}

// Views of a pay link at once share one card form, on both backends: eight at once, for each of three
// invoices, are all redirected to their invoice's one form, and each invoice has one session.
func TestRacingPayLinkViewsShareOneSession(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		for i := range 3 {
			inv := sentInvoice(t, f.m, fmt.Sprintf("RACE-VIEW-%d", i))
			forms := make([]string, 8)
			servertest.Parallel(len(forms), func(j int) {
				form, _, status := openForm(t, inv.Str("payment_url"))
				if status != http.StatusSeeOther {
					t.Errorf("a racing view: %d", status)
				}
				forms[j] = form
			})
			for j, form := range forms {
				if form != forms[0] {
					t.Fatalf("racing views of %s were handed %q and %q (view %d)", inv.Str("invoice_number"), forms[0], form, j)
				}
			}
		}
		if n := invoiceSessions(t, db, f.m.ID); n != 3 {
			t.Fatalf("%d hosted-page sessions for three invoices viewed at once, want 3", n)
		}
	})
}

// visit GETs a public link from the client address from (through the test's trusted proxy; "" for
// the test's own address), following no redirect.
func visit(t *testing.T, link, from string) servertest.Response {
	t.Helper()
	req, err := http.NewRequest("GET", link, nil)
	if err != nil {
		t.Fatal(err)
	}
	if from != "" {
		req.Header.Set("X-Forwarded-For", from)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return servertest.Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
}

// wantTooMany fails t unless r is the public links' 429 of policy: a page a person can read, with the
// limit's headers and Retry-After.
func wantTooMany(t *testing.T, what string, r servertest.Response, policy string, quota int) {
	t.Helper()
	if r.Status != http.StatusTooManyRequests || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(r.Raw), "<h1>Too many requests</h1>") || !strings.Contains(string(r.Raw), "Wait 1 second, then reload this page.") {
		t.Fatalf("%s: %d %q, want a 429 page:\n%s", what, r.Status, r.Header.Get("Content-Type"), r.Raw)
	}
	r.WantRateLimit(t, policy, quota, 60, 1)
}

// The public links' limits trip at their edge, on both backends: a pay link opened
// velocity.LinkPerMinute times at once is opened, and the next request of it — of its page or of its
// PDF, one link, from any address — is a 429 page with Retry-After. The client address that opened it
// has its velocity.AddressPerMinute requests used up by a second link, and is refused the next, on a
// third link that has not been opened, which another address (through the trusted proxy) opens. A
// second later the first link opens again.
func TestPayLinkLimits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, time.November, 20, 15, 0, 0, 0, time.UTC))
		proxy, err := httpapi.ParsePrefixes("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		srv := servertest.Start(t, db, server.Config{Now: clk.Now, NoBillingEngine: true, TrustedProxies: proxy})
		m := srv.NewMerchant(t)
		links := make([]string, 3)
		for i := range links {
			links[i] = sentInvoice(t, m, fmt.Sprintf("LIMIT-%d", i)).Str("payment_url")
		}
		pdf := strings.TrimSuffix(links[0], "/pay") + "/pdf"
		const from, other = "203.0.113.7", "198.51.100.9"
		for i := range velocity.LinkPerMinute {
			u := links[0]
			if i%2 == 1 {
				u = pdf
			}
			if r := visit(t, u, from); r.Status != http.StatusSeeOther && r.Status != http.StatusOK {
				t.Fatalf("request %d of the link: %d %s", i+1, r.Status, r.Raw)
			}
		}
		wantTooMany(t, "the link's page once its limit is used up", visit(t, links[0], from), "link", velocity.LinkPerMinute)
		wantTooMany(t, "the link's PDF once its limit is used up", visit(t, pdf, other), "link", velocity.LinkPerMinute)

		// The address has made LinkPerMinute + 1 requests: the rest of its quota goes to a second link.
		for i := range velocity.AddressPerMinute - velocity.LinkPerMinute - 1 {
			if r := visit(t, links[1], from); r.Status != http.StatusSeeOther {
				t.Fatalf("request %d of the second link: %d %s", i+1, r.Status, r.Raw)
			}
		}
		wantTooMany(t, "a third link, once the address has used up its limit", visit(t, links[2], from), "link-address",
			velocity.AddressPerMinute)
		if r := visit(t, links[2], other); r.Status != http.StatusSeeOther {
			t.Fatalf("the third link from another address: %d %s", r.Status, r.Raw)
		}

		clk.Advance(time.Second)
		if r := visit(t, links[0], other); r.Status != http.StatusSeeOther {
			t.Fatalf("the first link a second later: %d %s", r.Status, r.Raw)
		}
	})
}

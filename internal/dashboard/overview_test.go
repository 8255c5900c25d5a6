package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/report"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// sale is a ledger row of the shop's, written as the ledger records it.
type sale struct {
	kind, status, currency, code string
	amount                       int64
	test                         bool
	ago                          time.Duration
}

// record writes the shop's ledger rows, and an e-mail waiting in its outbox.
func (s *shop) record(t testing.TB, db *store.DB, sales ...sale) {
	t.Helper()
	ctx := context.Background()
	for i, x := range sales {
		var code any
		if x.code != "" {
			code = x.code
		}
		at := time.Now().Add(-x.ago).UnixMilli()
		if _, err := db.Exec(ctx, `INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount, currency, scale, decline_code,
			test_mode, source, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 2, $7, $8, 'E_COMMERCE', $9, $9)`,
			fmt.Sprintf("OVERVIEW%012d", i), s.merchantID, x.kind, x.status, x.amount, x.currency, code, x.test, at); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO outbox (merchant_id, to_addr, subject, text_body, html_body, next_attempt, created_at)
		VALUES ($1, 'buyer@example.com', 'Receipt', 'Thanks', '<p>Thanks</p>', 0, $2)`, s.merchantID, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
}

// overviewSales are today's test sales of the shop (its payments go to the simulator), a live sale
// of yesterday, and a test sale of 40 days ago, out of the overview's days.
var overviewSales = []sale{
	{"SALE", "APPROVED", "USD", "", 1250, true, time.Minute},
	{"AUTHORIZATION", "APPROVED", "USD", "", 900, true, time.Minute},
	{"CAPTURE", "APPROVED", "USD", "", 750, true, time.Minute},
	{"SALE", "DECLINED", "USD", "insufficient_funds", 5000, true, time.Minute},
	{"REFUND", "APPROVED", "USD", "", 250, true, time.Minute},
	{"SALE", "APPROVED", "CAD", "", 10000, false, 24 * time.Hour},
	{"SALE", "APPROVED", "USD", "", 99999, true, 40 * 24 * time.Hour},
}

// The Home page of owners, admins and reporting is the overview: today's test figures of the shop
// whose payments go to the simulator (gross $20.00 of a sale and a capture, 2 of 3 approved,
// refunds $2.50, net $17.50), the decline reason, the e-mail waiting in the outbox; the live figures
// apart, behind the switch. Sales staff get the short Home. A mode that is neither is a 400.
func TestOverviewFigures(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		s.record(t, db, overviewSales...)
		for _, role := range []string{"owner", "admin", "reporting"} {
			b := s.browser(t)
			b.signIn(role + "@maple.example")
			resp, body := b.get("/dashboard")
			wantStatus(t, role+"'s overview", resp, body, http.StatusOK)
			for _, want := range []string{`id="figures"`, "<caption>USD</caption>", "<td>$20.00</td><td>$20.00</td><td>$20.00</td>",
				"<td>66.7 %</td>", "<td>$2.50</td>", "<td>$17.50</td>", "Insufficient funds", "insufficient_funds",
				`<span class="n">1</span> e-mails waiting`, `href="/dashboard/subscriptions?status=RETRY"`, `role="img"`, "Test transactions."} {
				if !strings.Contains(body, want) {
					t.Fatalf("%s's overview lacks %q:\n%s", role, want, body)
				}
			}
			// "CAD" as a figure's currency, not as three letters anywhere (a nonce once held them).
			if strings.Contains(body, "<caption>CAD</caption>") || strings.Contains(body, ">CAD<") || strings.Contains(body, "999.99") {
				t.Fatalf("%s's test overview shows the live sale or one of 40 days ago:\n%s", role, body)
			}
		}
		b := s.browser(t)
		b.signIn("owner@maple.example")
		resp, body := b.get("/dashboard?mode=live")
		wantStatus(t, "the live overview", resp, body, http.StatusOK)
		if !strings.Contains(body, "<caption>CAD</caption>") || !strings.Contains(body, "<td>CA$0.00</td><td>CA$100.00</td><td>CA$100.00</td>") ||
			strings.Contains(body, "<caption>USD</caption>") {
			t.Fatalf("the live overview:\n%s", body)
		}
		resp, body = b.get("/dashboard?mode=both")
		wantStatus(t, "mode=both", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "mode must be live or test") {
			t.Fatalf("mode=both: %s", body)
		}

		sales := s.browser(t)
		sales.signIn("sales@maple.example")
		resp, body = sales.get("/dashboard")
		wantStatus(t, "sales' Home", resp, body, http.StatusOK)
		if strings.Contains(body, `id="figures"`) || strings.Contains(body, "20.00") || strings.Contains(body, "<svg") {
			t.Fatalf("sales staff see the overview:\n%s", body)
		}
	})
}

// In Chromium at 375 px, light and dark: the overview draws both charts as images named and described
// for assistive technology, each with its table of the 30 days beside it, the bars today's; axe-core
// finds no serious or critical violation. Sales staff find no overview.
func TestOverviewInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		s.record(t, db, overviewSales...)
		if err := report.NewRoller(report.RollerConfig{DB: db, Settle: time.Millisecond}).CatchUp(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx := browsertest.New(t)
		browsertest.Step(t, ctx, 30*time.Second, chromedp.EmulateViewport(375, 740))
		signInInBrowser(t, ctx, s.srv.URL, "reporting@maple.example", pw, "#figures")
		for _, id := range []string{"volume", "outcomes"} {
			if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#`+id+`-table tbody tr').length`); n != report.Days {
				t.Errorf("the %s table has %d rows", id, n)
			}
			label := browsertest.Eval[string](t, ctx, `(() => { const s = document.querySelector('#`+id+`-chart svg');
				return s.getAttribute('role') + ': ' + s.getAttribute('aria-labelledby').split(' ').map(i => document.getElementById(i).textContent).join(' | ') })()`)
			if !strings.HasPrefix(label, "img: ") || !strings.Contains(label, "The table beside the chart lists every day.") {
				t.Errorf("the %s chart is labelled %q", id, label)
			}
			if w := browsertest.Eval[float64](t, ctx, `document.querySelector('#`+id+`-chart svg').getBoundingClientRect().width`); w < 250 {
				t.Errorf("the %s chart is drawn %v px wide at 375", id, w)
			}
		}
		if today := browsertest.Eval[string](t, ctx, `document.querySelector('#volume-table tbody tr').textContent`); !strings.Contains(today, "20.00") {
			t.Errorf("today's row of the volume table: %q", today)
		}
		if bars := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('#outcomes-chart rect title')].map(t => t.textContent)`); len(bars) != 2 ||
			!strings.HasSuffix(bars[0], "approved 2") || !strings.HasSuffix(bars[1], "declined 1") {
			t.Errorf("the outcomes chart's bars: %q", bars)
		}
		if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
			t.Errorf("the overview is %d px wide at 375", w)
		}
		browsertest.CheckAccessibilityEverywhere(t, ctx, "overview")

		browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS("header form button")), chromedp.WaitVisible(chromedp.CSS("#email")))
		signInInBrowser(t, ctx, s.srv.URL, "sales@maple.example", pw, "nav")
		if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#figures, svg[role=img]').length`); n != 0 {
			t.Errorf("sales staff see %d parts of the overview", n)
		}
	})
}

// home is the Home page b gets.
func home(t *testing.T, b *browser) string {
	t.Helper()
	resp, body := b.get("/dashboard")
	wantStatus(t, "Home", resp, body, http.StatusOK)
	return body
}

// glance reads the overview's billing at a glance: due today, in retry, suspended.
func glance(t *testing.T, body string) [3]string {
	t.Helper()
	var got [3]string
	for i, what := range []string{"subscriptions due today", "in retry</a>", "suspended</a>"} {
		m := regexp.MustCompile(`<span class="n">(\d+)</span> ` + regexp.QuoteMeta(what)).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("the overview has no count of %q:\n%s", what, body)
		}
		got[i] = m[1]
	}
	return got
}

// Billing at a glance counts real subscriptions: one just made and not charged yet is due today, one
// whose card was declined is in retry (its next attempt tomorrow, so not due today), one whose retries
// the engine used up is suspended; the ACTIVE one charged this month and a paused one count nowhere.
// Once the engine has charged the due one, nothing is due today.
func TestOverviewBillingAtAGlance(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newBillingShop(t, db) // one ACTIVE subscription charged, one in RETRY
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		if got := glance(t, home(t, b)); got != [3]string{"0", "1", "0"} {
			t.Fatalf("due today, in retry, suspended: %v, want 0 1 0", got)
		}

		lapsed, _ := s.a.customerWithCard(t, "alan@example.com", cardtest.InsufficientFunds)
		lapsedSub := s.a.subscribe(t, lapsed, s.plan)
		if _, err := s.srv.Billing().RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.suspend(t, b, csrf, lapsed, lapsedSub)
		due, _ := s.a.customerWithCard(t, "edsger@example.com", cardtest.Visa)
		s.a.subscribe(t, due, s.plan)
		paused, _ := s.a.customerWithCard(t, "barbara@example.com", cardtest.Visa)
		pausedSub := s.a.subscribe(t, paused, s.plan)
		s.a.must(t, "PATCH", "/customer-service/customer/"+paused+"/subscription/"+pausedSub, map[string]any{"status": "PAUSED"})

		for _, role := range []string{"owner", "reporting"} {
			rb := s.browser(t)
			rb.signIn(role + "@maple.example")
			if got := glance(t, home(t, rb)); got != [3]string{"1", "1", "1"} {
				t.Fatalf("%s's overview: due today, in retry, suspended: %v, want 1 1 1", role, got)
			}
		}
		if _, err := s.srv.Billing().RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := s.recurring(t, "APPROVED"); n != 2 {
			t.Fatalf("%d approved recurring charges, want the first customer's and the due one's", n)
		}
		if got := glance(t, home(t, b)); got != [3]string{"0", "1", "1"} {
			t.Fatalf("after the engine's run: due today, in retry, suspended: %v, want 0 1 1", got)
		}
	})
}

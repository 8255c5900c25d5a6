package dashboard_test

import (
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// In Chromium: filter the list by last 4 and open the sale; refund part of it from
// its page through the confirmation, and the API shows the refund; a double-clicked confirmation moves
// money once; the CSV export of a filter, downloaded by the page's script with its progress bar, equals
// the API's list of the same filter. The list, the detail and the confirmation pass axe-core in light
// and dark, at desktop and 375 px, where they fit the width.
func TestTransactionsInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		sale := a.pay(t, payment.KindSale, "60.00", cardtest.Visa, map[string]string{"email": "frank@example.com", "first_name": "Frank", "order_id": "F-7"})
		a.pay(t, payment.KindSale, "5.00", cardtest.Mastercard, map[string]string{"email": "grace@example.com"})
		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		fits := func(what string) {
			t.Helper()
			browsertest.Viewport(t, ctx, browsertest.Phone)
			if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
				t.Errorf("%s is %d px wide at 375", what, w)
			}
			browsertest.Viewport(t, ctx, browsertest.Desktop)
		}

		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`nav a[href="/dashboard/transactions"]`)),
			chromedp.Click(chromedp.CSS(`#filter > summary`)), // the form waits behind the Filter disclosure
			chromedp.WaitVisible(chromedp.CSS("#f-last4")),
			chromedp.SendKeys(chromedp.CSS("#f-last4"), "4242"),
			chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`.chips a[href="/dashboard/transactions"]`)), // the filter's chip: the filtered page
			chromedp.WaitVisible(chromedp.CSS("#transactions")),
		)
		if got := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('#transactions tbody a')].map(a => a.textContent)`); !slices.Equal(got, []string{sale}) {
			t.Fatalf("filtered by last 4: %v", got)
		}
		browsertest.CheckAccessibilityEverywhere(t, ctx, "transactions list")
		fits("the list")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`#transactions tbody a`)),
			chromedp.WaitVisible(chromedp.CSS("#refund-form")),
		)
		if txt := browsertest.Eval[string](t, ctx, `document.getElementById('details').textContent`); !strings.Contains(txt, "frank@example.com") || !strings.Contains(txt, "424242…4242") {
			t.Fatalf("the detail page: %q", txt)
		}
		browsertest.CheckAccessibilityEverywhere(t, ctx, "transaction detail")
		fits("the detail page")

		// A partial refund, confirmed.
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.SetValue(chromedp.CSS("#refund-amount"), "25.00"),
			chromedp.Click(chromedp.CSS("#refund-form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#confirm")),
		)
		if q := browsertest.Eval[string](t, ctx, `document.getElementById('confirm-question').textContent`); !strings.Contains(q, "Refund CA$25.00") {
			t.Fatalf("the confirmation asks %q", q)
		}
		browsertest.CheckAccessibilityEverywhere(t, ctx, "refund confirmation")
		fits("the confirmation")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS("#confirm")),
			chromedp.WaitVisible(chromedp.CSS("[role=status]")),
		)
		refund := strings.TrimPrefix(browsertest.Eval[string](t, ctx, `location.pathname`), "/dashboard/transactions/")
		if r := a.get(t, refund); r.Str("transaction_type") != "REFUND" || r.Num("amount") != "25.00" || r.Str("original_transaction_id") != sale ||
			r.Str("transaction_result") != "APPROVED" {
			t.Fatalf("the API shows the refund as %s", r.Raw)
		}

		// A double-clicked confirmation.
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard/transactions/"+sale),
			chromedp.WaitVisible(chromedp.CSS("#refundable")),
		)
		if left := browsertest.Eval[string](t, ctx, `document.getElementById('refundable').textContent`); !strings.HasPrefix(left, "CA$35.00 remains") {
			t.Fatalf("after the refund: %q", left)
		}
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.SetValue(chromedp.CSS("#refund-amount"), "10.00"),
			chromedp.Click(chromedp.CSS("#refund-form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#confirm")),
			chromedp.DoubleClick(chromedp.CSS("#confirm")),
			chromedp.WaitVisible(chromedp.CSS("[role=status]")),
		)
		if sum, n := refunded(t, db, sale); sum != 3500 || n != 2 {
			t.Fatalf("after a refund and a double-clicked one: %d refunds of %d", n, sum)
		}

		// The export of a filter, with its progress.
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard/transactions?email=frank@example.com"),
			chromedp.WaitVisible(chromedp.CSS("#export")),
			chromedp.Click(chromedp.CSS("#export")),
			chromedp.WaitVisible(chromedp.CSS(`#export-status[data-done] progress`)),
		)
		if p := browsertest.Eval[[]float64](t, ctx, `(p => [p.value, p.max])(document.getElementById('export-progress'))`); p[0] != p[1] || p[1] != 4 {
			t.Errorf("the progress bar ends at %v (3 rows and the header)", p)
		}
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.getElementById('export').href).then(r => r.text())`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		records, err := csv.NewReader(strings.NewReader(text)).ReadAll()
		if err != nil || len(records) != 4 {
			t.Fatalf("the export (%v): %q", err, text)
		}
		if want := apiRows(t, a, "email_address=frank@example.com", records[0]); !slices.EqualFunc(records[1:], want, slices.Equal[[]string]) {
			t.Fatalf("the export differs from the API's list:\n%q\n%q", records[1:], want)
		}
	})
}

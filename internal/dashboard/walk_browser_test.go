package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// overflowCheck lists what makes the page of a tab scroll sideways: the document wider than the
// viewport, and each element that reaches past the viewport's left or right edge, by its box or by
// the content that overflows it (a long word), outside a box that scrolls or clips it sideways (a
// wide table in its own scrolling box is fine, and is not listed). The innermost such elements are
// named, at most ten: one that holds another is not.
const overflowCheck = `(() => {
	const root = document.documentElement, vw = root.clientWidth, out = [];
	if (root.scrollWidth > vw) out.push('the document is ' + root.scrollWidth + ' px wide in a viewport of ' + vw);
	const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
	const listed = [];
	for (const el of [...document.body.querySelectorAll('*')].reverse()) {
		const r = el.getBoundingClientRect();
		const right = getComputedStyle(el).overflowX === 'visible' ? Math.max(r.right, r.left + el.scrollWidth) : r.right;
		if ((r.width === 0 && r.height === 0) || (r.left >= -0.5 && right <= vw + 0.5)) continue;
		if (listed.some(l => el.contains(l))) continue;
		let held = false;
		for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
			if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(p).overflowX)) { held = true; break; }
		}
		if (held) continue;
		listed.push(el);
		out.push(name(el) + ' spans ' + Math.round(r.left) + ' to ' + Math.round(right) + ' px: "' + el.textContent.trim().slice(0, 40) + '"');
	}
	return out.slice(0, 11);
})()`

// overflows is what overflowCheck finds on the page of ctx's tab.
func overflows(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return browsertest.Eval[[]string](t, ctx, overflowCheck)
}

// pageWatch gathers what goes wrong in a tab while pages load: errors written to its console (an
// exception, console.error, a refusal of the Content-Security-Policy) and requests that fail or are
// answered with an error status.
type pageWatch struct {
	mu       sync.Mutex
	problems []string
}

// watch starts gathering the problems of ctx's tab.
func watch(t *testing.T, ctx context.Context) *pageWatch {
	t.Helper()
	w := &pageWatch{}
	add := func(format string, args ...any) {
		w.mu.Lock()
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
		w.mu.Unlock()
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			add("exception: %s", e.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				add("console.%s", e.Type)
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				add("console error (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
			}
		case *network.EventLoadingFailed:
			if !e.Canceled {
				add("request failed: %s (%s)", e.ErrorText, e.Type)
			}
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				add("%d for %s", e.Response.Status, e.Response.URL)
			}
		}
	}); err != nil {
		t.Fatalf("browser: listen: %v", err)
	}
	return w
}

// take returns the problems gathered since the last take.
func (w *pageWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.problems
	w.problems = nil
	return out
}

// In Chromium, every page of each role's navigation, and for the roles that see them the lists
// those pages link to, a page of each kind of object they list (a transaction, a customer, a plan, a
// subscription, an invoice, a payment intent, a hosted-page session, a webhook endpoint, an event)
// and the managers' forms, at 1280 and at 375 px wide: no page scrolls sideways (overflowCheck), none writes
// an error to the console or has a request fail, and axe-core, run on each page as the owner, finds no
// serious violation, in light and, where status badges show, in dark. At 1280 px the navigation's
// links show; at 375 px they wait in the closed menu. A too-wide element is found, and one in a
// scrolling box is not, so that the walk cannot pass for want of looking. On PostgreSQL: the other
// browser tests run on SQLite (storetest.InBrowser), so every page is rendered in a browser on each
// backend.
func TestWalkEveryPage(t *testing.T) {
	t.Parallel()
	db := storetest.Postgres(t)
	s := newShop(t, db, server.Config{NoBillingEngine: true})
	a := s.api(t, s.merchantID)
	customer, _ := a.customerWithCard(t, "ada.lovelace.with.a.rather.long.address@analytical-engines.example", cardtest.Visa)
	plan := a.must(t, "POST", "/plan-service/plan", map[string]any{"name": "Monthly box", "amount": "9.00", "frequency": "MONTHLY"}).Str("lookup_id")
	sub := a.subscribe(t, customer, plan)
	sale := a.pay(t, payment.KindSale, "25.00", cardtest.Visa, map[string]string{"order_id": "ORDER-2026-000000000000000000000042"})
	a.pay(t, payment.KindSale, "5.00", cardtest.Declined, nil)
	inv := a.invoice(t, false, oneLine("INV-0001", "CAD", "176.98", "grace@example.com"))
	pm := s.v1(t, "POST", "/v1/payment-methods", map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Visa, "exp_month": 12,
		"exp_year": 2040, "cvc": "123"}}).Str("id")
	intent := s.v1(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1250, "currency": "usd", "payment_method": pm}).Str("id")
	s.v1(t, "POST", "/v1/payment-intents/"+intent+"/confirm", nil)
	session := s.v1(t, "POST", "/v1/checkout/hosted-payment-page/sessions", map[string]any{"amount": 300, "currency": "usd"}).Str("id")
	endpoint := s.v1(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "https://hooks.example/kassa/events/incoming", "enabled_events": []string{"*"}}).Str("id")
	recordEvent(t, db, s.merchantID)
	// An event derived from the ledger (the sale's), whose payload is the transaction's many fields.
	evt := s.v1(t, "GET", "/v1/events?type=transaction.approved&limit=1", nil).Body["data"].([]any)[0].(map[string]any)["id"].(string)

	// Beyond the navigation: the lists its pages link to, and an object of each list.
	readers := []string{"/dashboard/plans", "/dashboard/payments/sessions", "/dashboard/transactions/" + sale, "/dashboard/customers/" + customer,
		"/dashboard/plans/" + plan, "/dashboard/subscriptions/" + customer + "/" + sub, "/dashboard/invoices/" + inv,
		"/dashboard/payments/intents/" + intent, "/dashboard/payments/sessions/" + session, webhooksPath + "/" + endpoint,
		"/dashboard/events/" + evt}
	// The forms only managers open.
	managers := []string{"/dashboard/customers/new", "/dashboard/plans/new", "/dashboard/invoices/new", webhooksPath + "/new"}
	// An admin's pages beyond the navigation are the owner's: what a page shows and offers depends on
	// whether the role is a manager, a reader or a seller (isManager, readers, sellers), never on
	// owner or admin, except the staff page, which is in the navigation.
	extra := map[user.Role][]string{user.Owner: append(readers, managers...), user.Reporting: readers}

	// The check itself, on a page of the dashboard as it stands (the sign-in page) at both widths.
	t.Run("a too-wide element is found", func(t *testing.T) {
		tab := browsertest.New(t)
		browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(s.srv.URL+"/dashboard/sign-in"), chromedp.WaitVisible(chromedp.CSS("#email")))
		for _, w := range []browsertest.Width{browsertest.Desktop, browsertest.Phone} {
			browsertest.Viewport(t, tab, w)
			if o := overflows(t, tab); len(o) != 0 {
				t.Fatalf("at %s, before: %q", w.Name, o)
			}
			// Styles set through the CSS object model, which the page's CSP does not govern.
			browsertest.Eval[bool](t, tab, `(() => {
				const box = document.createElement('div'); box.id = 'scroller'; box.style.overflowX = 'auto';
				const inner = document.createElement('div'); inner.style.width = '3000px'; inner.textContent = 'wide, in its box';
				box.append(inner); document.querySelector('main').append(box); return true; })()`)
			if o := overflows(t, tab); len(o) != 0 {
				t.Errorf("at %s, a wide element in a scrolling box is reported: %q", w.Name, o)
			}
			browsertest.Eval[bool](t, tab, `(() => {
				const wide = document.createElement('p'); wide.id = 'too-wide'; wide.style.width = '3000px'; wide.textContent = 'too wide';
				document.querySelector('main').append(wide); return true; })()`)
			if o := overflows(t, tab); len(o) != 2 || !strings.HasPrefix(o[0], "the document is ") || !strings.HasPrefix(o[1], "p#too-wide spans ") {
				t.Errorf("at %s, a too-wide element: %q", w.Name, o)
			}
			browsertest.Eval[bool](t, tab, `(() => { document.getElementById('too-wide').remove(); document.getElementById('scroller').remove(); return true; })()`)
		}
	})

	darkTones := map[string]bool{} // the badges' classes checked in dark
	for _, role := range []user.Role{user.Owner, user.Admin, user.Reporting, user.Sales} {
		t.Run(string(role), func(t *testing.T) {
			tab := browsertest.New(t)
			problems := watch(t, tab)
			browsertest.Viewport(t, tab, browsertest.Desktop)
			signInInBrowser(t, tab, s.srv.URL, string(role)+"@maple.example", pw, "nav")
			nav := browsertest.Eval[[]string](t, tab, `[...document.querySelectorAll('nav[aria-label=Dashboard] a')].map(a => a.getAttribute('href'))`)
			if len(nav) < 4 {
				t.Fatalf("the navigation of %s: %q", role, nav)
			}
			shown := `[...document.querySelectorAll('nav[aria-label=Dashboard] a')].filter(a => a.checkVisibility()).length`
			for _, path := range append(nav, extra[role]...) {
				browsertest.Viewport(t, tab, browsertest.Desktop)
				browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(s.srv.URL+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
				if got := browsertest.Eval[string](t, tab, `location.pathname`); got != path {
					t.Errorf("%s at %s landed on %s", role, path, got)
				}
				if n := browsertest.Eval[int](t, tab, shown); n != len(nav) {
					t.Errorf("%s at %s, 1280 px: %d of the navigation's %d links show", role, path, n, len(nav))
				}
				if o := overflows(t, tab); len(o) > 0 {
					t.Errorf("%s at %s scrolls sideways at 1280 px:\n  %s", role, path, strings.Join(o, "\n  "))
				}
				// axe-core once a page, as the owner, who sees every page with every action: the
				// document is the same at both widths. In dark too where the page shows a tone of
				// status badge not yet checked in dark (the dark scheme of the rest is the other
				// accessibility tests'), so that every tone's dark colours are.
				if role == user.Owner {
					browsertest.CheckAccessibility(t, tab, path+", light")
					fresh := false
					for _, tone := range browsertest.Eval[[]string](t, tab, `[...document.querySelectorAll('.badge')].map(b => b.className)`) {
						fresh = fresh || !darkTones[tone]
						darkTones[tone] = true
					}
					if fresh {
						browsertest.ColorScheme(t, tab, "dark")
						browsertest.CheckAccessibility(t, tab, path+", dark")
						browsertest.ColorScheme(t, tab, "")
					}
				}
				browsertest.Viewport(t, tab, browsertest.Phone)
				if o := overflows(t, tab); len(o) > 0 {
					t.Errorf("%s at %s scrolls sideways at 375 px:\n  %s", role, path, strings.Join(o, "\n  "))
				}
				if n := browsertest.Eval[int](t, tab, shown); n != 0 {
					t.Errorf("%s at %s, 375 px: %d links of the closed menu show", role, path, n)
				}
				if p := problems.take(); len(p) > 0 {
					t.Errorf("%s at %s:\n  %s", role, path, strings.Join(p, "\n  "))
				}
			}
		})
	}
}

package apidocs_test

import (
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The browser tests share the test binary's one browser, which browsertest.Main stops.
func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }

// In Chromium, the reference as a reader meets it: its style sheet applies under the page's
// Content-Security-Policy (allowed by its hash alone); the first Tab reaches a visible skip link; an
// entry of the contents, opened, leads to its operation; the page fits 375 px without scrolling
// sideways; and axe-core finds no serious or critical violation, in light and in dark, at 1280 and
// at 375 px.
func TestReferenceInBrowser(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, storetest.SQLite(t), server.Config{})
	tab := browsertest.New(t)
	browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(srv.URL+"/docs/api"), chromedp.WaitVisible(chromedp.CSS("#main h2")))

	if r := browsertest.Eval[string](t, tab, `getComputedStyle(document.querySelector('.card')).borderTopLeftRadius`); r != "12px" {
		t.Fatalf("the page's style sheet does not apply (a card's corner is %q): its policy refused it", r)
	}

	browsertest.Step(t, tab, 10*time.Second, chromedp.KeyEvent(kb.Tab))
	if skip := browsertest.Eval[bool](t, tab, `(() => { const a = document.activeElement;
		return a.classList.contains('skip') && a.getAttribute('href') === '#main' && a.getBoundingClientRect().top >= 0; })()`); !skip {
		t.Error("the first Tab does not reach a visible skip link to the reference")
	}

	browsertest.Step(t, tab, 10*time.Second,
		chromedp.Click(chromedp.CSS(`nav.toc details:has(a[href="#sale"]) summary`)),
		chromedp.Click(chromedp.CSS(`nav.toc a[href="#sale"]`)),
	)
	if at := browsertest.Eval[string](t, tab, `(() => { const s = document.querySelector(':target'); const r = s.getBoundingClientRect();
		return r.top >= 0 && r.top < innerHeight ? s.id + ' ' + s.querySelector('h3').textContent : 'not in view'; })()`); at != "sale POST /transaction-service/sale" {
		t.Errorf("the contents' link to the sale leads to %q", at)
	}

	for _, w := range []browsertest.Width{browsertest.Desktop, browsertest.Phone} {
		browsertest.Viewport(t, tab, w)
		if wide := browsertest.Eval[int](t, tab, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); wide > 0 {
			t.Errorf("at %s the page is %d px wider than the screen", w.Name, wide)
		}
	}
	browsertest.CheckAccessibilityEverywhere(t, tab, "the API reference")
}

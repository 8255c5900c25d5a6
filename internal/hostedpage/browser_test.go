package hostedpage_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/readmetest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// recorder keeps every message a page receives, with its origin, for the test to read.
const recorder = `<script>window.__messages = []; addEventListener('message', function (e) { __messages.push({origin: e.origin, data: e.data}); });</script>`

// world is Kassa (127.0.0.1), the shop that embeds its hosted page (localhost), and a page of a third
// origin (127.0.0.2) that embeds the shop's page: three sites, three renderer processes. The test
// reads the shop's page through its frame; the third page reports what it receives to its server.
type world struct {
	*shop
	shopOrigin, thirdOrigin string
	browser                 context.Context
	mu                      sync.Mutex
	thirdGot                []string // the messages the third origin's page received
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{shop: newShop(t, storetest.SQLite(t))}
	readme := readmetest.Block(t, "<!-- hosted-page-shop", "html")
	shopSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// The README's page as a shop would serve it for one order: its session's URL filled in.
		page := strings.NewReplacer("KASSA_URL", w.srv.URL, "SESSION_URL", r.URL.Query().Get("session")).Replace(readme)
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.Write([]byte(strings.Replace(page, "<body>", "<body>"+recorder, 1)))
	}))
	t.Cleanup(shopSrv.Close)
	w.shopOrigin = strings.Replace(shopSrv.URL, "127.0.0.1", "localhost", 1)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	third := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/record" {
			b, _ := io.ReadAll(r.Body)
			w.mu.Lock()
			w.thirdGot = append(w.thirdGot, string(b))
			w.mu.Unlock()
			return
		}
		// The third origin's page reports every message it receives to its server.
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.Write([]byte(`<!doctype html><html><body><script>addEventListener('message', function (e) {
			fetch('/record', {method: 'POST', body: JSON.stringify({origin: e.origin, data: e.data})}); });</script>` +
			`<iframe width="800" height="900" src="` + strings.ReplaceAll(r.URL.Query().Get("shop"), `"`, "") + `"></iframe></body></html>`))
	}))
	third.Listener = ln
	third.Start()
	t.Cleanup(third.Close)
	w.thirdOrigin = third.URL
	// Both outer pages may embed the hosted page: frame-ancestors checks every ancestor.
	w.m.Update(t, merchant.Update{AllowedOrigins: []string{w.shopOrigin, w.thirdOrigin}})
	w.clock.Advance(time.Second) // the merchant cache counts by the server's clock
	w.browser = browsertest.New(t)
	return w
}

// checkoutTab is one order's checkout in a fresh tab: the third origin's page, the shop's page in it,
// and the hosted page in that.
type checkoutTab struct {
	tab, shop, kassa context.Context
	sessionURL       string
}

// open loads the shop's checkout page for sessionURL inside the third origin's page; with withForm,
// it waits for the hosted page's form.
func (w *world) open(t *testing.T, sessionURL string, withForm bool) *checkoutTab {
	t.Helper()
	tab := browsertest.Tab(t, w.browser)
	w.mu.Lock()
	w.thirdGot = nil
	w.mu.Unlock()
	shopURL := w.shopOrigin + "/checkout?session=" + url.QueryEscape(sessionURL)
	browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(w.thirdOrigin+"/?shop="+url.QueryEscape(shopURL)))
	c := &checkoutTab{tab: tab, shop: browsertest.Frame(t, tab, w.shopOrigin), sessionURL: sessionURL}
	c.kassa = browsertest.Frame(t, tab, sessionURL)
	// The third origin's page hears what is posted to it: a probe from the shop's frame arrives.
	browsertest.Eval[bool](t, c.shop, `window.top.postMessage({probe: location.origin}, '*'), true`)
	w.waitThird(t, 1)
	if withForm {
		browsertest.Step(t, c.kassa, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#card-number")))
	}
	return c
}

// fitted waits until the iframe has grown to its page's height, as hpp.js does on each resize: a click
// computed while the frame is still shorter than its content can miss what it aims at.
func (c *checkoutTab) fitted(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !browsertest.Eval[bool](t, c.kassa, `window.innerHeight >= Math.ceil(document.documentElement.getBoundingClientRect().height)`) {
		if time.Now().After(deadline) {
			t.Fatal("the iframe never grew to its page's height")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pay fills the card form and submits it, once the frame has grown to the page.
func (c *checkoutTab) pay(t *testing.T, number, expiry, cvc string) {
	t.Helper()
	c.fitted(t)
	c.enter(t, number, expiry, cvc)
}

// enter fills the card form and submits it.
func (c *checkoutTab) enter(t *testing.T, number, expiry, cvc string) {
	t.Helper()
	browsertest.Eval[bool](t, c.kassa, `['card-number', 'card-expiry', 'card-cvc', 'card-name'].forEach(id => document.getElementById(id).value = ''), true`)
	browsertest.Step(t, c.kassa, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#card-number"), number),
		chromedp.SendKeys(chromedp.CSS("#card-expiry"), expiry),
		chromedp.SendKeys(chromedp.CSS("#card-cvc"), cvc),
		chromedp.SendKeys(chromedp.CSS("#card-name"), "Ada Lovelace"),
		chromedp.Click(chromedp.CSS("#pay-button")),
	)
}

// message is one message a page received.
type message struct {
	Origin string         `json:"origin"`
	Data   map[string]any `json:"data"`
}

// messages reads what a page's recorder holds.
func messages(t *testing.T, ctx context.Context) []message {
	t.Helper()
	var out []message
	if err := json.Unmarshal([]byte(browsertest.Eval[string](t, ctx, `JSON.stringify(window.__messages || [])`)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// result waits for the shop's page to receive the result message, then checks every message it
// received: from Kassa's origin, with the spec's source; resizes with a height, and exactly one
// result, with exactly the spec's fields. The third origin's page must have received nothing, and
// the iframe must have followed the last resize. It returns the result.
func (w *world) result(t *testing.T, c *checkoutTab) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got []message
	for {
		got = messages(t, c.shop)
		if slices.ContainsFunc(got, func(m message) bool { return m.Data["type"] == "result" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result message within 30 s; received %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // anything posted after the result arrives too
	got = messages(t, c.shop)
	var res map[string]any
	lastHeight := 0.0
	for i, m := range got {
		if m.Origin != w.srv.URL || m.Data["source"] != "service-hosted-payment-page" {
			t.Fatalf("message %d from %s: %v", i, m.Origin, m.Data)
		}
		switch m.Data["type"] {
		case "resize":
			h, ok := m.Data["height"].(float64)
			if !ok || h <= 0 || len(m.Data) != 3 {
				t.Fatalf("resize message %v", m.Data)
			}
			lastHeight = h
		case "result":
			if res != nil {
				t.Fatalf("a second result: %v", m.Data)
			}
			res = m.Data
			for k := range res {
				if !slices.Contains([]string{"source", "type", "outcome", "payment_intent", "attempts", "last_error"}, k) {
					t.Fatalf("result carries %q: %v", k, res)
				}
			}
			if _, ok := res["attempts"].([]any); !ok || !hasKey(res, "last_error") {
				t.Fatalf("result without attempts or last_error: %v", res)
			}
		default:
			t.Fatalf("a message of type %v", m.Data["type"])
		}
	}
	if got[0].Data["type"] != "resize" || lastHeight == 0 {
		t.Fatalf("the first message is not a resize: %v", got)
	}
	if h := browsertest.Eval[string](t, c.shop, `document.querySelector('iframe').style.height`); h != strconv.Itoa(int(lastHeight))+"px" {
		t.Fatalf("iframe height %s after a resize to %v", h, lastHeight)
	}
	if third := w.waitThird(t, 1); len(third) != 1 {
		t.Fatalf("the third origin's page received %v", third)
	}
	return res
}

// waitThird waits until the third origin's page has reported at least n messages since the last
// checkout opened, and returns them.
func (w *world) waitThird(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		got := append([]string(nil), w.thirdGot...)
		w.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the third origin's page reported %d messages, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// attempts renders the result's attempts as "status code" strings.
func attempts(t *testing.T, res map[string]any) []string {
	t.Helper()
	var out []string
	for _, a := range res["attempts"].([]any) {
		m := a.(map[string]any)
		s := m["status"].(string)
		if e, ok := m["error"].(map[string]any); ok {
			s += " " + e["code"].(string)
			if e["message"] == "" {
				t.Fatalf("an attempt's error without a message: %v", m)
			}
		}
		if _, ok := m["created_at"].(float64); !ok {
			t.Fatalf("an attempt without created_at: %v", m)
		}
		out = append(out, s)
	}
	return out
}

func intentOf(res map[string]any) map[string]any {
	pi, _ := res["payment_intent"].(map[string]any)
	return pi
}

// The hosted page in headless Chromium, one checkout per outcome, in the README's shop page embedded
// in a page of a third origin.
func TestHostedPageInBrowser(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	session := func(body map[string]any) string {
		return w.session(t, body).Str("url")
	}
	order := func(extra ...any) map[string]any { return orderOf(2599, extra...) }

	t.Run("completed with automatic capture", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		// The helper made the iframe as the spec asks.
		if attrs := browsertest.Eval[string](t, c.shop, `(f => f.getAttribute('allow') + '|' + f.getAttribute('referrerpolicy'))(document.querySelector('iframe'))`); attrs != "payment; publickey-credentials-get|origin" {
			t.Fatalf("iframe attributes %q", attrs)
		}
		c.pay(t, "4242 4242 4242 4242", "1234", "123")
		res := w.result(t, c)
		if res["outcome"] != "completed" || intentOf(res)["status"] != "succeeded" || intentOf(res)["amount_received"] != 2599.0 ||
			strings.Join(attempts(t, res), ",") != "succeeded" || res["last_error"] != nil {
			t.Fatalf("result %v", res)
		}
		if text := browsertest.Eval[string](t, c.shop, `document.getElementById('outcome').textContent`); !strings.Contains(text, "succeeded") {
			t.Fatalf("the shop's page shows %q", text)
		}
		list := w.m.Do(t, "GET", "/transaction-service/transaction", nil)
		if e := list.Body["entities"].([]any)[0].(map[string]any); e["transaction_source"] != "HPP" || e["transaction_result"] != "APPROVED" {
			t.Fatalf("the gateway's list shows %v", e)
		}
	})

	t.Run("completed with manual capture", func(t *testing.T) {
		c := w.open(t, session(order("capture_method", "manual")), true)
		c.pay(t, "5555555555554444", "0939", "321")
		res := w.result(t, c)
		if res["outcome"] != "completed" || intentOf(res)["status"] != "requires_capture" || intentOf(res)["amount_capturable"] != 2599.0 {
			t.Fatalf("result %v", res)
		}
		cap := w.do(t, "POST", "/v1/payment-intents/"+intentOf(res)["id"].(string)+"/capture", map[string]any{})
		if cap.Str("status") != "succeeded" {
			t.Fatalf("capture after the page: %s", cap.Raw)
		}
	})

	t.Run("a decline, then a success", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		c.pay(t, cardtest.Declined, "1234", "123")
		browsertest.Step(t, c.kassa, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#card-form")))
		waitText(t, c.kassa, "#form-status", "declined")
		if got := messages(t, c.shop); slices.ContainsFunc(got, func(m message) bool { return m.Data["type"] == "result" }) {
			t.Fatal("a decline ended the checkout")
		}
		c.pay(t, cardtest.Visa, "1234", "123")
		res := w.result(t, c)
		if res["outcome"] != "completed" || strings.Join(attempts(t, res), ",") != "failed card_declined,succeeded" ||
			res["last_error"].(map[string]any)["code"] != "card_declined" {
			t.Fatalf("result %v", res)
		}
	})

	t.Run("3-D Secure completed", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		c.pay(t, "4000002500003155", "1234", "123")
		browsertest.Step(t, c.kassa, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#challenge-complete")))
		c.fitted(t)
		browsertest.Step(t, c.kassa, 30*time.Second, chromedp.Click(chromedp.CSS("#challenge-complete")))
		res := w.result(t, c)
		if res["outcome"] != "completed" || intentOf(res)["status"] != "succeeded" || strings.Join(attempts(t, res), ",") != "succeeded" {
			t.Fatalf("result %v", res)
		}
	})

	t.Run("3-D Secure failed, then canceled", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		c.pay(t, "4000002760003184", "1234", "123")
		browsertest.Step(t, c.kassa, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#challenge-fail")))
		c.fitted(t)
		browsertest.Step(t, c.kassa, 30*time.Second, chromedp.Click(chromedp.CSS("#challenge-fail")), chromedp.WaitVisible(chromedp.CSS("#card-form")))
		waitText(t, c.kassa, "#form-status", "uthentication")
		c.fitted(t)
		browsertest.Step(t, c.kassa, 30*time.Second, chromedp.Click(chromedp.CSS("#cancel-button")))
		res := w.result(t, c)
		if res["outcome"] != "canceled" || strings.Join(attempts(t, res), ",") != "failed authentication_failed" ||
			res["last_error"].(map[string]any)["code"] != "authentication_failed" || intentOf(res) == nil ||
			intentOf(res)["last_payment_error"].(map[string]any)["code"] != "authentication_failed" {
			t.Fatalf("result %v", res)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		c.fitted(t)
		browsertest.Step(t, c.kassa, 30*time.Second, chromedp.Click(chromedp.CSS("#cancel-button")))
		res := w.result(t, c)
		if res["outcome"] != "canceled" || len(attempts(t, res)) != 0 || res["last_error"] != nil || hasKey(res, "payment_intent") {
			t.Fatalf("result %v", res)
		}
	})

	t.Run("expired at load", func(t *testing.T) {
		u := session(order())
		w.clock.Advance(time.Hour)
		c := w.open(t, u, false)
		res := w.result(t, c)
		if res["outcome"] != "expired" || len(attempts(t, res)) != 0 {
			t.Fatalf("result %v", res)
		}
		if visible := browsertest.Eval[bool](t, c.kassa, `!document.getElementById('card-form').hidden`); visible {
			t.Fatal("an expired page shows the card form")
		}
	})

	t.Run("expired while open", func(t *testing.T) {
		u := session(order())
		w.clock.Advance(time.Hour - 2*time.Second) // two seconds left when the page loads
		c := w.open(t, u, true)
		res := w.result(t, c)
		if res["outcome"] != "expired" {
			t.Fatalf("result %v", res)
		}
	})

	t.Run("the form's own checks, for keyboard and screen reader", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		browsertest.Step(t, c.kassa, 30*time.Second,
			chromedp.SendKeys(chromedp.CSS("#card-number"), "4242424242424241"), // fails the Luhn check
			chromedp.SendKeys(chromedp.CSS("#card-expiry"), "0120"),             // January 2020
			chromedp.SendKeys(chromedp.CSS("#card-cvc"), "12"),
			chromedp.Click(chromedp.CSS("#pay-button")),
		)
		state := browsertest.Eval[string](t, c.kassa, `JSON.stringify({
			number: document.getElementById('card-number').value, brand: document.getElementById('card-brand').textContent,
			invalid: [...document.querySelectorAll('[aria-invalid=true]')].map(e => e.id),
			errors: [...document.querySelectorAll('.field-error')].map(e => e.textContent).filter(Boolean),
			focus: document.activeElement.id, alert: document.querySelector('[role=alert]').textContent,
			labels: [...document.querySelectorAll('input')].every(i => i.labels.length === 1)})`)
		want := `{"number":"4242 4242 4242 4241","brand":"Visa","invalid":["card-number","card-expiry","card-cvc","card-name"],` +
			`"errors":["The card number is not valid.","The card has expired.","The security code is 3 digits.","Enter the name on the card."],` +
			`"focus":"card-number","alert":"Check the highlighted fields.","labels":true}`
		if state != want {
			t.Fatalf("after a bad submission:\n got %s\nwant %s", state, want)
		}
		// American Express: its own grouping and a four-digit CVC; a short number says so.
		browsertest.Eval[bool](t, c.kassa, `['card-number', 'card-cvc'].forEach(id => document.getElementById(id).value = ''), true`)
		browsertest.Step(t, c.kassa, 30*time.Second,
			chromedp.SendKeys(chromedp.CSS("#card-number"), "37828224631"), chromedp.SendKeys(chromedp.CSS("#card-cvc"), "123"),
			chromedp.Click(chromedp.CSS("#pay-button")))
		amex := browsertest.Eval[string](t, c.kassa, `[document.getElementById('card-number').value, document.getElementById('card-brand').textContent,
			document.getElementById('card-number-error').textContent, document.getElementById('card-cvc-error').textContent].join('|')`)
		if amex != "3782 822463 1|American Express|The card number is too short.|The security code is 4 digits." {
			t.Fatalf("amex: %q", amex)
		}
		if got := messages(t, c.shop); slices.ContainsFunc(got, func(m message) bool { return m.Data["type"] == "result" }) {
			t.Fatal("a form that did not pass its checks ended the checkout")
		}
	})

	t.Run("light and dark", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		bg := func(scheme string) string {
			browsertest.ColorScheme(t, c.kassa, scheme)
			return browsertest.Eval[string](t, c.kassa, `getComputedStyle(document.body).backgroundColor`)
		}
		if light, dark := bg("light"), bg("dark"); light != "rgb(255, 255, 255)" || dark != "rgb(13, 17, 23)" {
			t.Fatalf("background light %s, dark %s", light, dark)
		}
	})

	// The hosted page, opened directly, offers a way back to the shop after success or cancel (a
	// return_url on the session), and shows one success message.
	thanks := w.shopOrigin + "/thanks?order=1002"
	direct := func(t *testing.T, sessionURL string) context.Context {
		tab := browsertest.Tab(t, w.browser)
		browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(sessionURL), chromedp.WaitVisible(chromedp.CSS("#card-number")))
		return tab
	}
	wayBack := func(t *testing.T, tab context.Context) {
		t.Helper()
		browsertest.Step(t, tab, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#return-link")))
		if href := browsertest.Eval[string](t, tab, `document.getElementById('return-link').href`); href != thanks {
			t.Fatalf("the way back leads to %s, want %s", href, thanks)
		}
		browsertest.Step(t, tab, 30*time.Second, chromedp.Click(chromedp.CSS("#return-link")))
		deadline := time.Now().Add(15 * time.Second)
		for browsertest.Eval[string](t, tab, `location.href`) != thanks {
			if time.Now().After(deadline) {
				t.Fatalf("following the way back reached %s", browsertest.Eval[string](t, tab, `location.href`))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("opened on its own: one success message, the receipt, then the way back", func(t *testing.T) {
		tab := direct(t, session(order("return_url", thanks)))
		(&checkoutTab{kassa: tab}).enter(t, cardtest.Visa, "1234", "123")
		waitText(t, tab, "#receipt-card", "ending in 4242") // the page loaded again, paid
		waitText(t, tab, "#outcome", "Thank you")
		// Every visible word of the page: the success is said once.
		if text := browsertest.Eval[string](t, tab, `document.body.innerText`); strings.Count(strings.ToLower(text), "complete") != 1 ||
			strings.Contains(text, "declined") {
			t.Fatalf("the page after the payment says:\n%s", text)
		}
		wayBack(t, tab)
	})

	t.Run("opened on its own: canceled, then the way back", func(t *testing.T) {
		tab := direct(t, session(order("return_url", thanks)))
		browsertest.Step(t, tab, 30*time.Second, chromedp.Click(chromedp.CSS("#cancel-button")))
		waitText(t, tab, "#outcome", "canceled")
		wayBack(t, tab)
	})

	t.Run("in the shop's frame, the shop's page takes over: no way back in the frame", func(t *testing.T) {
		c := w.open(t, session(order("return_url", thanks)), true)
		c.pay(t, cardtest.Visa, "1234", "123")
		if res := w.result(t, c); res["outcome"] != "completed" {
			t.Fatalf("result %v", res)
		}
		waitText(t, c.kassa, "#outcome", "Thank you")
		if shown := browsertest.Eval[bool](t, c.kassa, `!document.getElementById('return').hidden`); shown {
			t.Fatal("the framed page offers a way back of its own")
		}
	})

	// The hosted page styles a decline as an error (role=alert, error colours in light and dark).
	t.Run("a decline is an error, in light and in dark", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		c.pay(t, cardtest.Declined, "1234", "123")
		waitText(t, c.kassa, "#form-status", "declined")
		for scheme, want := range map[string]string{"light": "rgb(179, 38, 30)", "dark": "rgb(255, 138, 128)"} {
			browsertest.ColorScheme(t, c.kassa, scheme)
			got := browsertest.Eval[string](t, c.kassa, `(e => [e.getAttribute('role'), getComputedStyle(e).color, getComputedStyle(e).borderLeftColor,
				getComputedStyle(document.body).color, document.getElementById('outcome').innerText].join('|'))(document.getElementById('form-status'))`)
			parts := strings.Split(got, "|")
			if parts[0] != "alert" || parts[1] != want || parts[2] != want || parts[3] == want || parts[4] != "" {
				t.Fatalf("%s: the decline is %q; want an alert in %s", scheme, got, want)
			}
		}
	})

	// The hosted page follows the appearance (light, dark, auto) set on the session, so that an
	// embedded form can match the shop.
	t.Run("appearance light, dark and auto", func(t *testing.T) {
		const white, dark = "rgb(255, 255, 255)", "rgb(13, 17, 23)"
		for _, tc := range []struct{ appearance, onLight, onDark string }{
			{"light", white, white}, {"dark", dark, dark}, {"auto", white, dark},
		} {
			c := w.open(t, session(order("appearance", tc.appearance)), true)
			for scheme, want := range map[string]string{"light": tc.onLight, "dark": tc.onDark} {
				browsertest.ColorScheme(t, c.kassa, scheme)
				if bg := browsertest.Eval[string](t, c.kassa, `getComputedStyle(document.body).backgroundColor`); bg != want {
					t.Errorf("appearance %s, system %s: background %s, want %s", tc.appearance, scheme, bg, want)
				}
			}
		}
	})

	t.Run("hpp.js ignores messages that are not the page's", func(t *testing.T) {
		c := w.open(t, session(order()), true)
		// From the shop's own origin, and from Kassa's origin without the spec's source: both ignored.
		browsertest.Eval[bool](t, c.shop, `window.postMessage({source: 'service-hosted-payment-page', type: 'result', outcome: 'completed'}, '*'),
			window.postMessage({source: 'service-hosted-payment-page', type: 'resize', height: 5}, '*'), true`)
		browsertest.Eval[bool](t, c.kassa, `parent.postMessage({source: 'someone-else', type: 'result', outcome: 'completed'}, '*'),
			parent.postMessage({source: 'someone-else', type: 'resize', height: 5}, '*'), true`)
		time.Sleep(300 * time.Millisecond)
		got := browsertest.Eval[string](t, c.shop, `document.getElementById('outcome').textContent + '|' + (document.querySelector('iframe').style.height !== '5px')`)
		if got != "|true" {
			t.Fatalf("the shop's page acted on a forged message: %q", got)
		}
	})

	t.Run("error", func(t *testing.T) {
		c := w.open(t, w.srv.URL+"/hpp/"+strings.Repeat("Z", 43), false)
		res := w.result(t, c)
		if res["outcome"] != "error" || res["last_error"].(map[string]any)["code"] != "session_not_found" || hasKey(res, "payment_intent") {
			t.Fatalf("result %v", res)
		}
		if n := browsertest.Eval[int](t, c.kassa, `document.querySelectorAll('#card-form').length`); n != 0 {
			t.Fatal("the error page shows a card form")
		}
	})
}

// waitText waits until the element's text contains want; the element may be missing meanwhile (the
// page loading again, as it does once paid to show the receipt).
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := browsertest.Eval[string](t, ctx, `(document.querySelector('`+sel+`') || {}).textContent || ''`)
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s says %q; want it to mention %q", sel, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Every state of the hosted page passes axe-core, in light and in dark, at desktop width and at
// 375 px, checked where a customer meets it: in the iframe of the README's shop page, the tab at
// each width. The states: the empty form, the form after a bad submission (its field errors), a
// decline, the issuer's challenge, the payment done, an expired page, and a page that does not exist.
// The shop is on the simulator, so every state but the last carries the test-mode badge.
func TestHostedPageAccessible(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// open loads the shop's page for a session in a tab of its own, with the hosted page's frame in it.
	open := func(sessionURL string) *checkoutTab {
		tab := browsertest.Tab(t, w.browser)
		browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(w.shopOrigin+"/checkout?session="+url.QueryEscape(sessionURL)))
		return &checkoutTab{tab: tab, kassa: browsertest.Frame(t, tab, sessionURL), sessionURL: sessionURL}
	}
	check := func(c *checkoutTab, name string) {
		t.Helper()
		browsertest.CheckAccessibilityEverywhere(t, c.tab, "hosted page, "+name, c.kassa)
	}
	session := func() string { return w.session(t, map[string]any{"amount": 2599, "currency": "cad"}).Str("url") }

	c := open(session())
	browsertest.Step(t, c.kassa, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#card-number")))
	// On a phone the frame is as narrow as the phone (the shop's page has its meta viewport), once
	// the shop's page has laid out again at the new width: the frame follows its parent, which on a
	// busy machine takes a moment after the tab's size changed.
	browsertest.Viewport(t, c.tab, browsertest.Phone)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		width := browsertest.Eval[int](t, c.kassa, `innerWidth`)
		if width <= 375 && width >= 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hosted page is %d px wide in a 375 px phone", width)
		}
	}
	check(c, "card form")
	// The shop is on the simulator: the form says "Test mode", whole within the phone's frame.
	if got := browsertest.Eval[string](t, c.kassa, `(() => { const b = document.getElementById('test-mode');
		if (!b) return 'none'; const r = b.getBoundingClientRect();
		return r.width > 0 && r.left >= 0 && r.right <= innerWidth ? b.textContent : 'drawn at ' + JSON.stringify(r); })()`); !strings.HasPrefix(got, "Test mode") {
		t.Errorf("the test-mode badge of the card form at 375 px: %s", got)
	}
	c.pay(t, "4242424242424241", "", "")
	waitText(t, c.kassa, "#form-status", "highlighted")
	check(c, "field errors")
	c.pay(t, cardtest.Declined, "1234", "123")
	waitText(t, c.kassa, "#form-status", "declined")
	check(c, "declined")
	c.pay(t, "4000002500003155", "1234", "123")
	browsertest.Step(t, c.kassa, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#challenge-complete")))
	check(c, "3-D Secure challenge")
	c.fitted(t)
	browsertest.Step(t, c.kassa, 30*time.Second, chromedp.Click(chromedp.CSS("#challenge-complete")))
	waitText(t, c.kassa, "#outcome", "Thank you")
	check(c, "payment done")

	expired := session()
	w.clock.Advance(time.Hour)
	c = open(expired)
	waitText(t, c.kassa, "#outcome", "expired")
	check(c, "expired")

	c = open(w.srv.URL + "/hpp/" + strings.Repeat("Z", 43))
	browsertest.Step(t, c.kassa, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("[role=alert]")))
	check(c, "no such session")
}

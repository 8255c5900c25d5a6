package payment_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/readmetest"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/web"
)

// The README's form, served by a shop on one origin, loads the script from Kassa on another (pinned
// with subresource integrity), encrypts a typed card in headless Chromium, and posts only the token;
// the token then pays a sale.
func TestReadmeCardFormInBrowser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	// The browser stamps the token with its own clock; the server must agree on the time.
	f.clock.Advance(time.Since(f.clock.Now()))
	key, err := f.srv.CardEncryption().Current(context.Background(), f.m.ID)
	if err != nil {
		t.Fatal(err)
	}
	page := strings.NewReplacer("SCRIPT_URL", f.srv.URL+web.CardEncryption.Path(), "SCRIPT_INTEGRITY", web.CardEncryption.Integrity,
		"PUBLIC_ENCRYPTION_KEY", key.Encoded()).Replace(readmetest.Block(t, "<!-- card-encryption-form", "html"))
	var mu sync.Mutex
	var posted url.Values
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/pay" {
			r.ParseForm()
			mu.Lock()
			posted = r.PostForm
			mu.Unlock()
			w.Write([]byte(`<!doctype html><p id="done">thank you</p>`))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!doctype html><html><body>" + page + "</body></html>"))
	}))
	defer shop.Close()
	// Kassa listens on 127.0.0.1; the shop is addressed as localhost: another origin.
	shopURL := strings.Replace(shop.URL, "127.0.0.1", "localhost", 1)

	ctx := browsertest.New(t)
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Navigate(shopURL),
		chromedp.WaitVisible(chromedp.CSS("#card-number")),
	)
	if typ := browsertest.Eval[string](t, ctx, `typeof CardEncryption`); typ != "function" {
		t.Fatalf("the script did not load on the shop's page (typeof CardEncryption = %s)", typ)
	}
	// Numbers are refused: every card argument must be a string of digits.
	got := browsertest.Eval[string](t, ctx, `(() => { try { CardEncryption('`+key.Encoded()+`', 4242424242424242, '08', '30', '123'); return 'no error' }
		catch (e) { return e.name + ': ' + e.message } })()`)
	if got != "TypeError: card_number must be a string of digits" {
		t.Fatalf("a number as card_number: %s", got)
	}
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#card-number"), "4242 4242 4242 4242"),
		chromedp.SendKeys(chromedp.CSS("#card-month"), "08"),
		chromedp.SendKeys(chromedp.CSS("#card-year"), "30"),
		chromedp.SendKeys(chromedp.CSS("#card-cvv"), "123"),
		chromedp.Click(chromedp.CSS("button")),
		chromedp.WaitVisible(chromedp.CSS("#done")),
	)
	mu.Lock()
	form := posted
	mu.Unlock()
	token := form.Get("card_token")
	if len(form) != 1 || !strings.HasPrefix(token, "ct1."+key.ID+".") {
		t.Fatalf("the shop received %v; want only a card token", form)
	}
	cardtest.Check(t, "what the shop received", form.Encode())
	r := post(t, f.m, "sale", map[string]any{"amount": "19.99", "currency": "CAD", "token": token, "email": "ada@example.com"})
	if r.Status != 200 || r.Str("transaction_result") != "APPROVED" || r.Str("card_suffix") != "4242" {
		t.Fatalf("sale with the browser's token: %d %s", r.Status, r.Raw)
	}
}

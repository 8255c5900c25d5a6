package hostedpage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A session may name where its page, opened on its own, leads back to (return_url: https, or http on
// a loopback address; at one of the merchant's allowed origins when it has set them) and the page's
// colours (appearance: light, dark or auto, the default); each shows in the session and on its page,
// and a bad value is a 400 naming its field.
func TestSessionReturnURLAndAppearance(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		order := func(extra ...any) map[string]any { return orderOf(1000, extra...) }
		plain := s.session(t, order())
		if !strings.Contains(string(plain.Raw), `"return_url":null`) || plain.Str("appearance") != "auto" {
			t.Fatalf("a session without them: %s", plain.Raw)
		}
		body := mustPage(t, plain.Str("url"))
		if !strings.Contains(body, `<meta name="color-scheme" content="light dark">`) || !strings.Contains(body, "@media (prefers-color-scheme: dark)") ||
			strings.Contains(body, `id="return-link"`) {
			t.Fatalf("the page of a session without them:\n%s", body)
		}

		const back = "https://shop.example/orders/1001?paid=1"
		r := s.session(t, order("return_url", back, "appearance", "dark"))
		if r.Str("return_url") != back || r.Str("appearance") != "dark" {
			t.Fatalf("session: %s", r.Raw)
		}
		body = mustPage(t, r.Str("url"))
		if !strings.Contains(body, `<meta name="color-scheme" content="dark">`) || strings.Contains(body, "prefers-color-scheme") ||
			!strings.Contains(body, `<a id="return-link" href="https://shop.example/orders/1001?paid=1">Return to `) {
			t.Fatalf("the page of a dark session with a return_url:\n%s", body)
		}
		if body = mustPage(t, s.session(t, order("appearance", "light")).Str("url")); !strings.Contains(body, `<meta name="color-scheme" content="light">`) ||
			strings.Contains(body, "#0d1117") {
			t.Fatalf("the page of a light session:\n%s", body)
		}
		for _, ok := range []string{"http://localhost:3000/done", "http://127.0.0.1/done", "http://[::1]:8000/", "https://shop.example"} {
			if r := s.do(t, "POST", sessionsPath, order("return_url", ok)); r.Status != 200 || r.Str("return_url") != ok {
				t.Errorf("return_url %q: %d %s", ok, r.Status, r.Raw)
			}
		}

		bad := []struct {
			body  map[string]any
			field string
		}{
			{order("appearance", "blue"), "appearance"},
			{order("appearance", "Dark"), "appearance"},
			{order("appearance", nil), "appearance"},
			{order("appearance", 1), "appearance"},
			{order("return_url", "http://shop.example/done"), "return_url"},
			{order("return_url", "ftp://shop.example/done"), "return_url"},
			{order("return_url", "javascript:alert(1)"), "return_url"},
			{order("return_url", "/orders/1001"), "return_url"},
			{order("return_url", "https://user:pass@shop.example/"), "return_url"},
			{order("return_url", "https://shop.example/"+strings.Repeat("a", 2048)), "return_url"},
			{order("return_url", ""), "return_url"},
			{order("return_url", 5), "return_url"},
		}
		for _, tc := range bad {
			if r := s.do(t, "POST", sessionsPath, tc.body); r.Status != 400 || r.Str("field") != tc.field {
				t.Errorf("%v: %d %s; want 400 naming %s", tc.body, r.Status, r.Raw, tc.field)
			}
		}

		// A merchant that has named the origins that may embed its page has named its sites: a
		// return_url leads only there.
		s.m.Update(t, merchant.Update{AllowedOrigins: []string{"https://shop.example"}})
		s.clock.Advance(time.Second) // the merchant cache counts by the server's clock
		if r := s.do(t, "POST", sessionsPath, order("return_url", "https://elsewhere.example/done")); r.Status != 400 || r.Str("field") != "return_url" ||
			!strings.Contains(r.Str("message"), "https://shop.example") {
			t.Errorf("a return_url outside the allowed origins: %d %s", r.Status, r.Raw)
		}
		if r := s.do(t, "POST", sessionsPath, order("return_url", back)); r.Status != 200 {
			t.Errorf("a return_url at an allowed origin: %d %s", r.Status, r.Raw)
		}
	})
}

// orderOf is a session's body for amount (in cents of CAD), with the fields extra names (name, value,
// name, value…).
func orderOf(amount int, extra ...any) map[string]any {
	b := map[string]any{"amount": amount, "currency": "cad"}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

package dashboard_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Whatever a browser sends in the dashboard's forms — e-mails and roles that are not, bytes no
// database keeps, links that were never issued, invoice lines of any text — is answered as a page
// (or the invoice form's totals), never a 5xx.
func FuzzForms(f *testing.F) {
	f.Add("new@maple.example", "sales", "GEZDGNBVGY3TQOJQ")
	f.Add("a\x00b@maple.example", "own\xffer", "\x00")
	f.Add("Name <x@maple.example>", "", "%zz")
	s := newShop(f, storetest.SQLite(f), server.Config{})
	owner := s.browser(f)
	csrf := owner.signIn("owner@maple.example")
	anon := s.browser(f)
	f.Fuzz(func(t *testing.T, email, role, token string) {
		owner.t, anon.t = t, t
		invoice := readmeForm(csrf, "FUZZKEY")
		invoice.Set("customer_lookup_id", email)
		invoice.Set("items[1].description", role)
		invoice.Set("items[1].unit_price", token)
		invoice.Set("items[2].quantity", role)
		invoice.Set("tax_rate", token)
		for _, c := range []struct {
			b    *browser
			path string
			form url.Values
		}{
			{owner, "/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {email}, "role": {role}}},
			{owner, "/dashboard/staff/" + url.PathEscape(token) + "/role", url.Values{"csrf_token": {csrf}, "role": {role}}},
			{anon, "/dashboard/forgot", url.Values{"email": {email}}},
			{anon, "/dashboard/password", url.Values{"token": {token}, "password": {role}, "confirm": {role}}},
			{anon, "/dashboard/sign-in", url.Values{"email": {email}, "password": {role}}},
			{owner, "/dashboard/invoices/totals", invoice},
			{owner, "/dashboard/invoices/new", invoice},
		} {
			if resp, body := c.b.post(c.path, c.form); resp.StatusCode >= http.StatusInternalServerError {
				t.Fatalf("POST %s %v: %d\n%s", c.path, c.form, resp.StatusCode, body)
			}
		}
		if resp, body := anon.get("/dashboard/password?token=" + url.QueryEscape(token)); resp.StatusCode >= http.StatusInternalServerError {
			t.Fatalf("GET the link %q: %d\n%s", token, resp.StatusCode, body)
		}
	})
}

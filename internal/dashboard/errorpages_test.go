package dashboard_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// wantNotFoundPage checks that an answer is the dashboard's HTML 404 page, with the navigation when
// signedIn and without it otherwise.
func wantNotFoundPage(t *testing.T, what string, resp *http.Response, body string, signedIn bool) {
	t.Helper()
	wantStatus(t, what, resp, body, http.StatusNotFound)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("%s: Content-Type %q, want text/html", what, ct)
	}
	for _, want := range []string{"<h1>Page not found</h1>", `<a href="/dashboard">Back to the overview</a>`} {
		if !strings.Contains(body, want) {
			t.Errorf("%s: the page lacks %q:\n%s", what, want, body)
		}
	}
	if nav := strings.Contains(body, "Sign out") && strings.Contains(body, `href="/dashboard/staff"`); nav != signedIn {
		t.Errorf("%s: navigation shown %v, want %v:\n%s", what, nav, signedIn, body)
	}
	if signedIn {
		return
	}
	if strings.Contains(body, "Maple") || strings.Contains(body, "csrf_token") {
		t.Errorf("%s: the signed-out page shows the merchant or a session:\n%s", what, body)
	}
}

// An unknown path under /dashboard is the dashboard's HTML 404 page, signed in (with the navigation)
// or not (without); another merchant's customer answers the very page of a customer that does not
// exist. The API's unknown paths keep their JSON 404.
func TestNotFoundPage(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		other := s.srv.NewMerchant(t)
		oc, _ := s.api(t, other.ID).customer(map[string]any{"email": "jane@roe.example"}, cardtest.Visa)
		unknown := []string{"/dashboard/nope", "/dashboard/customers/xyz/nonexistent-subpage", "/dashboard/staff/1/2/3/"}

		visitor := s.browser(t)
		for _, p := range unknown {
			resp, body := visitor.get(p)
			wantNotFoundPage(t, "signed out, GET "+p, resp, body, false)
		}

		owner := s.browser(t)
		owner.signIn("owner@maple.example")
		for _, p := range unknown {
			resp, body := owner.get(p)
			wantNotFoundPage(t, "signed in, GET "+p, resp, body, true)
		}
		resp, theirs := owner.get("/dashboard/customers/" + oc)
		wantNotFoundPage(t, "another merchant's customer", resp, theirs, true)
		resp, none := owner.get("/dashboard/customers/cus_none")
		wantNotFoundPage(t, "a customer that does not exist", resp, none, true)
		nonce := regexp.MustCompile(`nonce="[^"]*"`)
		if a, b := nonce.ReplaceAllString(theirs, ""), nonce.ReplaceAllString(none, ""); a != b {
			t.Fatalf("another merchant's customer can be told from a missing one:\n%s\n---\n%s", a, b)
		}

		for _, p := range []string{"/nothing/here", "/dashboardx"} {
			resp, body := owner.get(p)
			if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
				!strings.Contains(body, `"not_found"`) {
				t.Fatalf("the API's GET %s: %d %s %s", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		}
	})
}

// An internal error while a page is made (here the database closed under the server) is the
// dashboard's HTML 500 page, with the request id that finds the error in the log and never the error.
func TestInternalErrorPage(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		owner := s.browser(t)
		owner.signIn("owner@maple.example")
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		resp, body := owner.get("/dashboard/customers")
		wantStatus(t, "customers, the database closed", resp, body, http.StatusInternalServerError)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("Content-Type %q, want text/html", ct)
		}
		id := resp.Header.Get("Request-Id")
		if id == "" || !strings.Contains(body, "<code>"+id+"</code>") || !strings.Contains(body, `<a href="/dashboard">Back to the overview</a>`) {
			t.Fatalf("the 500 page lacks the request id %q or the link back:\n%s", id, body)
		}
		for _, leak := range []string{"sql", "closed", "database", "pool"} {
			if strings.Contains(strings.ToLower(body), leak) {
				t.Errorf("the 500 page says %q:\n%s", leak, body)
			}
		}
	})
}

// A dashboard path asked with a method it does not take is the dashboard's HTML 405 page with the
// router's Allow, signed in (with the navigation) or not: a form posted to a page that is only read,
// a link to an action that only a form posts. The API's paths keep their JSON 405.
func TestNotAllowedPage(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
	owner := s.browser(t)
	csrf := owner.signIn("owner@maple.example")
	visitor := s.browser(t)
	for _, c := range []struct {
		who         *browser
		method, url string
		allow       string
		signedIn    bool
	}{
		{owner, "POST", "/dashboard/activity", "GET, HEAD", true},
		{owner, "GET", "/dashboard/sign-out", "POST", true},
		{owner, "GET", "/dashboard/staff/invite", "POST", true},
		{visitor, "GET", "/dashboard/staff/invite", "POST", false},
	} {
		what := c.method + " " + c.url
		var resp *http.Response
		var body string
		if c.method == "POST" {
			resp, body = c.who.post(c.url, url.Values{"csrf_token": {csrf}})
		} else {
			resp, body = c.who.get(c.url)
		}
		wantStatus(t, what, resp, body, http.StatusMethodNotAllowed)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("%s: Content-Type %q, want text/html", what, ct)
		}
		if got := resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s: Allow %q, want %q", what, got, c.allow)
		}
		if !strings.Contains(body, "<h1>Not available this way</h1>") || !strings.Contains(body, "a "+c.method+" request") ||
			!strings.Contains(body, `<a href="/dashboard">Back to the overview</a>`) {
			t.Errorf("%s: not the 405 page:\n%s", what, body)
		}
		if nav := strings.Contains(body, "Sign out"); nav != c.signedIn {
			t.Errorf("%s: navigation shown %v, want %v", what, nav, c.signedIn)
		}
	}
	req, _ := http.NewRequest("DELETE", s.srv.URL+"/v1/payment-intents", nil)
	resp, body := owner.do(req)
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
		!strings.Contains(body, `"method_not_allowed"`) {
		t.Fatalf("the API's DELETE /v1/payment-intents: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

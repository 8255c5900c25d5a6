package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// chipsOn are the chips of a page's applied filters: what each says, and where its × links.
func chipsOn(body string) map[string]string {
	out := map[string]string{}
	list := regexp.MustCompile(`(?s)<ul class="chips" aria-label="Filters applied">.*?</ul>`).FindString(body)
	for _, m := range regexp.MustCompile(`<li>([^<]*) <a href="([^"]*)">`).FindAllStringSubmatch(list, -1) {
		out[html.UnescapeString(m[1])] = html.UnescapeString(m[2])
	}
	return out
}

// The list pages keep their filter forms behind a collapsed "Filter" disclosure — open when a filter
// is at fault, so that its field shows — and show each filter they apply as a chip whose × links to
// the same list without that filter: every other filter kept, the page cursors and empty fields
// dropped; following it shows the list without the chip. Filters live in the URL.
func TestFilterChips(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
	b := s.browser(t)
	b.signIn("owner@maple.example")
	reporting := s.users[user.Reporting].ID
	for _, tc := range []struct {
		path  string
		chips map[string]string
	}{
		{"/dashboard/transactions?result=APPROVED&last4=4242&from=&order=A+1&after=5", map[string]string{
			"Result: APPROVED":  "/dashboard/transactions?last4=4242&order=A+1",
			"Card last 4: 4242": "/dashboard/transactions?order=A+1&result=APPROVED",
			"Order ID: A 1":     "/dashboard/transactions?last4=4242&result=APPROVED",
		}},
		{"/dashboard/transactions?type=sale", map[string]string{"Type: SALE": "/dashboard/transactions"}},
		{"/dashboard/transactions?from=&to=", nil},
		{"/dashboard/activity?user=" + reporting + "&action=refund", map[string]string{
			"Staff: reporting@maple.example": "/dashboard/activity?action=refund",
			"Action: refund":                 "/dashboard/activity?user=" + reporting,
		}},
		{"/dashboard/customers?q=jane&after=3", map[string]string{"Search: jane": "/dashboard/customers"}},
		{"/dashboard/invoices?status=PAID&q=INV-1", map[string]string{"Search: INV-1": "/dashboard/invoices?status=PAID"}},
		{"/dashboard/invoices?q=INV-1", map[string]string{"Search: INV-1": "/dashboard/invoices"}},
		{"/dashboard/subscriptions?status=ACTIVE", map[string]string{"Status: ACTIVE": "?"}},
		{"/dashboard/payments/intents?status=succeeded", map[string]string{"Status: succeeded": "?"}},
	} {
		resp, body := b.get(tc.path)
		wantStatus(t, tc.path, resp, body, http.StatusOK)
		got := chipsOn(body)
		if len(got) != len(tc.chips) {
			t.Errorf("%s: chips %v, want %v", tc.path, got, tc.chips)
		}
		for label, href := range tc.chips {
			if got[label] != href {
				t.Errorf("%s: the chip %q links to %q, want %q", tc.path, label, got[label], href)
			}
			if !strings.Contains(body, `<span class="visually-hidden">Remove the filter `+html.EscapeString(label)+`</span>`) {
				t.Errorf("%s: the chip %q's link does not say what it removes", tc.path, label)
			}
			if href == "?" {
				href = strings.SplitN(tc.path, "?", 2)[0]
			}
			resp, after := b.get(href)
			wantStatus(t, "the list without "+label, resp, after, http.StatusOK)
			if _, still := chipsOn(after)[label]; still || len(chipsOn(after)) != len(tc.chips)-1 {
				t.Errorf("%s without %q shows the chips %v", tc.path, label, chipsOn(after))
			}
		}
		if strings.Contains(body, `<details class="filter" id="filter" open>`) {
			t.Errorf("%s: the filter form is open", tc.path)
		}
	}
	// A filter at fault opens the form at its field.
	resp, body := b.get("/dashboard/transactions?" + url.Values{"last4": {"12"}}.Encode())
	wantStatus(t, "a bad last 4", resp, body, http.StatusBadRequest)
	if !strings.Contains(body, `<details class="filter" id="filter" open><summary>Filter</summary>`) {
		t.Errorf("a filter at fault does not open the form:\n%s", body)
	}
}

package dashboard_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// emptyState is the empty-state section of a list page whose element id is id, "" when it has none.
func emptyState(body, id string) string {
	return regexp.MustCompile(`(?s)<section class="empty-state" id="` + id + `".*?</section>`).FindString(body)
}

// A new merchant's list pages say what each is for and offer the first action, only to a role that
// may take it: an owner sees each action, reporting (read-only) sees none, and sales staff are offered
// the terminal on the transactions page but not the API, whose credentials only managers hold. A filter
// that excludes everything says so and offers the unfiltered list instead of claiming there is nothing.
func TestListsEmptyStates(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		pages := []struct {
			path, id, heading string
			actions           []string // the hrefs an owner is offered
		}{
			{"/dashboard/customers", "customers-empty", "No customers yet", []string{`href="/dashboard/customers/new"`, `href="/dashboard/terminal"`}},
			{"/dashboard/transactions", "transactions-empty", "No payments yet", []string{`href="/dashboard/terminal"`, `href="/docs/api"`}},
			{"/dashboard/invoices", "invoices-empty", "No invoices yet", []string{`href="/dashboard/invoices/new"`}},
			{"/dashboard/plans", "plans-empty", "No plans yet", []string{`href="/dashboard/plans/new"`}},
			{"/dashboard/subscriptions", "subscriptions-empty", "No subscriptions yet", []string{`href="/dashboard/plans/new"`, `href="/docs/api"`}},
			{"/dashboard/payments/intents", "intents-empty", "No payment intents yet", []string{`href="/dashboard/settings/ecommerce#api-keys-heading"`, `href="/docs/api"`}},
			{webhooksPath, "webhooks-empty", "No endpoints yet", []string{`href="` + webhooksPath + `/new"`}},
		}
		owner := s.browser(t)
		owner.signIn("owner@maple.example")
		reporting := s.browser(t)
		reporting.signIn("reporting@maple.example")
		for _, p := range pages {
			resp, body := owner.get(p.path)
			wantStatus(t, "owner "+p.path, resp, body, http.StatusOK)
			sec := emptyState(body, p.id)
			if !strings.Contains(sec, "<h2 id=\""+p.id+"-heading\">"+p.heading+"</h2>") {
				t.Errorf("owner %s: no empty state headed %q: %s", p.path, p.heading, sec)
			}
			for _, a := range p.actions {
				if !strings.Contains(sec, a) {
					t.Errorf("owner %s: the empty state does not offer %s: %s", p.path, a, sec)
				}
			}
			if p.path == webhooksPath {
				continue // Settings are managers' only: reporting is refused the page itself
			}
			resp, body = reporting.get(p.path)
			wantStatus(t, "reporting "+p.path, resp, body, http.StatusOK)
			sec = emptyState(body, p.id)
			if !strings.Contains(sec, p.heading) {
				t.Errorf("reporting %s: no empty state headed %q: %s", p.path, p.heading, sec)
			}
			if strings.Contains(sec, "<a ") {
				t.Errorf("reporting %s: the empty state offers an action reporting may not take: %s", p.path, sec)
			}
		}

		sales := s.browser(t)
		sales.signIn("sales@maple.example")
		_, body := sales.get("/dashboard/transactions")
		if sec := emptyState(body, "transactions-empty"); !strings.Contains(sec, `href="/dashboard/terminal"`) || strings.Contains(sec, `href="/docs/api"`) {
			t.Errorf("sales: the empty transactions list should offer the terminal and not the API: %s", sec)
		}

		for _, f := range []struct{ path, id string }{{"/dashboard/subscriptions?status=PAUSED", "subscriptions-empty"},
			{"/dashboard/payments/intents?status=succeeded", "intents-empty"}} {
			resp, body := owner.get(f.path)
			wantStatus(t, "filtered "+f.path, resp, body, http.StatusOK)
			if sec := emptyState(body, f.id); !strings.Contains(sec, "Nothing matches these filters") || strings.Contains(sec, " yet<") {
				t.Errorf("%s: a filter that excludes everything should say so: %s", f.path, sec)
			}
		}

		resp, body := owner.get("/dashboard/transactions?result=DECLINED")
		wantStatus(t, "filtered transactions", resp, body, http.StatusOK)
		sec := emptyState(body, "transactions-empty")
		if !strings.Contains(sec, "Nothing matches these filters") || !strings.Contains(sec, `<a class="button primary" href="/dashboard/transactions">Clear filters</a>`) ||
			strings.Contains(sec, "No payments yet") || strings.Contains(sec, `href="/dashboard/terminal"`) {
			t.Errorf("a filter that excludes everything should say so and offer Clear filters: %s", sec)
		}
	})
}

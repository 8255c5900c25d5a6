package dashboard_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

var (
	navLinks    = regexp.MustCompile(`<nav aria-label="Dashboard">.*?</nav>`)
	navHref     = regexp.MustCompile(`href="([^"]+)"`)
	bannerBlock = regexp.MustCompile(`(?s)<section class="test-mode" id="test-mode" aria-label="Test mode">.*?</section>`)
)

// banner is the test-mode banner of a dashboard page, "" when it has none.
func banner(page string) string { return bannerBlock.FindString(page) }

// The test-mode banner: on every page of a merchant on the simulator, saying "Test mode" in words,
// with the link to Settings' processor section for an owner and who can connect an acquirer for
// reporting staff; on no page once the merchant is on a live acquirer account, except the pages
// that show test data (the overview's test view, a test transaction), which say so without
// offering to connect; and on every page again with a sandbox account (an acquirer account marked
// test).
func TestTestModeBanner(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		kind := &processortest.Journal{}
		s := newShop(t, db, server.Config{Connectors: []processor.Kind{kind}})
		ctx := context.Background()
		use := func(config string) {
			t.Helper()
			if err := db.Write(ctx, func(tx *store.Tx) error {
				_, err := s.srv.Accounts().Set(ctx, tx, s.merchantID, "journal", []byte(config))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.srv.Accounts().Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		sale := func() payment.Transaction {
			t.Helper()
			n, _ := card.ParseNumber(cardtest.Visa)
			exp, _ := card.ParseExpiry("12", "40")
			cad, _ := money.Lookup("CAD")
			tr, err := s.srv.Ledger().Charge(ctx, payment.Charge{Actor: payment.Actor{MerchantID: s.merchantID, ClientID: "dashboard/" + s.users[user.Owner].ID},
				Kind: payment.KindSale, Amount: 1500, Currency: cad, Card: n, Expiry: exp, CVV: "123", Source: payment.SourceEcommerce})
			if err != nil || tr.Status != payment.StatusApproved {
				t.Fatalf("the sale: %+v, %v", tr, err)
			}
			return tr
		}

		owner := s.browser(t)
		owner.signIn("owner@maple.example")
		_, home := owner.get("/dashboard")
		var pages []string
		for _, m := range navHref.FindAllStringSubmatch(navLinks.FindString(home), -1) {
			pages = append(pages, m[1])
		}
		if len(pages) != 13 {
			t.Fatalf("the owner's navigation links to %q", pages)
		}
		everyPage := func(what string, check func(path, banner string)) {
			t.Helper()
			for _, path := range pages {
				resp, body := owner.get(path)
				wantStatus(t, what+": "+path, resp, body, http.StatusOK)
				check(path, banner(body))
			}
		}

		// The simulator: every page, with the way to a real processor.
		everyPage("on the simulator", func(path, b string) {
			if !strings.Contains(b, "<strong>Test mode</strong> — payments here move no money.") ||
				!strings.Contains(b, `<a href="/dashboard/settings/ecommerce#processor">Connect an acquirer</a>`) {
				t.Errorf("on the simulator, %s's banner is %q", path, b)
			}
		})
		_, settings := owner.get("/dashboard/settings/ecommerce")
		if !strings.Contains(settings, `id="processor"`) || !strings.Contains(settings, "kassa merchant update --processor") {
			t.Errorf("the processor section does not say how to connect an acquirer:\n%s", settings)
		}
		reporting := s.browser(t)
		reporting.signIn("reporting@maple.example")
		_, body := reporting.get("/dashboard/activity")
		if b := banner(body); !strings.Contains(b, "<strong>Test mode</strong>") || !strings.Contains(b, "An owner or admin can connect an acquirer") ||
			strings.Contains(b, "<a ") {
			t.Errorf("reporting's banner on the simulator: %q", b)
		}
		testSale := sale()

		// A live acquirer account: no banner but where the data shown is test data.
		use(`{"name":"live","test":false}`)
		liveSale := sale()
		if liveSale.TestMode || !testSale.TestMode {
			t.Fatalf("test_mode: the live sale's %v, the simulator's %v", liveSale.TestMode, testSale.TestMode)
		}
		everyPage("on a live account", func(path, b string) {
			if b != "" {
				t.Errorf("on a live account, %s has the banner %q", path, b)
			}
		})
		for path, want := range map[string]bool{"/dashboard?mode=test": true, "/dashboard?mode=live": false,
			"/dashboard/transactions/" + testSale.TransactionID: true, "/dashboard/transactions/" + liveSale.TransactionID: false} {
			resp, body := owner.get(path)
			wantStatus(t, path, resp, body, http.StatusOK)
			b := banner(body)
			if got := strings.Contains(b, "<strong>Test mode</strong> — this page shows test payments, which moved no money."); got != want {
				t.Errorf("on a live account, %s's banner is %q; want one: %v", path, b, want)
			}
			if strings.Contains(b, "Connect an acquirer") {
				t.Errorf("on a live account, %s offers to connect one: %q", path, b)
			}
		}
		if _, body := reporting.get("/dashboard"); banner(body) != "" {
			t.Errorf("on a live account, reporting's home has the banner %q", banner(body))
		}

		// A sandbox: an acquirer's account marked test moves no money either.
		use(`{"name":"sandbox","test":true}`)
		everyPage("on a sandbox account", func(path, b string) {
			if !strings.Contains(b, "<strong>Test mode</strong> — payments here move no money.") {
				t.Errorf("on a sandbox account, %s's banner is %q", path, b)
			}
		})
	})
}

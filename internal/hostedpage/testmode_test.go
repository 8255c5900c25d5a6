package hostedpage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// testBadge is the hosted page's test-mode badge as the page shows it.
const testBadge = `<p class="test-mode" id="test-mode"><strong>Test mode</strong> — a test payment page: no money moves.</p>`

// The hosted page says "Test mode" when its payment moves no money: before payment, when the
// merchant's new payments go to the simulator or to an acquirer account marked test; once paid,
// when its charge's test_mode says so, whatever the merchant is on by then. A session of a merchant
// on a live acquirer account carries no badge, nor does its page once paid live, even after the
// merchant went back to the simulator.
func TestHostedPageTestBadge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShopOn(t, db, server.Config{Connectors: []processor.Kind{&processortest.Journal{}}})
		ctx := context.Background()
		use := func(kind, config string) {
			t.Helper()
			if err := db.Write(ctx, func(tx *store.Tx) error {
				_, err := s.srv.Accounts().Set(ctx, tx, s.m.ID, kind, []byte(config))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.srv.Accounts().Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		badge := func(what, u string, want bool) {
			t.Helper()
			body := mustPage(t, u)
			if strings.Contains(body, testBadge) != want || strings.Count(body, `id="test-mode"`) > 1 {
				t.Errorf("%s: the test-mode badge shown %v, want %v:\n%s", what, !want, want, body)
			}
		}
		pay := func(u string) {
			t.Helper()
			r := s.srv.Do(t, "POST", strings.Replace(u, s.srv.URL, "", 1)+"/pay",
				map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040, "cvc": "123"}})
			if r.Status != 200 || r.Str("outcome") != "completed" {
				t.Fatalf("pay: %d %s", r.Status, r.Raw)
			}
		}
		session := func() string {
			return s.session(t, map[string]any{"amount": 1500, "currency": "cad"}).Str("url")
		}

		onSimulator := session()
		badge("open, on the simulator", onSimulator, true)
		pay(onSimulator)
		badge("paid on the simulator", onSimulator, true)

		use("journal", `{"name":"live","test":false}`)
		live := session()
		badge("open, on a live account", live, false)
		badge("paid on the simulator, the merchant live since", onSimulator, true)
		pay(live)
		badge("paid on a live account", live, false)

		use("journal", `{"name":"sandbox","test":true}`)
		badge("open, on a sandbox account", session(), true)
		use("simulator", `{}`)
		badge("paid on a live account, the merchant on the simulator since", live, false)
		badge("open, back on the simulator", session(), true)
	})
}

package checkout_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A partner's key acts for a merchant only within the scopes the merchant approved: the payments API
// needs ecom. A partner approved only for invoice gets a 403 payments_not_approved on every v1 route,
// and changes nothing; once the merchant also approves ecom, the routes open.
func TestPartnerKeysNeedEcom(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := start(t, db, server.Config{Now: clk.Now})
		merchant := newAccount(t, srv)
		p := srv.NewPartner(t)
		key := createKey(t, srv, p.AccountID, checkout.AllPermissions)
		as := []string{checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, merchant.id}
		if tok := srv.PartnerTokens(t, p, merchant.m.ID, auth.ScopeInvoice); tok.Str("scope") != "invoice" {
			t.Fatalf("the approval: %s", tok.Raw)
		}
		pi := merchant.intent(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("id")
		pm := merchant.method(t, "4242424242424242")
		ids := map[string]string{"/v1/payment-intents/": pi, "/v1/payment-methods/": pm, "/v1/api-keys/": key.ID}
		n := 0
		for _, r := range srv.Routes() {
			if !strings.HasPrefix(r.Pattern, "/v1/") {
				continue
			}
			path := r.Pattern
			for prefix, id := range ids {
				if strings.HasPrefix(path, prefix) {
					path = strings.Replace(path, "{id}", id, 1)
				}
			}
			var body any
			if r.Method != "GET" && r.Method != "DELETE" {
				body = map[string]any{"amount": 2000, "currency": "cad", "payment_method": pm}
			}
			t.Run(r.Method+" "+r.Pattern, func(t *testing.T) {
				resp := srv.Do(t, r.Method, path, body, as...)
				wantError(t, resp, http.StatusForbidden, "payments_not_approved", "")
				if !strings.Contains(resp.Str("message"), merchant.id) || !strings.Contains(resp.Str("message"), "ecom") {
					t.Fatalf("the 403 does not say what is missing: %s", resp.Raw)
				}
			})
			n++
		}
		if n < 10 {
			t.Fatalf("only %d v1 routes walked", n)
		}
		if got := merchant.ok(t, "GET", "/v1/payment-intents/"+pi, nil); got.Str("status") != "requires_payment_method" || got.Str("description") != "" {
			t.Fatalf("a refused partner changed the intent: %s", got.Raw)
		}
		if c := count(t, db, `SELECT COUNT(*) FROM payment_intents WHERE merchant_id = $1`, merchant.m.ID); c != 1 {
			t.Fatalf("%d intents after the refusals, want 1", c)
		}
		if c := count(t, db, `SELECT COUNT(*) FROM checkout_sessions`); c != 0 {
			t.Fatalf("%d hosted-page sessions after the refusals, want 0", c)
		}
		// The partner's own account is unaffected: its keys.
		if r := srv.Do(t, "GET", "/v1/api-keys", nil, checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, p.AccountID); r.Status != 200 {
			t.Fatalf("the partner's own keys: %d %s", r.Status, r.Raw)
		}

		// The merchant approves ecom as well: the union of its approvals is what counts, within the
		// key cache's TTL.
		srv.PartnerTokens(t, p, merchant.m.ID, auth.ScopeEcom)
		clk.Advance(checkout.DefaultKeyCacheTTL)
		if r := srv.Do(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1500, "currency": "cad"}, as...); r.Status != 200 {
			t.Fatalf("with ecom approved: %d %s", r.Status, r.Raw)
		}
	})
}

// Revoking a partner's OAuth client, as "kassa client revoke" does (in the database, applied by no
// node), stops everything the partner holds within one revocation poll, on every node: its access
// tokens and refresh tokens, its grants, and its API keys, for every merchant and for its own account.
// Another partner's access stands. PostgreSQL: two servers over one database; SQLite: one server.
func TestRevokingPartnerClientStopsEverything(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const poll = time.Second
		kek := servertest.NewKEK(t)
		nodes := []*servertest.Server{start(t, db, server.Config{RevocationPoll: poll, KEK: kek})}
		if !db.SingleServer() {
			nodes = append(nodes, start(t, db, server.Config{RevocationPoll: poll, KEK: kek}))
		}
		one := nodes[0]
		a, b := newAccount(t, one), newAccount(t, one)
		p, other := one.NewPartner(t), one.NewPartner(t)
		keys := []checkout.NewKey{createKey(t, one, p.AccountID, checkout.AllPermissions), createKey(t, one, p.AccountID, checkout.PaymentIntentsRead)}
		otherKey := createKey(t, one, other.AccountID, checkout.AllPermissions)
		tokA := one.PartnerTokens(t, p, a.m.ID, auth.ScopeEcom|auth.ScopeInvoice)
		tokB := one.PartnerTokens(t, p, b.m.ID, auth.ScopeEcom)
		one.PartnerTokens(t, other, a.m.ID, auth.ScopeEcom)

		// What the partner holds, checked on a node: true while any of it still works.
		works := func(s *servertest.Server) []string {
			var live []string
			for _, tok := range []servertest.Response{tokA, tokB} {
				if r := s.Do(t, "GET", "/transaction-service/transaction", nil, "Authorization", "Bearer "+tok.Str("access_token")); r.Status != 401 {
					live = append(live, "the token for "+tok.Str("merchant_id"))
				}
			}
			for _, k := range keys {
				for _, acct := range []string{a.id, b.id, p.AccountID} {
					path := "/v1/payment-intents"
					if acct == p.AccountID {
						path = "/v1/api-keys"
					}
					if r := s.Do(t, "GET", path, nil, checkout.HeaderAPIKey, k.Key, checkout.HeaderAccount, acct); r.Status != 401 {
						live = append(live, "key "+k.ID+" for "+acct)
					}
				}
			}
			return live
		}
		for _, s := range nodes {
			if live := works(s); len(live) != 6+2 {
				t.Fatalf("before the revocation only %v work", live)
			}
		}

		revokedAt := time.Now()
		r, err := checkout.RevokeClient(context.Background(), db, p.ClientID, revokedAt)
		if err != nil || r.PartnerID != p.PartnerID || r.Grants != 2 || r.APIKeys != 2 {
			t.Fatalf("RevokeClient: %+v %v", r, err)
		}
		// The refresh tokens stop at once: the client is refused, and its grants are revoked.
		for _, tok := range []servertest.Response{tokA, tokB} {
			form := "grant_type=refresh_token&refresh_token=" + tok.Str("refresh_token") + "&client_id=" + p.ClientID + "&client_secret=" + p.ClientSecret
			if resp := one.Do(t, "POST", "/oauth/token", form, "Content-Type", "application/x-www-form-urlencoded"); resp.Status == 200 {
				t.Fatalf("a refresh after the revocation: %s", resp.Raw)
			}
		}
		for i, s := range nodes {
			for live := works(s); len(live) > 0; live = works(s) {
				// A poll's period, with room for a poll delayed on a machine busy with the rest of
				// the suite.
				if time.Since(revokedAt) > poll+3*time.Second {
					t.Fatalf("node %d: %v still work %v after the revocation (poll %v)", i+1, live, time.Since(revokedAt), poll)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		t.Logf("everything stopped on %d node(s) %v after the revocation (poll %v)", len(nodes), time.Since(revokedAt).Round(time.Millisecond), poll)

		// Another partner keeps its access to the same merchant.
		for _, s := range nodes {
			if resp := s.Do(t, "GET", "/v1/payment-intents", nil, checkout.HeaderAPIKey, otherKey.Key, checkout.HeaderAccount, a.id); resp.Status != 200 {
				t.Fatalf("another partner's key: %d %s", resp.Status, resp.Raw)
			}
		}
		// The merchants' approvals are gone: a key the operator creates for the partner afterwards works
		// for its own account only.
		fresh := createKey(t, one, p.AccountID, checkout.AllPermissions)
		for _, s := range nodes {
			wantError(t, s.Do(t, "GET", "/v1/payment-intents", nil, checkout.HeaderAPIKey, fresh.Key, checkout.HeaderAccount, a.id), 403, "account_forbidden", "")
			if resp := s.Do(t, "GET", "/v1/api-keys", nil, checkout.HeaderAPIKey, fresh.Key, checkout.HeaderAccount, p.AccountID); resp.Status != 200 {
				t.Fatalf("a new key for the partner's own account: %d %s", resp.Status, resp.Raw)
			}
		}
		if c := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE operation = 'api_key.delete' AND merchant_id = $1 AND detail = $2`,
			p.PartnerID, "client "+p.ClientID+" revoked"); c != 2 {
			t.Fatalf("%d audit records of the keys' deletion, want 2", c)
		}
		if c := count(t, db, `SELECT COUNT(*) FROM oauth_grants WHERE client_id = $1 AND revoked_at IS NULL`, p.ClientID); c != 0 {
			t.Fatalf("%d live grants of the revoked client", c)
		}
	})
}

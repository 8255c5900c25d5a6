package checkout_test

import (
	"context"
	"crypto/sha256"
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

// Requests authenticate with payments-api-key and payments-account: a missing or unknown key is a 401,
// a missing or malformed account a 400 naming the header, a well-formed account the key may not act
// for a 403.
func TestAuthentication(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		for _, tc := range []struct {
			name   string
			hdr    []string
			status int
			code   string
			field  string
		}{
			{"no key", []string{checkout.HeaderAccount, a.id}, 401, "invalid_api_key", ""},
			{"unknown key", []string{checkout.HeaderAPIKey, "kk_NOTAKEYNOTAKEYNOTAKEYNOTAK", checkout.HeaderAccount, a.id}, 401, "invalid_api_key", ""},
			{"a key's id is not the key", []string{checkout.HeaderAPIKey, a.keyID, checkout.HeaderAccount, a.id}, 401, "invalid_api_key", ""},
			{"letter case matters", []string{checkout.HeaderAPIKey, strings.ToLower(a.key), checkout.HeaderAccount, a.id}, 401, "invalid_api_key", ""},
			{"no account", []string{checkout.HeaderAPIKey, a.key}, 400, "invalid_request", checkout.HeaderAccount},
			{"another merchant's account", []string{checkout.HeaderAPIKey, a.key, checkout.HeaderAccount, b.id}, 403, "account_forbidden", ""},
			{"an unknown account", []string{checkout.HeaderAPIKey, a.key, checkout.HeaderAccount, "acct_0000000000"}, 403, "account_forbidden", ""},
			// A Payments-Account of acct_ alone is refused as malformed, as is
			// anything else that is not acct_ and 10 lowercase hex digits.
			{"not an account id", []string{checkout.HeaderAPIKey, a.key, checkout.HeaderAccount, a.m.ID}, 400, "invalid_request", checkout.HeaderAccount},
			{"acct_ alone", []string{checkout.HeaderAPIKey, a.key, checkout.HeaderAccount, "acct_"}, 400, "invalid_request", checkout.HeaderAccount},
			{"upper case", []string{checkout.HeaderAPIKey, a.key, checkout.HeaderAccount, strings.ToUpper(a.id)}, 400, "invalid_request", checkout.HeaderAccount},
			{"an account and more", []string{checkout.HeaderAPIKey, a.key, checkout.HeaderAccount, a.id + "0"}, 400, "invalid_request", checkout.HeaderAccount},
			{"not hex", []string{checkout.HeaderAPIKey, a.key, checkout.HeaderAccount, "acct_000000000g"}, 400, "invalid_request", checkout.HeaderAccount},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := srv.Do(t, "GET", "/v1/payment-intents", nil, tc.hdr...)
				wantError(t, r, tc.status, tc.code, tc.field)
				if tc.status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "ApiKey") {
					t.Fatalf("WWW-Authenticate %q", r.Header.Get("WWW-Authenticate"))
				}
			})
		}
		// A gateway bearer token is not an API key.
		r := srv.Do(t, "GET", "/v1/payment-intents", nil, "Authorization", "Bearer "+a.m.Token, checkout.HeaderAccount, a.id)
		wantError(t, r, 401, "invalid_api_key", "")
		a.ok(t, "GET", "/v1/payment-intents", nil)
	})
}

// Every route needs its permission: a key without it is a 403 naming it, whatever else is wrong with
// the request.
func TestPermissions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		for _, route := range []struct {
			method, path string
			need         checkout.Permissions
			name         string
		}{
			{"GET", "/v1/api-keys", checkout.APIKeysRead, "api_keys:read"},
			{"POST", "/v1/api-keys", checkout.APIKeysWrite, "api_keys:write"},
			{"DELETE", "/v1/api-keys/key_X", checkout.APIKeysWrite, "api_keys:write"},
			{"POST", "/v1/payment-methods", checkout.PaymentMethodsWrite, "payment_methods:write"},
			{"GET", "/v1/payment-methods/pm_X", checkout.PaymentMethodsRead, "payment_methods:read"},
			{"POST", "/v1/payment-intents", checkout.PaymentIntentsWrite, "payment_intents:write"},
			{"GET", "/v1/payment-intents", checkout.PaymentIntentsRead, "payment_intents:read"},
			{"GET", "/v1/payment-intents/pi_X", checkout.PaymentIntentsRead, "payment_intents:read"},
			{"PATCH", "/v1/payment-intents/pi_X", checkout.PaymentIntentsWrite, "payment_intents:write"},
			{"POST", "/v1/payment-intents/pi_X/confirm", checkout.PaymentIntentsWrite, "payment_intents:write"},
			{"POST", "/v1/payment-intents/pi_X/capture", checkout.PaymentIntentsWrite, "payment_intents:write"},
			{"POST", "/v1/payment-intents/pi_X/cancel", checkout.PaymentIntentsWrite, "payment_intents:write"},
		} {
			t.Run(route.method+" "+route.path, func(t *testing.T) {
				lacking := createKey(t, srv, a.id, checkout.AllPermissions&^route.need)
				r := a.do(t, route.method, route.path, map[string]any{}, checkout.HeaderAPIKey, lacking.Key)
				wantError(t, r, 403, "insufficient_permissions", "")
				if !strings.Contains(r.Str("message"), route.name) {
					t.Fatalf("the 403 does not name %s: %s", route.name, r.Raw)
				}
				only := createKey(t, srv, a.id, route.need)
				if r := a.do(t, route.method, route.path, map[string]any{}, checkout.HeaderAPIKey, only.Key); r.Status == 401 || r.Status == 403 {
					t.Fatalf("a key with only %s: %d %s", route.name, r.Status, r.Raw)
				}
			})
		}
	})
}

// GET, POST and DELETE /v1/api-keys manage the account's own keys; keys are stored hashed.
func TestAPIKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		created := a.ok(t, "POST", "/v1/api-keys", map[string]any{"permissions": []string{"payment_intents:read", "payment_methods:read"}})
		secret := created.Str("key")
		if !strings.HasPrefix(secret, "kk_") || len(secret) != 29 || !strings.HasPrefix(created.Str("id"), "key_") ||
			created.Str("account_id") != a.id || created.Str("object") != "api_key" || created.Str("key_hint") != "…"+secret[25:] {
			t.Fatalf("created %s", created.Raw)
		}
		if got := created.Body["permissions"].([]any); len(got) != 2 || got[0] != "payment_intents:read" || got[1] != "payment_methods:read" {
			t.Fatalf("permissions %v", got)
		}
		// The new key works, within its permissions.
		a.ok(t, "GET", "/v1/payment-intents", nil, checkout.HeaderAPIKey, secret)
		wantError(t, a.do(t, "POST", "/v1/payment-intents", map[string]any{}, checkout.HeaderAPIKey, secret), 403, "insufficient_permissions", "")

		// Listed without its secret, newest first; another account's keys are not listed.
		l := a.ok(t, "GET", "/v1/api-keys", nil)
		data := l.Body["data"].([]any)
		if l.Str("object") != "list" || len(data) != 2 || data[0].(map[string]any)["id"] != created.Str("id") ||
			data[1].(map[string]any)["id"] != a.keyID || strings.Contains(string(l.Raw), secret) || strings.Contains(string(l.Raw), `"key"`) {
			t.Fatalf("list %s", l.Raw)
		}

		// Only a hash is stored.
		var rows string
		for _, row := range rowsText(t, db, `SELECT id, key_hash, key_hint, permissions FROM api_keys`) {
			rows += row
		}
		if strings.Contains(rows, secret) || strings.Contains(rows, a.key) || strings.Contains(rows, secret[3:]) {
			t.Fatal("an API key is stored in clear")
		}
		sum := sha256.Sum256([]byte(secret))
		if count(t, db, `SELECT COUNT(*) FROM api_keys WHERE key_hash = $1 AND id = $2`, sum[:], created.Str("id")) != 1 {
			t.Fatal("the key is not stored as its SHA-256")
		}

		for _, tc := range []struct {
			name   string
			body   any
			status int
			code   string
			field  string
		}{
			{"no permissions", map[string]any{}, 400, "invalid_request", "permissions"},
			{"empty permissions", map[string]any{"permissions": []string{}}, 400, "invalid_request", "permissions"},
			{"unknown permission", map[string]any{"permissions": []string{"payment_intents:read", "disputes:write"}}, 400, "invalid_request", "permissions"},
			{"permissions as a string", map[string]any{"permissions": "payment_intents:read"}, 400, "invalid_request", "permissions"},
			{"unknown field", map[string]any{"permissions": []string{"api_keys:read"}, "name": "x"}, 400, "unknown_field", "name"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantError(t, a.do(t, "POST", "/v1/api-keys", tc.body), tc.status, tc.code, tc.field)
			})
		}
		// A key grants only what it holds.
		writer := createKey(t, srv, a.id, checkout.APIKeysWrite|checkout.PaymentIntentsRead)
		r := a.do(t, "POST", "/v1/api-keys", map[string]any{"permissions": []string{"payment_intents:write"}}, checkout.HeaderAPIKey, writer.Key)
		wantError(t, r, 403, "insufficient_permissions", "permissions")
		if !strings.Contains(r.Str("message"), "payment_intents:write") {
			t.Fatalf("the 403 does not name the permission: %s", r.Raw)
		}

		// Another account's key is not found; a deleted key stops working at once.
		wantError(t, b.do(t, "DELETE", "/v1/api-keys/"+created.Str("id"), nil), 404, "not_found", "")
		d := a.ok(t, "DELETE", "/v1/api-keys/"+created.Str("id"), nil)
		if d.Str("id") != created.Str("id") || !d.Bool("deleted") {
			t.Fatalf("delete %s", d.Raw)
		}
		wantError(t, a.do(t, "GET", "/v1/payment-intents", nil, checkout.HeaderAPIKey, secret), 401, "invalid_api_key", "")
		wantError(t, a.do(t, "DELETE", "/v1/api-keys/"+created.Str("id"), nil), 404, "not_found", "")
		if n := len(a.ok(t, "GET", "/v1/api-keys", nil).Body["data"].([]any)); n != 2 { // the first key and writer
			t.Fatalf("%d keys after the delete, want 2", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE resource = $1 AND operation IN ('api_key.create', 'api_key.delete') AND client_id = $2`,
			"api_key/"+created.Str("id"), a.keyID); n != 2 {
			t.Fatalf("%d audit records of the key's creation and deletion, want 2", n)
		}
	})
}

// Replaying another key's Idempotency-Key once handed a key holding only api_keys:write a
// full-permission key. Idempotency records are each key's own: a key of the same account sending the
// same key and body runs as its own request, through its own permission check.
func TestIdempotencyKeysArePerAPIKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		weak := createKey(t, srv, a.id, checkout.APIKeysWrite).Key
		all := map[string]any{"permissions": checkout.AllPermissions.Names()}
		full := a.ok(t, "POST", "/v1/api-keys", all, "Idempotency-Key", "X")
		if !strings.HasPrefix(full.Str("key"), "kk_") {
			t.Fatalf("created %s", full.Raw)
		}
		r := a.do(t, "POST", "/v1/api-keys", all, "Idempotency-Key", "X", checkout.HeaderAPIKey, weak)
		if strings.Contains(string(r.Raw), full.Str("key")) || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("a key holding only api_keys:write got another key's full-permission key: %d %s", r.Status, r.Raw)
		}
		wantError(t, r, 403, "insufficient_permissions", "permissions")
		// Its own request with the same key, within its permissions, is its own.
		own := a.ok(t, "POST", "/v1/api-keys", map[string]any{"permissions": []string{"api_keys:write"}}, "Idempotency-Key", "Y", checkout.HeaderAPIKey, weak)
		if again := a.ok(t, "POST", "/v1/api-keys", map[string]any{"permissions": []string{"api_keys:write"}}, "Idempotency-Key", "Y"); again.Str("id") == own.Str("id") {
			t.Fatal("the full key replayed the weak key's creation")
		}
		if n := count(t, db, `SELECT COUNT(*) FROM api_keys`); n != 5 {
			t.Fatalf("%d keys, want 5: the account's two, X's full key, and each key's own Y", n)
		}
	})
}

// A partner's key acts for the partner's own account (its keys), and for the merchants that authorized
// the partner (their payments) until they revoke it; never for others, and it never manages a
// merchant's keys.
func TestPartnerKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := start(t, db, server.Config{Now: clk.Now})
		ctx := context.Background()
		merchant, other := newAccount(t, srv), newAccount(t, srv)
		var p auth.PartnerCredentials
		err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			p, err = auth.CreatePartner(ctx, tx, auth.NewPartner{Name: "Plugin Co", ImageURL: "https://plugin.example/logo.png",
				CallbackURIs: []string{"https://plugin.example/callback"}}, clk.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		key := createKey(t, srv, p.AccountID, checkout.AllPermissions)
		as := func(account string) []string {
			return []string{checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, account}
		}
		pi := map[string]any{"amount": 1500, "currency": "cad"}

		// For itself: its keys, but no payments.
		if r := srv.Do(t, "GET", "/v1/api-keys", nil, as(p.AccountID)...); r.Status != 200 || len(r.Body["data"].([]any)) != 1 {
			t.Fatalf("partner's own keys: %d %s", r.Status, r.Raw)
		}
		wantError(t, srv.Do(t, "POST", "/v1/payment-intents", pi, as(p.AccountID)...), 403, "merchant_account_required", "")
		wantError(t, srv.Do(t, "POST", "/v1/payment-methods", cardBody("4242424242424242"), as(p.AccountID)...), 403, "merchant_account_required", "")
		// Not for a merchant that has not authorized it.
		wantError(t, srv.Do(t, "GET", "/v1/payment-intents", nil, as(merchant.id)...), 403, "account_forbidden", "")

		err = db.Write(ctx, func(tx *store.Tx) error {
			_, err := auth.Approve(ctx, tx, p.ClientID, merchant.m.ID, auth.ScopeEcom, clk.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// Authorized: the partner pays for the merchant, and the merchant sees the payment.
		created := srv.Do(t, "POST", "/v1/payment-intents", pi, as(merchant.id)...)
		if created.Status != 200 {
			t.Fatalf("partner creates for the merchant: %d %s", created.Status, created.Raw)
		}
		merchant.ok(t, "GET", "/v1/payment-intents/"+created.Str("id"), nil)
		wantError(t, other.do(t, "GET", "/v1/payment-intents/"+created.Str("id"), nil), 404, "not_found", "")
		wantError(t, srv.Do(t, "GET", "/v1/payment-intents", nil, as(other.id)...), 403, "account_forbidden", "")
		// The merchant's keys stay the merchant's.
		wantError(t, srv.Do(t, "GET", "/v1/api-keys", nil, as(merchant.id)...), 403, "account_forbidden", "")
		wantError(t, srv.Do(t, "POST", "/v1/api-keys", map[string]any{"permissions": []string{"payment_intents:read"}}, as(merchant.id)...),
			403, "account_forbidden", "")
		// A merchant's key never acts for a partner.
		wantError(t, srv.Do(t, "GET", "/v1/api-keys", nil, checkout.HeaderAPIKey, merchant.key, checkout.HeaderAccount, p.AccountID),
			403, "account_forbidden", "")

		// Revoked: within the key cache's TTL the partner can no longer act for the merchant.
		if _, err := db.Raw().ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = $1 WHERE partner_id = $2`, clk.Now().UnixMilli(), p.PartnerID); err != nil {
			t.Fatal(err)
		}
		clk.Advance(checkout.DefaultKeyCacheTTL)
		wantError(t, srv.Do(t, "GET", "/v1/payment-intents", nil, as(merchant.id)...), 403, "account_forbidden", "")
	})
}

// A key deleted on one node stops working on the others within the key cache's TTL (PostgreSQL: one
// database, two servers).
func TestDeletedKeyAcrossNodes(t *testing.T) {
	t.Parallel()
	db := storetest.Postgres(t)
	clk := clock.NewManual(time.Now())
	kek := servertest.NewKEK(t)
	one := start(t, db, server.Config{Now: clk.Now, KEK: kek})
	two := start(t, db, server.Config{Now: clk.Now, KEK: kek})
	a := newAccount(t, one)
	doomed := createKey(t, one, a.id, checkout.PaymentIntentsRead)
	on := func(s *servertest.Server) servertest.Response {
		return s.Do(t, "GET", "/v1/payment-intents", nil, checkout.HeaderAPIKey, doomed.Key, checkout.HeaderAccount, a.id)
	}
	if on(two).Status != 200 {
		t.Fatal("the key does not work on the second node")
	}
	a.ok(t, "DELETE", "/v1/api-keys/"+doomed.ID, nil)
	wantError(t, on(one), 401, "invalid_api_key", "")
	clk.Advance(checkout.DefaultKeyCacheTTL - time.Millisecond)
	if r := on(two); r.Status != 200 {
		t.Fatalf("within the TTL the second node still serves its cached key; got %d", r.Status)
	}
	clk.Advance(time.Millisecond)
	wantError(t, on(two), 401, "invalid_api_key", "")
}

// rowsText returns each row of a query as text.
func rowsText(t *testing.T, db *store.DB, query string) []string {
	t.Helper()
	rows, err := db.Reader().QueryContext(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, v := range vals {
			switch v := v.(type) {
			case []byte:
				b.Write(v)
			case string:
				b.WriteString(v)
			}
			b.WriteByte('|')
		}
		out = append(out, b.String())
	}
	return out
}

package main_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/readmetest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
)

var allPermissions = "api_keys:read,api_keys:write,payment_intents:read,payment_intents:write,payment_methods:read,payment_methods:write," +
	"refunds:read,refunds:write"

// kassa apikey create prints the key once, stores only its hash, and the key works against kassa serve
// for the merchant's account; a partner's account gets keys too.
func TestAPIKeyCommand(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dbFlags := dbArgs(t, backend)
			m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Key Shop", "--email", "keys@example.com"}, dbFlags...)...)
			account := m["account_id"].(string)
			k := cliJSON(t, append([]string{"apikey", "create", "--account-id", account, "--permissions", allPermissions}, dbFlags...)...)
			key, _ := k["key"].(string)
			if !regexp.MustCompile(`^key_[A-Z2-7]{24}$`).MatchString(k["id"].(string)) || !regexp.MustCompile(`^kk_[A-Z2-7]{26}$`).MatchString(key) ||
				k["account_id"] != account || len(k["permissions"].([]any)) != 8 || len(k) != 4 {
				t.Fatalf("apikey create printed %v", k)
			}
			p := cliJSON(t, append([]string{"partner", "create", "--name", "Plugin", "--image-url", "https://plugin.example/i.png",
				"--callback-uri", "https://plugin.example/cb"}, dbFlags...)...)
			pk := cliJSON(t, append([]string{"apikey", "create", "--account-id", p["account_id"].(string), "--permissions", "api_keys:read"}, dbFlags...)...)
			if pk["account_id"] != p["account_id"] || pk["permissions"].([]any)[0] != "api_keys:read" {
				t.Fatalf("partner key %v", pk)
			}

			srv := startServer(t, nil, dbFlags...)
			hdr := map[string]string{"payments-api-key": key, "payments-account": account, "Content-Type": "application/json"}
			resp, pi := getJSON(t, "POST", srv.url+"/v1/payment-intents", strings.NewReader(`{"amount":1000,"currency":"cad"}`), hdr)
			if resp.StatusCode != http.StatusOK || pi["status"] != "requires_payment_method" {
				t.Fatalf("create with the CLI's key: %d %v", resp.StatusCode, pi)
			}
			resp, keys := getJSON(t, "GET", srv.url+"/v1/api-keys", nil, map[string]string{"payments-api-key": pk["key"].(string),
				"payments-account": p["account_id"].(string)})
			if resp.StatusCode != http.StatusOK || len(keys["data"].([]any)) != 1 {
				t.Fatalf("the partner's keys: %d %v", resp.StatusCode, keys)
			}
			resp, _ = getJSON(t, "GET", srv.url+"/v1/payment-intents", nil, map[string]string{"payments-api-key": key + "x", "payments-account": account})
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a wrong key: %d", resp.StatusCode)
			}

			// Only the hash is in the database.
			db, err := store.Open(context.Background(), store.Config{DataDir: flagValue(dbFlags, "--data-dir"), DatabaseURL: flagValue(dbFlags, "--database-url")})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			sum := sha256.Sum256([]byte(key))
			var n int
			if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM api_keys WHERE key_hash = $1 AND id = $2`, sum[:], k["id"]).Scan(&n); err != nil || n != 1 {
				t.Fatalf("the key's hash is not stored: %d %v", n, err)
			}
			if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM api_keys WHERE key_hint = $1 OR permissions LIKE $2`,
				key, "%"+key[3:]+"%").Scan(&n); err != nil || n != 0 {
				t.Fatalf("the key is stored in clear: %d %v", n, err)
			}
		})
	}
}

func TestAPIKeyCommandFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Shop", "--email", "apikey@example.com", "--data-dir", dir)
	account := m["account_id"].(string)
	// The help lists every permission, the refunds' included.
	if stdout, stderr, _ := cli(t, "apikey", "create", "--help"); !strings.Contains(stdout+stderr, "refunds:read,refunds:write") {
		t.Errorf("apikey create --help does not list the refunds permissions:\n%s%s", stdout, stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no account", []string{"--permissions", "api_keys:read"}, 2, "--account-id is required"},
		{"no permissions", []string{"--account-id", account}, 2, "--permissions is required"},
		{"unknown permission", []string{"--account-id", account, "--permissions", "api_keys:read,disputes:write"}, 2, `unknown permission "disputes:write"`},
		{"empty permission", []string{"--account-id", account, "--permissions", "api_keys:read,"}, 2, "unknown permission"},
		{"unknown account", []string{"--account-id", "acct_0000000000", "--permissions", "api_keys:read"}, 1, "no merchant or partner"},
		{"a merchant id is not an account id", []string{"--account-id", m["merchant_id"].(string), "--permissions", "api_keys:read"}, 1, "no merchant or partner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, append(append([]string{"apikey", "create"}, tc.args...), "--data-dir", dir)...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d mentioning %q", code, stdout, stderr, tc.code, tc.msg)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Fatalf("failure reason is not one line: %q", stderr)
			}
		})
	}
}

// The README's curl walk-through of the v1 API works as it stands against kassa serve.
func TestREADMEPaymentsAPI(t *testing.T) {
	t.Parallel()
	needTools(t, "curl", "jq", "sh")
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Readme Shop", "--email", "readme@example.com", "--data-dir", dir)
	k := cliJSON(t, "apikey", "create", "--account-id", m["account_id"].(string), "--permissions", allPermissions, "--data-dir", dir)
	srv := startServer(t, nil, "--data-dir", dir)
	text := runREADME(t, srv, readmetest.Block(t, "<!-- payments-api-v1:", "sh"), "API_KEY="+k["key"].(string), "ACCOUNT="+m["account_id"].(string))
	for _, want := range []string{`"status":"requires_capture"`, `"status":"succeeded"`, `"amount_received":5999`, `"object":"list"`, `"order_id":"1001"`,
		`"object":"refund","amount":2000`, `"reason":"requested_by_customer"`} {
		if !strings.Contains(text, want) {
			t.Fatalf("the README's block printed no %s:\n%s", want, text)
		}
	}
}

// kassa apikey list shows an account's live keys without their secrets; kassa apikey revoke, run while
// the server runs, stops a key within the revocation poll; kassa client revoke of a partner's client
// ends its approvals and its keys with it, and says how many.
func TestAPIKeyListRevokeAndPartnerClientRevoke(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			db := dbArgs(t, backend)
			run := func(args ...string) map[string]any { return cliJSON(t, append(args, db...)...) }
			m := run("merchant", "create", "--init", "--name", "Key Shop", "--email", "keys@example.com", "--password", "a long passphrase")
			account := m["account_id"].(string)
			first := run("apikey", "create", "--account-id", account, "--permissions", allPermissions)
			second := run("apikey", "create", "--account-id", account, "--permissions", "payment_intents:read")

			stdout, _, code := cli(t, append([]string{"apikey", "list", "--account-id", account}, db...)...)
			list := decodeOne(t, stdout)
			keys, _ := list["api_keys"].([]any)
			if code != 0 || list["account_id"] != account || len(keys) != 2 || strings.Contains(stdout, "kk_") {
				t.Fatalf("apikey list printed %s", stdout)
			}
			for _, k := range keys {
				k := k.(map[string]any)
				var want map[string]any
				for _, c := range []map[string]any{first, second} {
					if c["id"] == k["id"] {
						want = c
					}
				}
				secret := want["key"].(string)
				if want == nil || k["key_hint"] != "…"+secret[len(secret)-4:] || len(k["permissions"].([]any)) != len(want["permissions"].([]any)) ||
					k["created"] == nil || k["account_id"] != account || k["key"] != nil {
					t.Fatalf("listed key %v, created as %v", k, want)
				}
			}

			srv := startServer(t, nil, append([]string{"--revocation-poll", "1s"}, db...)...)
			intents := func(key, acct string) int {
				resp, _ := getJSON(t, "GET", srv.url+"/v1/payment-intents", nil, map[string]string{"payments-api-key": key, "payments-account": acct})
				return resp.StatusCode
			}
			// stopsWithinPoll waits until a request answers 401, and fails when that takes longer than
			// the server's revocation poll (1 s, also its key cache's TTL), with a second to spare.
			stopsWithinPoll := func(what string, status func() int) {
				t.Helper()
				start := time.Now()
				for status() != http.StatusUnauthorized {
					if time.Since(start) > 2*time.Second {
						t.Fatalf("%s still works %v later", what, time.Since(start))
					}
					time.Sleep(50 * time.Millisecond)
				}
				t.Logf("%s refused %v after the command", what, time.Since(start).Round(10*time.Millisecond))
			}
			if intents(first["key"].(string), account) != 200 {
				t.Fatal("the key does not work before its revocation")
			}
			r := run("apikey", "revoke", "--id", first["id"].(string))
			if r["id"] != first["id"] || r["revoked"] != true || r["revoked_at"] == nil || len(r) != 3 {
				t.Fatalf("apikey revoke printed %v", r)
			}
			stopsWithinPoll("a revoked key", func() int { return intents(first["key"].(string), account) })
			if intents(second["key"].(string), account) != 200 {
				t.Fatal("the other key stopped too")
			}
			if keys := run("apikey", "list", "--account-id", account)["api_keys"].([]any); len(keys) != 1 || keys[0].(map[string]any)["id"] != second["id"] {
				t.Fatalf("after the revocation the list is %v", keys)
			}
			for _, tc := range []struct {
				args []string
				code int
				msg  string
			}{
				{[]string{"apikey", "revoke", "--id", first["id"].(string)}, 1, "no live API key"},
				{[]string{"apikey", "revoke", "--id", "key_NOSUCHKEY"}, 1, "no live API key"},
				{[]string{"apikey", "revoke"}, 2, "--id is required"},
				{[]string{"apikey", "list", "--account-id", "acct_0000000000"}, 1, "no merchant or partner"},
				{[]string{"apikey", "list"}, 2, "--account-id is required"},
			} {
				stdout, stderr, code := cli(t, append(tc.args, db...)...)
				if code != tc.code || stdout != "" || !strings.Contains(stderr, tc.msg) {
					t.Errorf("kassa %v: exit %d, stdout %q, stderr %q; want exit %d saying %q", tc.args, code, stdout, stderr, tc.code, tc.msg)
				}
			}

			// A partner approved by the merchant, with a key: revoking its client ends both.
			p := run("partner", "create", "--name", "Plugin", "--image-url", "https://plugin.example/i.png", "--callback-uri", "https://plugin.example/cb")
			pk := run("apikey", "create", "--account-id", p["account_id"].(string), "--permissions", allPermissions)
			q := url.Values{"response_type": {"code"}, "client_id": {p["client_id"].(string)}, "redirect_uri": {"https://plugin.example/cb"}}
			signintest.Approve(t, srv.url, srv.url+"/oauth/authorize?"+q.Encode(), "keys@example.com", "a long passphrase")
			if intents(pk["key"].(string), account) != 200 {
				t.Fatal("the partner's key does not work for the merchant that approved it")
			}
			r = run("client", "revoke", "--client-id", p["client_id"].(string))
			if r["client_id"] != p["client_id"] || r["revoked"] != true || r["revoked_at"] == nil || r["grants_revoked"] != float64(1) ||
				r["api_keys_revoked"] != float64(1) {
				t.Fatalf("client revoke printed %v", r)
			}
			stopsWithinPoll("the revoked partner's key", func() int { return intents(pk["key"].(string), account) })
			if keys := run("apikey", "list", "--account-id", p["account_id"].(string))["api_keys"].([]any); len(keys) != 0 {
				t.Fatalf("the revoked partner still has keys: %v", keys)
			}
			// A merchant's own client: nothing of the merchant's keys goes with it.
			r = run("client", "revoke", "--client-id", m["client_id"].(string))
			if r["grants_revoked"] != float64(0) || r["api_keys_revoked"] != float64(0) || intents(second["key"].(string), account) != 200 {
				t.Fatalf("revoking a merchant's client: %v", r)
			}
		})
	}
}

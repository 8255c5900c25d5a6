package main_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// kassa webhook create prints the endpoint with its secret, sealed under the same key-encryption key
// as kassa serve's: the v1 API's /secret answers the same one. list shows no secret; delete removes it.
func TestWebhookCommand(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dbFlags := dbArgs(t, backend)
			m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Hook Shop", "--email", "hooks@example.com"}, dbFlags...)...)
			merchantID, account := m["merchant_id"].(string), m["account_id"].(string)
			e := cliJSON(t, append([]string{"webhook", "create", "--merchant-id", merchantID, "--url", "https://shop.example/hooks",
				"--events", "customer.created, transaction.approved", "--description", "Orders"}, dbFlags...)...)
			id, secret := e["id"].(string), e["secret"].(string)
			if !regexp.MustCompile(`^we_[A-Z2-7]{24}$`).MatchString(id) || !regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`).MatchString(secret) ||
				e["url"] != "https://shop.example/hooks" || e["description"] != "Orders" || e["disabled"] != false ||
				len(e["enabled_events"].([]any)) != 2 || e["enabled_events"].([]any)[0] != "transaction.approved" {
				t.Fatalf("webhook create printed %v", e)
			}
			all := cliJSON(t, append([]string{"webhook", "create", "--merchant-id", merchantID, "--url", "https://shop.example/all"}, dbFlags...)...)
			if ev := all["enabled_events"].([]any); len(ev) != 1 || ev[0] != "*" {
				t.Fatalf("the default events %v, want [*]", ev)
			}
			stdout, stderr, code := cli(t, append([]string{"webhook", "list", "--merchant-id", merchantID}, dbFlags...)...)
			if code != 0 || strings.Contains(stdout, "whsec_") {
				t.Fatalf("webhook list: exit %d %s %s", code, stdout, stderr)
			}
			l := decodeOne(t, stdout)
			if eps := l["webhook_endpoints"].([]any); l["merchant_id"] != merchantID || len(eps) != 2 || eps[0].(map[string]any)["id"] != all["id"] {
				t.Fatalf("webhook list printed %v", l)
			}

			k := cliJSON(t, append([]string{"apikey", "create", "--account-id", account, "--permissions", "webhooks:read,webhooks:write"}, dbFlags...)...)
			srv := startServer(t, nil, dbFlags...)
			hdr := map[string]string{"payments-api-key": k["key"].(string), "payments-account": account}
			resp, got := getJSON(t, "GET", srv.url+"/v1/webhook-endpoints/"+id+"/secret", nil, hdr)
			if resp.StatusCode != http.StatusOK || got["secret"] != secret {
				t.Fatalf("the server's secret of the CLI's endpoint: %d", resp.StatusCode)
			}

			d := cliJSON(t, append([]string{"webhook", "delete", "--merchant-id", merchantID, "--id", id}, dbFlags...)...)
			if d["id"] != id || d["deleted"] != true {
				t.Fatalf("webhook delete printed %v", d)
			}
			if resp, _ := getJSON(t, "GET", srv.url+"/v1/webhook-endpoints/"+id, nil, hdr); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("the deleted endpoint: %d", resp.StatusCode)
			}
		})
	}
}

// Each bad flag is named, as the v1 API names the field; another merchant's endpoint is not found.
func TestWebhookCommandFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Shop", "--email", "webhook@example.com", "--data-dir", dir)
	other := cliJSON(t, "merchant", "create", "--init", "--name", "Other", "--email", "webhook-other@example.com", "--data-dir", dir)
	id := cliJSON(t, "webhook", "create", "--merchant-id", m["merchant_id"].(string), "--url", "https://shop.example/", "--data-dir", dir)["id"].(string)
	mid := m["merchant_id"].(string)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no merchant", []string{"create", "--url", "https://shop.example/"}, 2, "--merchant-id is required"},
		{"no url", []string{"create", "--merchant-id", mid}, 2, "--url is required"},
		{"http", []string{"create", "--merchant-id", mid, "--url", "http://shop.example/"}, 2, "--url: url must use https"},
		{"credentials", []string{"create", "--merchant-id", mid, "--url", "https://u:p@shop.example/"}, 2, "--url: url must not contain a user name"},
		{"unknown event", []string{"create", "--merchant-id", mid, "--url", "https://shop.example/", "--events", "customer.created,order.paid"}, 2, `--events: enabled_events: "order.paid" is not an event type`},
		{"unknown merchant", []string{"create", "--merchant-id", "0000000000", "--url", "https://shop.example/"}, 1, "no merchant with id 0000000000"},
		{"list of an unknown merchant", []string{"list", "--merchant-id", "0000000000"}, 1, "no merchant with id 0000000000"},
		{"delete without id", []string{"delete", "--merchant-id", mid}, 2, "--id is required"},
		{"another merchant's endpoint", []string{"delete", "--merchant-id", other["merchant_id"].(string), "--id", id}, 1, "No webhook endpoint " + id},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, append(append([]string{"webhook"}, tc.args...), "--data-dir", dir)...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d mentioning %q", code, stdout, stderr, tc.code, tc.msg)
			}
		})
	}
	// http:// is taken when the operator allows private delivery, as kassa serve --webhooks-allow-private does.
	e := cliJSON(t, "webhook", "create", "--merchant-id", mid, "--url", "http://127.0.0.1:9/", "--webhooks-allow-private", "--data-dir", dir)
	if e["url"] != "http://127.0.0.1:9/" {
		t.Fatalf("printed %v", e)
	}
}

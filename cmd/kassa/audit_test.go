package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
)

// "kassa audit list" prints the merchant's one history (internal/history, whose merging of the audit
// log's records is tested there), newest first: API sales by their ledger rows, filtered by operation
// and by user as the Activity page is, a page at a time with "next"; another merchant's entries never; flags that cannot be used exit 2, an unknown merchant 1.
func TestAuditListCommand(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dbFlags := dbArgs(t, backend)
			run := func(args ...string) map[string]any {
				t.Helper()
				return cliJSON(t, append(args, dbFlags...)...)
			}
			m := run("merchant", "create", "--init", "--name", "Audit Shop", "--email", "audit@example.com")
			o := run("merchant", "create", "--name", "Other Shop", "--email", "other-audit@example.com")
			id := m["merchant_id"].(string)
			srv := startServer(t, nil, dbFlags...)
			sale := func(m map[string]any, amount string) string {
				return callJSON(t, "POST", srv.url+"/transaction-service/sale", token(t, srv.url, m), `{"amount":"`+amount+
					`","currency":"CAD","card_number":"`+cardtest.Visa+`","card_expiry_month":12,"card_expiry_year":2099,"cvv2":"123"}`)["transaction_id"].(string)
			}
			first := sale(m, "10.00")
			second := sale(m, "20.00")
			sale(o, "30.00")
			if err := srv.stop(t); err != nil {
				t.Fatal(err)
			}

			line := func(e any) string {
				x := e.(map[string]any)
				return fmt.Sprint(x["source"], " ", x["operation"], " ", x["transaction_id"], " ", x["amount"], " ", x["outcome"], " ", x["client_id"])
			}
			lines := func(out map[string]any) (s []string) {
				for _, e := range out["entries"].([]any) {
					s = append(s, line(e))
				}
				return s
			}
			all := run("audit", "list", "--merchant-id", id)
			got := lines(all)
			if len(got) != 2 || got[len(got)-2] != "ledger sale "+second+" 20.00 APPROVED "+m["client_id"].(string) ||
				got[len(got)-1] != "ledger sale "+first+" 10.00 APPROVED "+m["client_id"].(string) || all["next"] != nil {
				t.Fatalf("the history:\n%s", strings.Join(got, "\n"))
			}
			if strings.Contains(strings.Join(got, "\n"), "30.00") {
				t.Errorf("another merchant's sale in the history:\n%s", strings.Join(got, "\n"))
			}
			page := run("audit", "list", "--merchant-id", id, "--operation", "sale", "--limit", "1")
			next, _ := page["next"].(string)
			rest := run("audit", "list", "--merchant-id", id, "--operation", "sale", "--limit", "1", "--before", next)
			if got := append(lines(page), lines(rest)...); len(got) != 2 || !strings.Contains(got[0], second) || !strings.Contains(got[1], first) ||
				next == "" {
				t.Errorf("sales a page at a time (next %q): %v", next, got)
			}
			if got := lines(run("audit", "list", "--merchant-id", id, "--user", "u-nobody")); len(got) != 0 {
				t.Errorf("a user's records: %v", got)
			}
			for _, tc := range []struct {
				args []string
				code int
				want string
			}{
				{[]string{"--merchant-id", id, "--limit", "0"}, 2, "--limit must be 1 to 500"},
				{[]string{"--merchant-id", id, "--before", "12"}, 2, "--before must be"},
				{[]string{}, 2, "--merchant-id is required"},
				{[]string{"--merchant-id", "0000000000"}, 1, "no merchant with id 0000000000"},
			} {
				stdout, stderr, code := cli(t, append(append([]string{"audit", "list"}, tc.args...), dbFlags...)...)
				if code != tc.code || !strings.Contains(stderr, tc.want) || stdout != "" {
					t.Errorf("audit list %v: exit %d, %q %q", tc.args, code, stdout, stderr)
				}
			}
		})
	}
}

package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Sales taken through "kassa serve" and attributed to an ISO 8583 account are reconciled by "kassa
// reconcile" against reports written for them: exit 0 when they agree, 1 with the differences when
// they do not, 2 for flags that cannot be used; the JSON keeps the shape.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Shop", "--email", "reconcile@example.com", "--data-dir", dir)
	merchantID := m["merchant_id"].(string)
	srv := startServer(t, nil, "--data-dir", dir)
	tok := token(t, srv.url, m)
	sale := func(amount string) map[string]any {
		return callJSON(t, "POST", srv.url+"/transaction-service/sale", tok, `{"amount":"`+amount+`","currency":"CAD","card_number":"`+
			cardtest.Visa+`","card_expiry_month":12,"card_expiry_year":2099,"cvv2":"123"}`)
	}
	first, second := sale("19.99"), sale("5.00")
	if err := srv.stop(t); err != nil {
		t.Fatal(err)
	}
	// The ledger does not record the account that took a payment yet: attribute both sales to one.
	db := storetest.SQLiteAt(t, dir)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO processor_accounts (id, merchant_id, kind, config, settings, test, created_at)
		VALUES ('pa_1', $1, 'iso8583', $2, '{}', FALSE, 0)`, merchantID, []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE transactions SET processor_account = 'pa_1'`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	day := time.UnixMilli(int64(first["transaction_time"].(float64))).UTC().Format(time.DateOnly)
	row := func(tx map[string]any, amount string) string {
		return day + ",0200,000000,000001,000000000001," + tx["transaction_id"].(string) + "," + amount + ",124,A1B2C3,false\r\n"
	}
	report := func(name string, lines ...string) string {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const header = "date,mti,processing_code,stan,rrn,reference,amount,currency,auth_code,reversed\r\n"
	agree := report("agree.csv", header, row(first, "1999"), strings.Replace(row(second, "500"), "000001", "000002", 2))
	differ := report("differ.csv", header, row(first, "2000"))
	reconcile := func(args ...string) (map[string]any, string, int) {
		t.Helper()
		stdout, stderr, code := cli(t, append([]string{"reconcile", "--data-dir", dir}, args...)...)
		if stdout == "" {
			return nil, stderr, code
		}
		return decodeOne(t, stdout), stderr, code
	}
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		sort.Strings(k)
		return k
	}

	out, stderr, code := reconcile("--merchant-id", merchantID, "--date", day, "--report", agree)
	if code != 0 || stderr != "" {
		t.Fatalf("agreeing report: exit %d, stderr %q", code, stderr)
	}
	if want := []string{"acquirer_total", "amount_mismatch", "kassa_total", "matched", "missing_at_acquirer", "missing_in_kassa",
		"other_merchants", "reversed_at_acquirer"}; !reflect.DeepEqual(keys(out), want) {
		t.Fatalf("printed the keys %q, want %q", keys(out), want)
	}
	if fmt.Sprint(out["matched"], out["missing_in_kassa"], out["missing_at_acquirer"], out["amount_mismatch"], out["reversed_at_acquirer"],
		out["kassa_total"], out["acquirer_total"]) != "2 [] [] [] [] map[CAD:2499] map[CAD:2499]" {
		t.Fatalf("agreeing report printed %v", out)
	}

	out, stderr, code = reconcile("--merchant-id", merchantID, "--date", day, "--report", differ)
	if code != 1 || strings.TrimSpace(stderr) != "kassa reconcile: the report and the ledger differ: 1 missing at the acquirer, 1 amount mismatch" {
		t.Fatalf("differing report: exit %d, stderr %q", code, stderr)
	}
	mismatch := out["amount_mismatch"].([]any)[0].(map[string]any)
	missing := out["missing_at_acquirer"].([]any)[0].(map[string]any)
	if mismatch["reference"] != first["transaction_id"] || fmt.Sprint(mismatch["differs"]) != "[amount]" ||
		fmt.Sprint(mismatch["acquirer"].(map[string]any)["amount"], mismatch["kassa"].(map[string]any)["amount"]) != "2000 1999" ||
		mismatch["acquirer"].(map[string]any)["stan"] != "000001" || mismatch["kassa"].(map[string]any)["status"] != "APPROVED" ||
		missing["reference"] != second["transaction_id"] || missing["acquirer"] != nil || missing["kassa"].(map[string]any)["id"] != second["id"] {
		t.Fatalf("differing report printed %v", out)
	}
	if fmt.Sprint(out["kassa_total"], out["acquirer_total"]) != "map[CAD:2499] map[CAD:2000]" {
		t.Fatalf("totals %v %v", out["kassa_total"], out["acquirer_total"])
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no report", []string{"--merchant-id", merchantID, "--date", day}, 2, "--report is required"},
		{"no date", []string{"--merchant-id", merchantID, "--report", agree}, 2, "--date is required"},
		{"no merchant", []string{"--date", day, "--report", agree}, 2, "--merchant-id is required"},
		{"a date that is no day", []string{"--merchant-id", merchantID, "--date", "2026-13-01", "--report", agree}, 2, "--date must be a day"},
		{"a report that is not there", []string{"--merchant-id", merchantID, "--date", day, "--report", agree + ".missing"}, 1, "no such file"},
		{"a malformed report", []string{"--merchant-id", merchantID, "--date", day, "--report", report("bad.csv", header, row(first, "19.99"))},
			1, "settlement report line 2, column amount: must be minor units"},
		{"a report of another day", []string{"--merchant-id", merchantID, "--date", "2020-01-01", "--report", agree}, 1, "line 2, column date"},
		{"an unknown merchant", []string{"--merchant-id", "0000000000", "--date", day, "--report", agree}, 1, "no merchant with id 0000000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := reconcile(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) || out != nil {
				t.Fatalf("exit %d, stderr %q, stdout %v; want exit %d mentioning %q and nothing on stdout", code, stderr, out, tc.code, tc.msg)
			}
		})
	}
}

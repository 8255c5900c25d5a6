package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for kassa-load as the bare server of the http-ceiling
// scenario, which starts this program (os.Executable) with "bare-http", as main does. It removes the
// binaries that buildKassa built.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "bare-http" {
		os.Exit(bareHTTPMain(os.Args[2:], os.Stdout))
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// built is the directory of kassa and kassa-acquirer, built once for the test binary: a build links
// for seconds, and half the tests here run the two.
var built struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

// buildKassa returns the directory holding kassa and kassa-acquirer, building them on first use.
func buildKassa(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "kassa-load-bin-"); built.err != nil {
			return
		}
		built.out, built.err = exec.Command("go", "build", "-o", built.dir+string(filepath.Separator), "../kassa", "../kassa-acquirer").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("build kassa and kassa-acquirer: %v\n%s", built.err, built.out)
	}
	return built.dir
}

// jsonLines parses the JSON lines of a run, failing the test on any other line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		lines = append(lines, r)
	}
	return lines
}

// near reports whether a and b agree to a millionth.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(math.Abs(a), math.Abs(b)) }

// The bare handler answers the sale scenario's request as Kassa does, in as many bytes as asked for,
// through the load generator's own client; and it does check the card and the token.
func TestBareHandlerAnswersLikeASale(t *testing.T) {
	const size = 400 // more than its answer's natural length, which it pads
	srv := httptest.NewServer(bareHandler(size))
	defer srv.Close()
	c := &client{base: srv.URL, token: bareBearer, http: srv.Client()}
	if _, _, err := c.transaction(context.Background(), "/transaction-service/sale", saleBody, "APPROVED"); err != nil {
		t.Fatalf("the shared client's sale: %v", err)
	}
	b, err := c.do(context.Background(), "POST", "/transaction-service/sale", saleBody, false)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		ID         int64       `json:"id"`
		Result     string      `json:"transaction_result"`
		CardType   string      `json:"card_type"`
		CardSuffix string      `json:"card_suffix"`
		Amount     json.Number `json:"amount"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	if len(b) != size || b[len(b)-1] != '\n' || w.ID != 2 || w.Result != "APPROVED" || w.CardType != "VISA" || w.CardSuffix != "4242" || w.Amount != "10.00" {
		t.Errorf("answer of %d bytes, want %d ending in a line break: %+v", len(b), size, w)
	}
	luhn := bytes.Replace(saleBody, []byte("4242424242424242"), []byte("4242424242424241"), 1)
	if _, err := c.do(context.Background(), "POST", "/transaction-service/sale", luhn, false); err == nil || !strings.Contains(err.Error(), ": 400 ") {
		t.Errorf("a card failing the Luhn check: %v, want a 400", err)
	}
	short := bytes.Replace(saleBody, []byte("4242424242424242"), []byte("424242424242424"), 1)
	if _, err := c.do(context.Background(), "POST", "/transaction-service/sale", short, false); err == nil || !strings.Contains(err.Error(), ": 400 ") {
		t.Errorf("15 digits of a Visa card: %v, want a 400", err)
	}
	c.token = "other"
	if _, err := c.do(context.Background(), "POST", "/transaction-service/sale", saleBody, false); err == nil || !strings.Contains(err.Error(), ": 401 ") {
		t.Errorf("another token: %v, want a 401", err)
	}
}

// The HTTP-stack ceiling end to end, briefly, on SQLite: the http-ceiling scenario starts the bare
// server in a process of its own (this test binary, see TestMain), sized to a sale's answer of the
// same run, drives it from the sale scenario's clients, and the report carries both figures, their
// ratio and the verdicts on the targets. Whether they are met is the benchmark's business.
func TestHTTPCeilingReportsTheRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	dir := buildKassa(t)
	var out bytes.Buffer
	c := config{kassa: filepath.Join(dir, "kassa"), backends: []string{"sqlite"}, scenarios: []string{"sale", "http-ceiling"},
		clients: 4, latencyClients: 100, duration: time.Second, warmup: 300 * time.Millisecond, rounds: 1, jsonOut: true}
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	seen := map[string]bool{}
	for _, r := range jsonLines(t, out.String()) {
		switch {
		case r["machine"] != nil:
		case r["http_ceiling_per_s"] != nil:
			bare, sales, ratio := r["http_ceiling_per_s"].(float64), r["sales_per_s"].(float64), r["sales_to_http_ceiling"].(float64)
			// Kassa does all the bare handler does and more: it cannot answer twice as many.
			if bare <= 0 || sales <= 0 || !near(ratio, sales/bare) || ratio > 2 || r["http_ceiling_p99_ms"].(float64) <= 0 ||
				r["sale_p99_ms"].(float64) <= 0 || r["target_ratio"] != 0.33 || r["target_p99_ms"] != 25.0 || r["clients"] != 4.0 {
				t.Errorf("HTTP-stack ceiling line %v", r)
			}
			if _, ok := r["ratio_met"].(bool); !ok {
				t.Errorf("no verdict on the ratio: %v", r)
			}
			if _, ok := r["p99_met"].(bool); !ok {
				t.Errorf("no verdict on the p99: %v", r)
			}
			seen["ceiling"] = true
		default:
			if r["ops_per_s"].(float64) <= 0 || r["errors"].(float64) != 0 || r["cpu_s_per_1000"].(float64) <= 0 || r["server_peak_rss_mb"].(float64) <= 0 {
				t.Errorf("%s: %v", r["operation"], r)
			}
			seen[r["operation"].(string)] = true
		}
	}
	for _, want := range []string{"sale", "bare http sale", "ceiling"} {
		if !seen[want] {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

// The comparisons' lines in the table say plainly whether each target is met, by backend, and what
// the latency-tolerance bound was made of.
func TestComparisonLinesSayWhetherTargetsAreMet(t *testing.T) {
	var out bytes.Buffer
	rep := &reporter{w: &out}
	rep.httpCeiling("sqlite", map[string]summary{"http-ceiling": {rate: 10000, p99: 4, cpu: 0.02, clients: 64}, "sale": {rate: 3400, p99: 24, cpu: 0.2, clients: 64}}, 1)
	rep.httpCeiling("postgres", map[string]summary{"http-ceiling": {rate: 10000, p99: 4, clients: 64}, "sale": {rate: 2900, p99: 26, clients: 64}}, 1)
	rep.httpCeiling("sqlite", map[string]summary{"http-ceiling": {rate: 10000, p99: 4, clients: 4}, "sale": {rate: 2000, p99: 2, clients: 4}}, 1)
	rep.ledger("sqlite", map[string]summary{"http-ceiling": {rate: 10000, clients: 64}, "ledger": {rate: 4600, p99: 20, cpu: 0.15, clients: 64}}, 1)
	rep.ledger("sqlite", map[string]summary{"http-ceiling": {rate: 10000, clients: 64}, "ledger": {rate: 4400, p99: 20, cpu: 0.15, clients: 64}}, 3)
	rep.ledger("postgres", map[string]summary{"http-ceiling": {rate: 10000, clients: 64}, "ledger": {rate: 3000, p99: 30, cpu: 0.1, clients: 64}}, 1)
	rep.ledger("postgres", map[string]summary{"ledger": {rate: 3000, p99: 30, cpu: 0.1, clients: 4}}, 1)
	rep.tolerance("sqlite", "iso8583-250ms", map[string]summary{"iso8583-250ms": {rate: 6800, p99: 550, cpu: 0.3, rss: 200 << 20, rssBefore: 60 << 20, clients: 2000},
		"iso8583": {rate: 7000, clients: 64}}, 1)
	rep.tolerance("sqlite", "sale-250ms", map[string]summary{"sale-250ms": {rate: 7000, p99: 650, rss: 320 << 20, clients: 2000}}, 3)
	for _, want := range []string{
		"sqlite    HTTP-stack ceiling: a bare net/http handler answered 10000 sales/s (p99 4.00 ms, CPU 0.020 s/1000) from 64 clients; Kassa's 3400 sales/s = 0.34 of it (target ≥ 0.33: met), sale p99 24.00 ms (target ≤ 25 ms: met), CPU 0.200 s/1000 sales\n",
		"postgres  HTTP-stack ceiling: a bare net/http handler answered 10000 sales/s (p99 4.00 ms, CPU 0.000 s/1000) from 64 clients; Kassa's 2900 sales/s = 0.29 of it (target ≥ 0.30: MISSED), sale p99 26.00 ms (target ≤ 25 ms: MISSED), CPU 0.000 s/1000 sales\n",
		"= 0.20 of it (target ≥ 0.33: MISSED), sale p99 2.00 ms (target ≤ 25 ms: met), CPU 0.000 s/1000 sales; the targets are stated at 64 clients, this run had 4\n",
		"sqlite    ledger alone: Ledger.Charge from 64 goroutines, no HTTP, 4600 sales/s (p99 20.00 ms, CPU 0.150 s/1000 sales); 0.46 of the bare handler's 10000 (target ≥ 0.45: met)\n",
		"sqlite    ledger alone: medians of 3 rounds: Ledger.Charge from 64 goroutines, no HTTP, 4400 sales/s (p99 20.00 ms, CPU 0.150 s/1000 sales); 0.44 of the bare handler's 10000 (target ≥ 0.45: MISSED)\n",
		"postgres  ledger alone: Ledger.Charge from 64 goroutines, no HTTP, 3000 sales/s (p99 30.00 ms, CPU 0.100 s/1000 sales); 0.30 of the bare handler's 10000 (no target on this backend)\n",
		"postgres  ledger alone: Ledger.Charge from 4 goroutines, no HTTP, 3000 sales/s (p99 30.00 ms, CPU 0.100 s/1000 sales); no http-ceiling scenario in this run to compare with it; the targets are stated at 64 clients, this run had 4\n",
		"sqlite    latency tolerance: ISO 8583 host 250ms away, 2000 clients: 6800 sales/s = 0.97 of min(8000 ideal, 7000 at once) (target ≥ 0.90: met); " +
			"p99 550.00 ms (target ≤ 600 ms: met); CPU 0.300 s/1000 sales; server's peak resident memory 200 MB, 60 MB before its clients (target < 300 MB: met)\n",
		"sqlite    latency tolerance: medians of 3 rounds: simulator 250ms away, 2000 clients: 7000 sales/s = 0.88 of the 8000 ideal (no sale figure at once in this run) (target ≥ 0.90: MISSED); " +
			"p99 650.00 ms (target ≤ 600 ms: MISSED); CPU 0.000 s/1000 sales; server's peak resident memory 320 MB, 0 MB before its clients (target < 300 MB: MISSED)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no line with\n%s\nin:\n%s", want, out.String())
		}
	}
}

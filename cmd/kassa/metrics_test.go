package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/metrics/metricstest"
)

// A scrape after a known workload counts exactly that workload. A real kassa serve
// with --metrics-addr takes a token, two sales, a replay of one, a refund, declines until the
// credential's decline limit refuses a payment (429), each outcome's event delivered to a webhook
// endpoint; then the exposition on the metrics listener counts exactly those, on both backends, and the
// API's own address does not serve it.
func TestMetricsAfterAKnownWorkload(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			db := dbArgs(t, backend)
			m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Metric Goods", "--email", "ops@metric.example", "--currency", "CAD"}, db...)...)
			id := m["merchant_id"].(string)
			cliJSON(t, append([]string{"merchant", "update", "--merchant-id", id, "--velocity-credential-declines", "2"}, db...)...)
			var received atomic.Int64
			receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { received.Add(1) }))
			defer receiver.Close()
			cliJSON(t, append([]string{"webhook", "create", "--merchant-id", id, "--url", receiver.URL, "--webhooks-allow-private"}, db...)...)
			srv := startServer(t, nil, append(db, "--metrics-addr", "127.0.0.1:0", "--webhooks-allow-private")...)
			metricsURL := waitFor(t, srv, "Prometheus metrics: ")
			metricsURL = regexp.MustCompile(`Prometheus metrics: (\S+)`).FindStringSubmatch(metricsURL)[1]

			if resp, _ := getJSON(t, "GET", srv.url+"/metrics", nil, nil); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("the API's address answers /metrics with %d", resp.StatusCode)
			}
			cfg := clientcredentials.Config{ClientID: m["client_id"].(string), ClientSecret: m["client_secret"].(string), TokenURL: srv.url + "/oauth/token"}
			tok, err := cfg.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			codes := map[int]int{} // statuses of the sale route
			pay := func(path, body, key string) (*http.Response, map[string]any) {
				hdr := map[string]string{"Authorization": "Bearer " + tok.AccessToken}
				if key != "" {
					hdr["Idempotency-Key"] = key
				}
				resp, out := getJSON(t, "POST", srv.url+path, strings.NewReader(body), hdr)
				if path == "/transaction-service/sale" {
					codes[resp.StatusCode]++
				}
				return resp, out
			}
			first, sale := pay("/transaction-service/sale", keyedCard(cardtest.Visa, "10.00"), "metrics-1")
			replay, again := pay("/transaction-service/sale", keyedCard(cardtest.Visa, "10.00"), "metrics-1")
			if first.StatusCode != 200 || sale["transaction_result"] != "APPROVED" || replay.Header.Get("Idempotent-Replayed") != "true" ||
				again["transaction_id"] != sale["transaction_id"] {
				t.Fatalf("sale %d %v, its replay %d %v", first.StatusCode, sale, replay.StatusCode, again)
			}
			if _, s := pay("/transaction-service/sale", keyedCard(cardtest.Visa, "5.00"), ""); s["transaction_result"] != "APPROVED" {
				t.Fatalf("second sale %v", s)
			}
			if _, r := pay("/transaction-service/refund/"+sale["transaction_id"].(string), `{"amount":"2.00"}`, ""); r["transaction_result"] != "APPROVED" {
				t.Fatalf("refund %v", r)
			}
			declines, policy := 0, ""
			for i := 0; policy == "" && i < 5; i++ {
				resp, d := pay("/transaction-service/sale", keyedCard(cardtest.Declined, "3.00"), "")
				switch {
				case resp.StatusCode == http.StatusTooManyRequests:
					policy = strings.Trim(strings.Split(resp.Header.Get("RateLimit-Policy"), ";")[0], `"`)
				case d["transaction_result"] == "DECLINED":
					declines++
				default:
					t.Fatalf("a declined card: %d %v", resp.StatusCode, d)
				}
			}
			if declines != 2 || policy == "" {
				t.Fatalf("%d declines before a 429 (policy %q); want 2", declines, policy)
			}

			// Two sales, two declines and a refund are five events, each delivered once; the backlog
			// drains once each attempt's result is recorded, which follows the receiver's answer.
			for deadline := time.Now().Add(20 * time.Second); received.Load() < 5 || metricstest.Scrape(t, metricsURL).Value("kassa_webhook_attempts_total", nil) < 5 ||
				metricstest.Scrape(t, metricsURL).Value("kassa_webhook_backlog", nil) != 0; {
				if time.Now().After(deadline) {
					t.Fatalf("within 20 s: %d of 5 webhooks received, a backlog of %v", received.Load(),
						metricstest.Scrape(t, metricsURL).Value("kassa_webhook_backlog", nil))
				}
				time.Sleep(50 * time.Millisecond)
			}
			got := metricstest.Scrape(t, metricsURL)
			want := func(name string, labels map[string]string, v float64) {
				t.Helper()
				if n := got.Value(name, labels); n != v {
					t.Errorf("%s%v = %v, want %v", name, labels, n, v)
				}
			}
			want("kassa_webhook_attempts_total", map[string]string{"result": "succeeded"}, 5)
			want("kassa_webhook_attempts_total", nil, 5)
			sim := map[string]string{"processor": "simulator", "mode": "test"}
			with := func(base map[string]string, kv ...string) map[string]string {
				out := map[string]string{}
				for k, v := range base {
					out[k] = v
				}
				for i := 0; i < len(kv); i += 2 {
					out[kv[i]] = kv[i+1]
				}
				return out
			}
			want("kassa_payments_total", with(sim, "kind", "SALE", "result", "APPROVED", "decline_code", ""), 2)
			want("kassa_payments_total", with(sim, "kind", "SALE", "result", "DECLINED", "decline_code", "card_declined"), 2)
			want("kassa_payments_total", with(sim, "kind", "REFUND", "result", "APPROVED"), 1)
			want("kassa_payments_total", nil, 5)
			want("kassa_processor_call_duration_seconds", map[string]string{"processor": "simulator", "operation": "sale", "outcome": "answered"}, 4)
			want("kassa_processor_call_duration_seconds", map[string]string{"operation": "refund"}, 1)
			want("kassa_tokens_issued_total", map[string]string{"grant_type": "client_credentials"}, 1)
			want("kassa_idempotent_replays_total", map[string]string{"route": "POST /transaction-service/sale"}, 1)
			want("kassa_rate_limited_total", map[string]string{"policy": policy}, 1)
			for code, n := range codes {
				want("kassa_http_request_duration_seconds", map[string]string{"route": "POST /transaction-service/sale", "code": strconv.Itoa(code)}, float64(n))
			}
			want("kassa_http_request_duration_seconds", map[string]string{"route": "POST /oauth/token", "code": "200"}, 1)
			want("kassa_http_request_duration_seconds", map[string]string{"route": "unmatched", "code": "404"}, 1)
			want("kassa_attempts_pending", nil, 0)
			want("kassa_attempts_recovered_total", nil, 0)
			want("kassa_webhook_backlog", nil, 0)
			want("kassa_billing_subscriptions", map[string]string{"state": "due"}, 0)
			// The outbox gauge says what `kassa billing status` says.
			status := cliJSON(t, append([]string{"billing", "status"}, db...)...)
			want("kassa_outbox_backlog", nil, status["outbox_backlog"].(float64))
			pools := map[string][]string{"sqlite": {"write", "read"}, "postgres": {"pool"}}[backend]
			for _, p := range pools {
				if _, ok := got.Sample("kassa_db_connections_idle", map[string]string{"pool": p}); !ok {
					t.Errorf("no kassa_db_connections_idle for the %s pool", p)
				}
			}
			if n := got.Value("kassa_db_write_batch_size", map[string]string{"backend": backend}); n < 1 {
				t.Errorf("no batch of writes recorded on %s", backend)
			}
			// Every series the dashboard may refer to is in the exposition once the workload touched it;
			// billing's are counted in the billing package's TestMetrics.
			for _, name := range metrics.New().Names() {
				if _, ok := got[name]; !ok && !slices.Contains([]string{"kassa_billing_charges_total", "kassa_outbox_sends_total"}, name) {
					t.Errorf("%s is not in the exposition", name)
				}
			}
		})
	}
}

// The Grafana dashboard in deploy/grafana refers only to series Kassa exposes.
func TestGrafanaDashboardUsesExistingMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/kassa.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	names := metrics.New().Names()
	used := map[string]bool{}
	series := regexp.MustCompile(`\b((?:kassa|go|process)_[a-z_]+?)(_bucket|_sum|_count)?\b`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			continue
		}
		for _, tg := range p.Targets {
			found := series.FindAllStringSubmatch(tg.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: %q refers to no Kassa series", p.Title, tg.Expr)
			}
			for _, f := range found {
				name := f[1] + f[2]
				if !slices.Contains(names, name) && !slices.Contains(names, f[1]) {
					t.Errorf("panel %q refers to %s, which Kassa does not expose", p.Title, name)
				}
				used[f[1]] = true
			}
		}
	}
	for _, n := range names {
		if strings.HasPrefix(n, "kassa_") && !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestLoadGenerator runs every scenario and the ceiling briefly on both backends, as "make bench"
// does at length, the ISO 8583 ones through kassa-acquirer, and checks that each reports throughput,
// latencies and CPU (the host's too) without errors. The figures themselves are the benchmark's
// business, not this test's.
func TestLoadGenerator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a PostgreSQL cluster")
	}
	if err := pgcluster.Available(); err != nil {
		storetest.Unavailable(t, "PostgreSQL: %v", err)
	}
	dir := buildKassa(t)
	var out bytes.Buffer
	c := config{kassa: filepath.Join(dir, "kassa"), acquirer: filepath.Join(dir, "kassa-acquirer"), backends: []string{"sqlite", "postgres"},
		scenarios: []string{"sale", "token", "mixed", "iso8583", "iso8583-50ms"},
		clients:   4, duration: 700 * time.Millisecond, warmup: 200 * time.Millisecond, rounds: 1, ceiling: true, jsonOut: true}
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		switch {
		case r["machine"] != nil:
			seen["machine"] = true
		case r["iso8583_sales_per_s"] != nil:
			if r["iso8583_to_sale"].(float64) <= 0 || r["iso8583_50ms_to_bound"].(float64) <= 0 {
				t.Errorf("ISO 8583 line %v", r)
			}
			seen["iso8583 "+r["backend"].(string)] = true
		case r["ceiling_sales_per_s"] != nil:
			if r["ceiling_sales_per_s"].(float64) <= 0 || r["api_sales_per_s"].(float64) <= 0 || r["ratio"].(float64) <= 0 {
				t.Errorf("ceiling line %v", r)
			}
			seen["ceiling "+r["backend"].(string)] = true
		default:
			op := r["backend"].(string) + " " + r["operation"].(string)
			if r["ops_per_s"].(float64) <= 0 || r["errors"].(float64) != 0 || r["p50_ms"].(float64) <= 0 ||
				r["p99_ms"].(float64) < r["p50_ms"].(float64) || r["max_ms"].(float64) < r["p99_ms"].(float64) {
				t.Errorf("%s: %v", op, r)
			}
			if first := r["operation"] != "capture" && r["operation"] != "refund" && r["operation"] != "list"; first && r["cpu_s_per_1000"].(float64) <= 0 {
				t.Errorf("%s reports no server CPU: %v", op, r)
			}
			// The acquirer's host is measured in the scenarios that use it, and only there.
			if iso, host := strings.HasPrefix(r["scenario"].(string), "iso8583"), r["host_cpu_s_per_1000"]; iso != (host != nil) || iso && host.(float64) < 0 {
				t.Errorf("%s: host CPU %v", op, host)
			}
			seen[op] = true
		}
	}
	for _, want := range []string{"machine", "ceiling sqlite", "ceiling postgres", "iso8583 sqlite", "iso8583 postgres", "sqlite sale", "postgres sale",
		"sqlite token", "postgres token", "sqlite authorize", "sqlite capture", "sqlite refund", "sqlite list",
		"postgres authorize", "postgres capture", "postgres refund", "postgres list", "sqlite sale iso8583", "sqlite sale iso8583 50ms",
		"postgres sale iso8583", "postgres sale iso8583 50ms"} {
		if !seen[want] {
			t.Errorf("no result for %q in:\n%s", want, out.String())
		}
	}
}

// TestAcquirerOnOneProcessor: the host the iso8583 scenarios start runs its Go scheduler on one
// processor, so as to take from the machine no more than its work needs.
func TestAcquirerOnOneProcessor(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "kassa-acquirer") // it says where it listens as the real one does: its GOMAXPROCS
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"kassa-acquirer is listening on GOMAXPROCS=$GOMAXPROCS (ISO 8583)\"\n"+
		"echo 'HTTP on http://127.0.0.1:1: …'\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	a, err := startAcquirer(context.Background(), fake, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.stop()
	if a.addr != "GOMAXPROCS=1" {
		t.Errorf("the host runs with %s, want GOMAXPROCS=1", a.addr)
	}
}

// TestMedian: the comparisons over several rounds use each scenario's median, which an outlier round
// does not move.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		rs   []float64
		want float64
	}{{[]float64{3000}, 3000}, {[]float64{3100, 2500, 3000}, 3000}, {[]float64{2900, 3100, 1000, 3000}, 2950}} {
		if got := median(c.rs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.rs, got, c.want)
		}
	}
}

// The webhook benchmark end to end, small, on both backends: it measures sales without and with an
// endpoint subscribed to every event, with the deliveries those runs left behind, and times deliveries
// to its receiver, which must all arrive (it fails when some are still pending). Whether the targets are met is the benchmark's business.
func TestWebhooksBenchmarkReportsBothFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a PostgreSQL cluster")
	}
	if err := pgcluster.Available(); err != nil {
		storetest.Unavailable(t, "PostgreSQL: %v", err)
	}
	dir := buildKassa(t)
	var out bytes.Buffer
	webhooksMain([]string{"--kassa", filepath.Join(dir, "kassa"), "--clients", "4", "--duration", "700ms", "--warmup", "200ms",
		"--events", "200", "--rounds", "1"}, &out)
	line := regexp.MustCompile(`(?m)^(\w+) webhooks: sales (\d+)/s without an endpoint, (\d+)/s with one subscribed to \* \([0-9.]+ %, target ≥ 90 %\), ` +
		`leaving at most \d+ deliveries behind, delivered within [0-9.]+ s; 200 deliveries in [0-9.]+ s: (\d+) deliveries/s`)
	seen := map[string]bool{}
	for _, m := range line.FindAllStringSubmatch(out.String(), -1) {
		if m[2] == "0" || m[3] == "0" || m[4] == "0" {
			t.Errorf("a zero figure: %s", m[0])
		}
		seen[m[1]] = true
	}
	if !seen["sqlite"] || !seen["postgres"] {
		t.Fatalf("no figures for both backends in:\n%s", out.String())
	}
	if runs := regexp.MustCompile(`(?m)^\w+ webhooks: each run's sales/s without an endpoint [1-9]\d*, with it [1-9]\d* \(what it left behind delivered within \d+\.\d s\)$`).FindAllString(out.String(), -1); len(runs) != 2 {
		t.Fatalf("each run's figures not shown for both backends in:\n%s", out.String())
	}
}

// The latency-tolerance scenarios end to end, briefly, on SQLite, from 100 clients: the ISO 8583 host
// and the simulator 250 ms away, each beside the same path at once; the report carries sales/s, the
// bound min(ideal, at once), the ratio, the p99 and the server's peak memory, with the verdicts.
func TestLatencyToleranceReportsTheRatioAndMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	dir := buildKassa(t)
	var out bytes.Buffer
	c := config{kassa: filepath.Join(dir, "kassa"), acquirer: filepath.Join(dir, "kassa-acquirer"), backends: []string{"sqlite"},
		scenarios: []string{"iso8583", "iso8583-250ms", "sale", "sale-250ms"}, clients: 4, latencyClients: 100,
		duration: time.Second, warmup: 500 * time.Millisecond, rounds: 1, jsonOut: true}
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	seen := map[string]bool{}
	for _, r := range jsonLines(t, out.String()) {
		switch {
		case r["machine"] != nil, r["iso8583_sales_per_s"] != nil:
		case r["ratio_to_bound"] != nil:
			sales, ideal, bound, ratio := r["sales_per_s"].(float64), r["ideal_per_s"].(float64), r["bound_per_s"].(float64), r["ratio_to_bound"].(float64)
			atOnce, _ := r["at_once_per_s"].(float64)
			// 100 clients, each waiting 250 ms for every sale, make at most 400 a second; every sale
			// waits the 250 ms, so that the p99 cannot be less.
			if ideal != 400 || atOnce <= 0 || bound != min(ideal, atOnce) || sales <= 0 || sales > 1.1*ideal || !near(ratio, sales/bound) ||
				r["p99_ms"].(float64) < 250 || r["p99_ms"].(float64) > 30000 || r["latency_ms"] != 250.0 || r["clients"] != 100.0 ||
				r["target_ratio"] != 0.9 || r["target_p99_ms"] != 600.0 || r["target_rss_mb"] != 300.0 {
				t.Errorf("latency-tolerance line %v", r)
			}
			if rss := r["server_peak_rss_mb"].(float64); rss < 5 || rss > 4096 || r["server_rss_before_mb"].(float64) <= 0 {
				t.Errorf("the server's peak memory: %v", r)
			}
			for _, v := range []string{"ratio_met", "p99_met", "rss_met"} {
				if _, ok := r[v].(bool); !ok {
					t.Errorf("no %s: %v", v, r)
				}
			}
			seen[r["scenario"].(string)] = true
		default:
			if r["ops_per_s"].(float64) <= 0 || r["errors"].(float64) != 0 || r["server_peak_rss_mb"].(float64) <= 0 {
				t.Errorf("%s: %v", r["operation"], r)
			}
			seen[r["operation"].(string)] = true
		}
	}
	for _, want := range []string{"sale iso8583", "sale iso8583 250ms", "sale", "sale 250ms", "iso8583-250ms", "sale-250ms"} {
		if !seen[want] {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

// The CPU bound of sales: with the bare handler at 90 % of the cores for 0.1 s of the machine's CPU per
// answer and a sale costing 0.3 s, sales reach at most 0.1 / 0.3 / 0.9 of the ceiling measured; a run
// without the machine's figures has no bound. The machine's times are read from /proc/stat.
func TestCPUBound(t *testing.T) {
	bound, ok := cpuBound(summary{machineCPU: 0.3, busy: 1}, summary{machineCPU: 0.1, busy: 0.9})
	if !ok || !near(bound, 0.1/0.3/0.9) {
		t.Errorf("bound %v %v, want %v", bound, ok, 0.1/0.3/0.9)
	}
	if _, ok := cpuBound(summary{machineCPU: 0.3, busy: 1}, summary{}); ok {
		t.Error("a bound without the bare handler's figures")
	}
	t0 := readMachineTimes()
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	d := readMachineTimes().since(t0)
	if t0.busy <= 0 || d.busy <= 0 || d.share() <= 0 || d.share() > 1 {
		t.Errorf("machine times %+v, then %+v over a busy loop (share %v)", t0, d, d.share())
	}
}

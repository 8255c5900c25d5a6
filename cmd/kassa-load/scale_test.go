package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/synth"
)

// The scale benchmark end to end, tiny, on SQLite: it loads a history, runs the sale scenario on the
// empty and the loaded ledger in turn on two servers, and reports both sales figures, their ratio
// and the p99 of every list and filter, each list answered with transactions (a filter whose values
// did not match the loaded data fails the run). Whether the targets are met is the benchmark's
// business: one-second runs on a shared machine prove nothing either way.
func TestScaleBenchmarkReportsSalesAndLists(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kassa and starts two servers")
	}
	dir := buildKassa(t)
	var out bytes.Buffer
	c := scaleConfig{config: config{kassa: filepath.Join(dir, "kassa"), backends: []string{"sqlite"}, clients: 8,
		duration: time.Second, warmup: 300 * time.Millisecond, rounds: 1, jsonOut: true},
		transactions: 20_000, customers: 1000, requests: 10, minRatio: 0.9, listLimit: 20 * time.Millisecond}
	if _, err := runScale(context.Background(), c, &out); err != nil {
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
		case r["loaded_transactions"] != nil:
			if r["loaded_transactions"].(float64) != 20_000 || r["database_bytes"].(float64) <= 0 {
				t.Errorf("loaded: %v", r)
			}
			seen["loaded"] = true
		case r["scenario"] != nil:
			if r["ops_per_s"].(float64) <= 0 || r["errors"].(float64) != 0 {
				t.Errorf("sale run: %v", r)
			}
			seen[r["scenario"].(string)] = true
		case r["ratio"] != nil:
			empty, loaded, ratio := r["empty_sales_per_s"].(float64), r["loaded_sales_per_s"].(float64), r["ratio"].(float64)
			if empty <= 0 || loaded <= 0 || ratio != loaded/empty || r["ok"] != (ratio >= 0.9) {
				t.Errorf("sales: %v", r)
			}
			seen["ratio"] = true
		case r["page"] != nil:
			name := r["page"].(string)
			if f, failed := r["failure"].(string); failed {
				t.Errorf("%s: %s", name, f)
			} else if r["requests"].(float64) != 10 || r["p99_ms"].(float64) <= 0 || r["ok"] != (r["p99_ms"].(float64) <= 20) {
				t.Errorf("%s: %v", name, r)
			}
			seen[name] = true
		default:
			t.Errorf("unexpected line %v", r)
		}
	}
	want := []string{"machine", "loaded", "sale empty", "sale loaded", "ratio"}
	for _, p := range scaleLists(loadedLedger{sum: synth.Summary{PerDay: map[string]int{"2026-11-27": 1}}}) {
		want = append(want, p.name)
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("no %s in the report:\n%s", w, out.String())
		}
	}
}

package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestDrill is the short version of "make drill" that "make test" runs: on each
// backend, mixed load from a few clients through kassa-acquirer dropping 2 % of its answers, a node
// killed every 2 to 5 s for 35 s, the acquirer restarted once, PostgreSQL once; then the books, which
// must balance (the drill exits 0) with each check having checked something. Both backends run at
// once, so that the test takes well under a minute.
func TestDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a PostgreSQL cluster")
	}
	dir := buildKassa(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			if backend == "postgres" {
				if err := pgcluster.Available(); err != nil {
					storetest.Unavailable(t, "PostgreSQL: %v", err)
				}
			}
			var out bytes.Buffer
			code := drillMain([]string{"--kassa", filepath.Join(dir, "kassa"), "--acquirer", filepath.Join(dir, "kassa-acquirer"),
				"--backends", backend, "--clients", "6", "--duration", "35s", "--subscriptions", "5", "--settle", "60s"}, &out)
			if code != 0 {
				t.Fatalf("the drill exited %d:\n%s", code, out.String())
			}
			if !regexp.MustCompile(`(?m)^` + backend + `: the books balance$`).Match(out.Bytes()) {
				t.Fatalf("no verdict for %s:\n%s", backend, out.String())
			}
			// Every check checked something: a drill that ran nothing balances trivially.
			_, checks, _ := bytes.Cut(out.Bytes(), []byte("\ncheck "))
			for _, m := range regexp.MustCompile(`(?m)^(\S.{55}) +(\d+) +(\d+)  `).FindAllSubmatch(checks, -1) {
				if string(m[2]) == "0" && !bytes.HasPrefix(m[1], []byte("5xx")) {
					t.Errorf("the check %q checked nothing:\n%s", bytes.TrimSpace(m[1]), out.String())
				}
			}
			t.Log(out.String())
		})
	}
}

// TestSoak is a short soak ("make drill SOAK=10m" is the full one): on SQLite, the
// drill's load without faults at half of what an unpaced probe reached, the server sampled every
// 8 s. Every interval must have answered calls — a server that stops answering (as one did when a
// write waited for itself) fails here — with its p99, resident memory, heap and goroutines read, and
// the books must balance. Growth is judged over ten minutes by the full soak; over these few seconds,
// while caches fill, the limit is looser.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	t.Parallel()
	dir := buildKassa(t)
	var out bytes.Buffer
	code := drillMain([]string{"--kassa", filepath.Join(dir, "kassa"), "--acquirer", filepath.Join(dir, "kassa-acquirer"),
		"--backends", "sqlite", "--clients", "6", "--subscriptions", "3", "--settle", "60s",
		"--soak", "32s", "--soak-interval", "8s", "--soak-probe", "8s", "--soak-growth", "25"}, &out)
	if code != 0 {
		t.Fatalf("the soak exited %d:\n%s", code, out.String())
	}
	rows := regexp.MustCompile(`(?m)^ +(\d+)s +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+) +(\d+)$`).FindAllStringSubmatch(out.String(), -1)
	if len(rows) < 3 {
		t.Fatalf("%d samples, want at least 3:\n%s", len(rows), out.String())
	}
	for _, r := range rows {
		for i, what := range []string{"", "", "calls/s", "p99", "resident memory", "heap", "goroutines"} {
			if what != "" && strings.Trim(r[i], "0.") == "" {
				t.Errorf("the sample at %ss has no %s:\n%s", r[1], what, out.String())
			}
		}
	}
	if !regexp.MustCompile(`(?m)^sqlite: resident memory [+-][\d.]+ % from the first sample to the last, goroutines at rest [1-9]\d* before and [1-9]\d* after \([+-][\d.]+ %\); limit 25 %: the soak holds$`).Match(out.Bytes()) ||
		!regexp.MustCompile(`(?m)^sqlite: the books balance$`).Match(out.Bytes()) {
		t.Fatalf("no verdict:\n%s", out.String())
	}
	t.Log(out.String())
}

// The soak's verdict: resident memory's growth from the first sample to the last and goroutines' at
// rest, either beyond the limit failing, fewer than two samples or no count at rest failing, and each interval's rate and p99 from the calls answered
// in it.
func TestSoakVerdict(t *testing.T) {
	start := time.Now()
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	calls := []call{{end: at(1), took: 10 * time.Millisecond}, {end: at(2), took: 30 * time.Millisecond}, {end: at(3), took: 20 * time.Millisecond},
		{end: at(12), took: 5 * time.Millisecond}, {end: at(25), took: time.Second}}
	samples := windows([]soakSample{{at: 10 * time.Second, rss: 100 << 20, goroutines: 40}, {at: 20 * time.Second, rss: 105 << 20, goroutines: 40}}, start, calls)
	if samples[0].rate != 0.3 || samples[0].p99 != 30*time.Millisecond || samples[1].rate != 0.1 || samples[1].p99 != 5*time.Millisecond {
		t.Fatalf("windows: %+v", samples)
	}
	for _, c := range []struct {
		lastRSS    int64
		n          int
		rest       [2]int64
		rss, grows float64
		holds      bool
	}{
		{105 << 20, 2, [2]int64{40, 40}, 5, 0, true},
		{111 << 20, 2, [2]int64{40, 40}, 11, 0, false},
		{100 << 20, 2, [2]int64{40, 44}, 0, 10, false},
		{90 << 20, 2, [2]int64{40, 30}, -10, -25, true},
		{100 << 20, 1, [2]int64{40, 40}, 0, 0, false},
		{100 << 20, 2, [2]int64{0, 40}, 0, 0, false},
	} {
		r := &soakReport{limit: 10, rest: c.rest, samples: []soakSample{{rss: 100 << 20}, {rss: c.lastRSS}}[:c.n]}
		rss, g := r.growth()
		if rss != c.rss || g != c.grows || r.holds() != c.holds {
			t.Errorf("%+v: growth %.1f %%, %.1f %%, holds %v; want %.1f, %.1f, %v", c, rss, g, r.holds(), c.rss, c.grows, c.holds)
		}
	}
}

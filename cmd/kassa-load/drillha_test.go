package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestDrillHA is the short version of "make drill-ha" that "make test" runs: the primary's machine
// dying and hanging, once each — a Patroni primary and synchronous standby, two nodes on a multi-host
// URL, 8 clients for 30 s, the primary's Patroni and PostgreSQL killed with SIGKILL (die) or stopped
// with SIGSTOP and continued once the standby is primary (hang) at 6 s, one failover each. The books
// must balance: every request answered, every valid one 2xx (a stale read from the continued primary
// is not), every approved answer in the ledger, the ledger equal to the acquirer's journal, no
// stretch without an approved sale beyond 25 s, both nodes ready again without a restart; and each
// failover must have happened (the standby became primary and took writes). The etcd and standby
// modes run in "make drill-ha".
func TestDrillHA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, Patroni, PostgreSQL and servers")
	}
	if err := haAvailable(); err != nil {
		storetest.Unavailable(t, "the failover drill's cluster: %v", err)
	}
	t.Parallel()
	dir := buildKassa(t)
	var out bytes.Buffer
	code := drillHAMain([]string{"--kassa", filepath.Join(dir, "kassa"), "--acquirer", filepath.Join(dir, "kassa-acquirer"),
		"--fault", "die,hang", "--clients", "8", "--duration", "30s", "--fail-at", "6s", "--second-failover=false",
		"--subscriptions", "3", "--settle", "60s"}, &out)
	if code != 0 {
		t.Fatalf("the failover drill exited %d:\n%s", code, out.String())
	}
	if n := len(regexp.MustCompile(`(?m)^ +\+ *\d+\.\d s  pg\d is primary, [\d.]+ s after$`).FindAll(out.Bytes(), -1)); n != 2 ||
		!regexp.MustCompile(`(?m)^drill-ha die: the books balance$`).Match(out.Bytes()) ||
		!regexp.MustCompile(`(?m)^drill-ha hang: the books balance$`).Match(out.Bytes()) {
		t.Fatalf("%d failovers, want 2, or no verdict:\n%s", n, out.String())
	}
	// The summary's figures: a gap there was (the failover takes seconds), and sales approved. The gap
	// is bounded at 25 s here, not at the full drill's 15: this short run shares two cores with the
	// rest of the suite, where Patroni's loop and the promotion take seconds longer; the 15 s goal is
	// judged by "make drill-ha" on a machine of its own (docs/guides/patroni.md).
	for _, mode := range []string{"die", "hang"} {
		m := regexp.MustCompile(`(?m)^` + mode + ` +([\d.]+) s +(\d+) +(\d+) +(\d+) +(\d+) +yes$`).FindSubmatch(out.Bytes())
		if m == nil {
			t.Fatalf("no summary line of %s:\n%s", mode, out.String())
		}
		gapSeconds, _ := strconv.ParseFloat(string(m[1]), 64)
		approvedSales, _ := strconv.Atoi(string(m[5]))
		if gap := time.Duration(gapSeconds * float64(time.Second)); gap < time.Second || gap > 25*time.Second || approvedSales == 0 {
			t.Fatalf("%s: longest gap %v, %d sales approved: want a gap of 1 to 25 s and sales approved:\n%s", mode, gap, approvedSales, out.String())
		}
	}
	t.Log(out.String())
}

// The longest gap is the longest stretch between approved sales' answers within the load, its ends
// included; declined sales and other operations do not end it, and the 503s counted are those
// answered within it.
func TestLongestGap(t *testing.T) {
	start := time.Now()
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	sale := func(s float64, result string) call {
		return call{op: "sale", status: 200, end: at(s), body: []byte(`{"transaction_id":"t","transaction_result":"` + result + `"}`)}
	}
	calls := []call{
		sale(1, "APPROVED"), sale(3, "APPROVED"), sale(6, "DECLINED"), sale(10, "APPROVED"),
		{op: "authorize", status: 200, end: at(7), body: []byte(`{"transaction_id":"a","transaction_result":"APPROVED"}`)},
		{op: "sale", failures: []failure{{status: 503, at: at(4)}, {status: 503, at: at(5)}, {status: 502, at: at(5)}, {status: 503, at: at(11)}}},
	}
	g := longestGap(calls, start, at(12))
	if g.from != at(3) || g.to != at(10) || g.unavailable != 2 {
		t.Fatalf("longestGap = %s, want from +3 s to +10 s with 2 × 503", g.String(start))
	}
	// With no approved sale after the first, the gap runs to the load's end.
	if g := longestGap(calls[:1], start, at(12)); g.from != at(1) || g.to != at(12) {
		t.Fatalf("longestGap = %s, want from +1 s to +12 s", g.String(start))
	}
}

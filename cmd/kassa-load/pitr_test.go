package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestDrillPITR is the point-in-time recovery drill that "make test" runs: 6 clients for 20 s on
// PostgreSQL with its WAL archived by pgBackRest, a full backup under the load, a new cluster restored
// to a moment half-way through it. Every check must have checked something and found nothing wrong:
// the rows committed by the moment restored as they were and none after it, the acquirer's journal up
// to the moment against the ledger, key retries on both sides of it, the stored cards, and what was in
// flight settled by the restored node.
func TestDrillPITR(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, pgBackRest and servers")
	}
	if err := pgcluster.Available(); err != nil {
		storetest.Unavailable(t, "PostgreSQL: %v", err)
	}
	if _, err := exec.LookPath("pgbackrest"); err != nil {
		storetest.Unavailable(t, "pgBackRest: %v", err)
	}
	t.Parallel()
	dir := buildKassa(t)
	var out bytes.Buffer
	code := drillPITRMain([]string{"--kassa", filepath.Join(dir, "kassa"), "--acquirer", filepath.Join(dir, "kassa-acquirer"),
		"--clients", "6", "--duration", "20s", "--subscriptions", "3", "--sample", "40", "--settle", "30s"}, &out)
	if code != 0 {
		t.Fatalf("the point-in-time recovery drill exited %d:\n%s", code, out.String())
	}
	if !regexp.MustCompile(`(?m)^pitr: restored to \S+ \S+ \(\+\d+\.\d s of the load\) in [\d.]+ s: \d+ rows`).Match(out.Bytes()) ||
		!regexp.MustCompile(`(?m)^drill-pitr: the books balance$`).Match(out.Bytes()) {
		t.Fatalf("no restore or no verdict:\n%s", out.String())
	}
	_, checks, _ := bytes.Cut(out.Bytes(), []byte("\ncheck "))
	rows := regexp.MustCompile(`(?m)^(\S.{55}) +(\d+) +(\d+)  `).FindAllSubmatch(checks, -1)
	if len(rows) != 8 {
		t.Fatalf("%d checks, want 8:\n%s", len(rows), out.String())
	}
	for _, m := range rows {
		if string(m[2]) == "0" {
			t.Errorf("the check %q checked nothing:\n%s", bytes.TrimSpace(m[1]), out.String())
		}
	}
	t.Log(out.String())
}

// The comparison of the restored database with the original finds a row committed by the moment
// that is missing or changed, and a row committed after it; a row changed after the moment may be
// there in its earlier version, or not at all.
func TestExactlyTheMoment(t *testing.T) {
	at := time.Now()
	before, after := at.Add(-time.Second), at.Add(time.Second)
	original := tables{"transactions": {
		"(1)": {hash: "a", committed: before},
		"(2)": {hash: "b", committed: before},
		"(3)": {hash: "c2", committed: after}, // changed after the moment
		"(4)": {hash: "d", committed: after},  // made after it
	}}
	count := func(got tables) (missing, late int) {
		b := &books{}
		exactly(b, original, got, at)
		return b.rows[0].wrong, b.rows[1].wrong
	}
	if m, l := count(tables{"transactions": {"(1)": {hash: "a", committed: before}, "(2)": {hash: "b", committed: before},
		"(3)": {hash: "c1", committed: before}}}); m != 0 || l != 0 {
		t.Fatalf("the database of the moment: %d missing, %d late", m, l)
	}
	if m, l := count(tables{"transactions": {"(1)": {hash: "a", committed: before}, "(2)": {hash: "x", committed: before}}}); m != 1 || l != 0 {
		t.Fatalf("a row changed before the moment is not as it was: %d missing, %d late; want 1, 0", m, l)
	}
	if m, l := count(tables{"transactions": {"(1)": {hash: "a", committed: before}}}); m != 1 || l != 0 {
		t.Fatalf("a row committed before the moment lost: %d missing, %d late; want 1, 0", m, l)
	}
	if m, l := count(tables{"transactions": {"(1)": {hash: "a", committed: before}, "(2)": {hash: "b", committed: before},
		"(4)": {hash: "d", committed: after}}}); m != 0 || l != 1 {
		t.Fatalf("a row committed after the moment: %d missing, %d late; want 0, 1", m, l)
	}
}

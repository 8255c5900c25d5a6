package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestRollingUpgrade is the rolling-upgrade drill that "make test" runs: two nodes of the previous
// release (the newest v* tag before this commit, built from the repository's history) under load on
// one PostgreSQL database, upgraded to this commit's build one at a time. Every request must be
// answered with no 5xx, the books must balance, and each node must have been upgraded during the
// load: a migration that an old node cannot run beside, or a node that needs the others stopped,
// fails here.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and starts servers and a PostgreSQL cluster")
	}
	if err := pgcluster.Available(); err != nil {
		storetest.Unavailable(t, "PostgreSQL: %v", err)
	}
	t.Parallel()
	dir := buildKassa(t)
	var out bytes.Buffer
	code := upgradeMain([]string{"--kassa", filepath.Join(dir, "kassa"), "--acquirer", filepath.Join(dir, "kassa-acquirer"),
		"--clients", "6", "--duration", "30s", "--subscriptions", "4"}, &out)
	if code != 0 {
		t.Fatalf("the upgrade drill exited %d:\n%s", code, out.String())
	}
	if n := len(regexp.MustCompile(`(?m)^upgrade: kassa \d runs `).FindAll(out.Bytes(), -1)); n != 2 {
		t.Fatalf("%d nodes upgraded, want 2:\n%s", n, out.String())
	}
	if !regexp.MustCompile(`(?m)^postgres: the books balance$`).Match(out.Bytes()) {
		t.Fatalf("no verdict:\n%s", out.String())
	}
	// Every check checked something, the 5xx count included being a count of none.
	_, checks, _ := bytes.Cut(out.Bytes(), []byte("\ncheck "))
	for _, m := range regexp.MustCompile(`(?m)^(\S.{55}) +(\d+) +(\d+)  `).FindAllSubmatch(checks, -1) {
		if string(m[2]) == "0" && !bytes.HasPrefix(m[1], []byte("5xx")) {
			t.Errorf("the check %q checked nothing:\n%s", bytes.TrimSpace(m[1]), out.String())
		}
	}
	t.Log(out.String())
}

package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestDrill is the short version of "make drill" that "make test" runs (issue 20, point 1): on each
// backend, mixed load from a few clients through kassa-acquirer dropping 2 % of its answers, a node
// killed every 2 to 5 s for 35 s, the acquirer restarted once, PostgreSQL once; then the books, which
// must balance (the drill exits 0) with each check having checked something. Both backends run at
// once, so that the test takes well under a minute.
func TestDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a PostgreSQL cluster")
	}
	dir := t.TempDir()
	for _, cmd := range []string{"kassa", "kassa-acquirer"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "../"+cmd).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
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

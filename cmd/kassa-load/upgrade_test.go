package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestRollingUpgrade is the rolling-upgrade drill that "make test" runs: two nodes of the previous
// release (the newest release deploy/releases lists before this commit, built from the repository's
// history) under load on
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

// TestPreviousReleaseFromTheList resolves the previous release from the list of releases in a
// repository without tags, as a clone of one branch is: the newest listed commit before HEAD, never
// HEAD itself nor a commit off HEAD's history; a listed commit the clone lacks is an error.
func TestPreviousReleaseFromTheList(t *testing.T) {
	dir := t.TempDir()
	git := gitIn(t.Context(), dir)
	must := func(args ...string) string {
		t.Helper()
		out, err := git(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	must("init", "--quiet", "--initial-branch=main")
	must("config", "user.email", "drill@example.com")
	must("config", "user.name", "drill")
	commit := func(msg string) string {
		must("commit", "--quiet", "--allow-empty", "-m", msg)
		return must("rev-parse", "HEAD")
	}
	first, second := commit("first"), commit("second")
	must("checkout", "--quiet", "-b", "side")
	side := commit("side")
	must("checkout", "--quiet", "main")
	third := commit("third")
	list := filepath.Join(dir, "releases")
	write := func(lines string) {
		if err := os.WriteFile(list, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want string) {
		t.Helper()
		got, err := previousRelease(git, list)
		if err != nil || got != want {
			t.Fatalf("previous release %q, %v; want %q", got, err, want)
		}
	}
	write("# oldest first\nv1 " + first + "\nv2 " + second + "\nv3 " + side + "\n")
	check(second) // v3 is off HEAD's history
	write("v1 " + first + "\nv2 " + second + "\nv4 " + third + "\n")
	check(second) // v4 is HEAD itself
	must("checkout", "--quiet", second)
	check(first)
	must("checkout", "--quiet", first)
	if got, err := previousRelease(git, list); err == nil {
		t.Fatalf("a release before the first: %q", got)
	}
	write("v1 0123456789012345678901234567890123456789\n")
	if got, err := previousRelease(git, list); err == nil || !strings.Contains(err.Error(), "not in this clone") {
		t.Fatalf("a commit the clone lacks: %q, %v", got, err)
	}
}

package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The configuration reference in docs/guides/configuration.md is what the flags of this revision
// say, whatever KASSA_ variables the environment that makes it holds: after a flag is added or
// changed, go generate ./cmd/kassa rewrites the page (kassa docs flags --write), and this test fails
// until then.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/guides/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	documented, ok := generated(string(page))
	if !ok {
		t.Fatal("docs/guides/configuration.md has no <!-- flags:begin … --> … <!-- flags:end --> section")
	}
	stdout, stderr, code := cliEnv(t, []string{"KASSA_ADDR=0.0.0.0:9999", "KASSA_DATA_DIR=/elsewhere", "KASSA_DEMO=1"}, "docs", "flags")
	if code != 0 {
		t.Fatalf("kassa docs flags: exit %d, %s", code, stderr)
	}
	if !strings.Contains(stdout, "### kassa serve\n") || !strings.Contains(stdout, "| `--addr string` | `127.0.0.1:8080` | `KASSA_ADDR` |") {
		t.Fatalf("kassa docs flags printed no serve table with --addr's default:\n%s", stdout)
	}
	if documented != stdout {
		t.Fatalf("docs/guides/configuration.md is stale: run go generate ./cmd/kassa (%s)", difference(documented, stdout))
	}
}

// --write puts the reference between the page's markers and leaves the rest of the page as it was; a
// page without the markers is refused and left alone.
func TestDocsFlagsWrite(t *testing.T) {
	t.Parallel()
	ref, _, code := cli(t, "docs", "flags")
	if code != 0 {
		t.Fatalf("kassa docs flags: exit %d", code)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "configuration.md")
	before := "# Configuration\n\nWritten by hand.\n\n<!-- flags:begin: generated -->\nstale\n<!-- flags:end -->\n\nAfter.\n"
	if err := os.WriteFile(page, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := cli(t, "docs", "flags", "--write", page); code != 0 {
		t.Fatalf("kassa docs flags --write: exit %d, %s", code, stderr)
	}
	b, _ := os.ReadFile(page)
	want := strings.Replace(before, "stale\n", ref, 1)
	if string(b) != want {
		t.Fatalf("the page became (%s)", difference(want, string(b)))
	}
	unmarked := filepath.Join(dir, "unmarked.md")
	if err := os.WriteFile(unmarked, []byte("# No markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := cli(t, "docs", "flags", "--write", unmarked); code != 1 || !strings.Contains(stderr, "markers") {
		t.Fatalf("kassa docs flags --write on a page without markers: exit %d, %q", code, stderr)
	}
	if b, _ := os.ReadFile(unmarked); string(b) != "# No markers\n" {
		t.Fatalf("the page without markers became %q", b)
	}
}

// generated is what a page holds between its flags markers.
func generated(page string) (string, bool) {
	_, rest, begun := strings.Cut(page, "<!-- flags:begin")
	_, rest, _ = strings.Cut(rest, "-->\n")
	section, _, ended := strings.Cut(rest, "<!-- flags:end -->")
	return section, begun && ended
}

// difference names the first line where want and got differ.
func difference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d is %q, the flags say %q", i+1, wl, gl)
		}
	}
	return "they differ"
}

package client_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeProgram builds the documentation's Go client program as an integrator's own module would,
// one that requires this module (through a replace directive, for the working tree), and runs it
// against the test server: it prints the approved sale.
func TestReadmeProgram(t *testing.T) {
	t.Parallel()
	src := documentedBlock(t, "<!-- go-client:", "go")
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/shop\n\ngo 1.26.0\n\nrequire github.com/kassapay/kassa/client v0.0.0\n\n" +
		"replace github.com/kassapay/kassa/client => " + here + "\n"
	for name, text := range map[string]string{"go.mod": gomod, "go.sum": string(sum), "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = dir
	// -mod=mod lets go add the client's own requirements to the new go.mod, from this module's graph.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run the README's program: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "APPROVED ") {
		t.Errorf("the README's program printed %q, want APPROVED and the transaction's id", out)
	}
}

// documentedBlock is the code block (fenced as lang) after marker, which must be said once in all of
// README.md, CONTRIBUTING.md and the pages under docs/. It is internal/readmetest.Block for this module, which cannot
// import the server's internal packages.
func documentedBlock(t *testing.T, marker, lang string) string {
	t.Helper()
	paths := []string{"../README.md", "../CONTRIBUTING.md"}
	err := filepath.WalkDir("../docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	var text string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for range strings.Count(string(b), marker) {
			found, text = append(found, p), string(b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%q is in the documentation %d times (%v), not once", marker, len(found), found)
	}
	_, rest, _ := strings.Cut(text, marker)
	_, rest, opened := strings.Cut(rest, "```"+lang+"\n")
	block, _, closed := strings.Cut(rest, "```")
	if !opened || !closed {
		t.Fatalf("%s has no closed %s block after %q", found[0], lang, marker)
	}
	return block
}

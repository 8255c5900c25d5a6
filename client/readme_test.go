package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeProgram builds the README's Go client program as an integrator's own module would, one
// that requires this module (through a replace directive, for the working tree), and runs it against
// the test server: it prints the approved sale.
func TestReadmeProgram(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, marked := strings.Cut(string(readme), "<!-- go-client:")
	_, rest, opened := strings.Cut(rest, "```go\n")
	src, _, closed := strings.Cut(rest, "```")
	if !marked || !opened || !closed {
		t.Fatal("README.md has no closed go block after <!-- go-client: -->")
	}
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

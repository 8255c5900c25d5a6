package webhook

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/readmetest"
)

// The README's Go example builds, against the library version Kassa's tests verify with, from the
// module cache (no network).
func TestReadmeGoExample(t *testing.T) {
	dir := t.TempDir()
	src := readmetest.Block(t, "And in Go with the specification's library", "go")
	sum, err := os.ReadFile(filepath.Join("..", "..", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(sum), "\n") {
		if strings.HasPrefix(l, "github.com/standard-webhooks/") {
			lines = append(lines, l)
		}
	}
	files := map[string]string{
		"main.go": src,
		"go.mod":  "module example\n\ngo 1.22\n\nrequire github.com/standard-webhooks/standard-webhooks/libraries v0.0.1\n",
		"go.sum":  strings.Join(lines, "\n") + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "vet", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's Go example does not build: %v\n%s", err, out)
	}
}

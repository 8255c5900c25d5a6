package client_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent runs the //go:generate command of doc.go in a temporary directory, with
// copies of cfg.yaml and overlay.yaml and this repository's api/openapi.yaml, and fails unless what it
// writes is kassa.gen.go byte for byte: after a change to any of them, `make generate` (`go -C client generate`).
func TestGeneratedCodeIsCurrent(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for line := range strings.Lines(string(doc)) {
		if rest, ok := strings.CutPrefix(line, "//go:generate go tool oapi-codegen "); ok {
			args = strings.Fields(rest)
		}
	}
	if len(args) == 0 {
		t.Fatal("doc.go has no //go:generate go tool oapi-codegen line")
	}
	dir := t.TempDir()
	// The version that go.mod pins, as `go tool` runs it.
	tool := filepath.Join(dir, "oapi-codegen")
	if out, err := exec.Command("go", "build", "-o", tool, "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen").CombinedOutput(); err != nil {
		t.Fatalf("build oapi-codegen: %v\n%s", err, out)
	}
	for _, name := range []string{"cfg.yaml", "overlay.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := filepath.Abs(args[len(args)-1])
	if err != nil {
		t.Fatal(err)
	}
	args[len(args)-1] = spec
	cmd := exec.Command(tool, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	want, err := os.ReadFile(filepath.Join(dir, "kassa.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("kassa.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("kassa.gen.go is stale: run make generate (go -C client generate) and commit it (%s)", firstDifference(got, want))
	}
}

// firstDifference names the first line where the committed file and the regenerated one differ.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, regenerated %q", i+1, gl, wl)
		}
	}
	return "they differ"
}

// Package readmetest reads README.md's examples for tests, so that what the README shows is what the
// tests run.
package readmetest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Block returns the code block of README.md (fenced as lang) that follows the line holding marker.
func Block(t testing.TB, marker, lang string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("README.md has no %q block", marker)
	}
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("the README's %q block is not a closed %s block", marker, lang)
	}
	return block
}

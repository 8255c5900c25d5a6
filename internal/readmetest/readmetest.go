// Package readmetest reads README.md's examples for tests, so that what the README shows is what the
// tests run.
package readmetest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// sample is what Match reads as a placeholder in a README block: "…", or a run of at least 8
// lowercase hex characters (an id or a secret made at random).
var sample = regexp.MustCompile(`…|\b[0-9a-f]{8,}\b`)

// Match compares text, what a program printed, with a README block that shows it, line by line. In
// the block "…" stands for any text, and a run of at least 8 lowercase hex characters with a digit in
// it (an id or a secret, different on each run) for a run as long. It returns each such value of the
// block with the value in its place in text, or an error naming the first line that differs.
func Match(block, text string) (map[string]string, error) {
	want := strings.Split(strings.TrimRight(block, "\n"), "\n")
	got := strings.Split(strings.TrimRight(text, "\n"), "\n")
	values := map[string]string{}
	for i, line := range want {
		if i >= len(got) {
			return nil, fmt.Errorf("the output ends before line %d, %q", i+1, line)
		}
		var re strings.Builder
		var hex []string
		at := 0
		for _, m := range sample.FindAllStringIndex(line, -1) {
			re.WriteString(regexp.QuoteMeta(line[at:m[0]]))
			switch v := line[m[0]:m[1]]; {
			case v == "…":
				re.WriteString(".*")
			case strings.ContainsAny(v, "0123456789"):
				fmt.Fprintf(&re, "([0-9a-f]{%d})", len(v))
				hex = append(hex, v)
			default:
				re.WriteString(v)
			}
			at = m[1]
		}
		re.WriteString(regexp.QuoteMeta(line[at:]))
		found := regexp.MustCompile("^" + re.String() + "$").FindStringSubmatch(got[i])
		if found == nil {
			return nil, fmt.Errorf("line %d is %q; the README shows %q", i+1, got[i], line)
		}
		for j, v := range hex {
			if prev, ok := values[v]; ok && prev != found[j+1] {
				return nil, fmt.Errorf("line %d has %s where the README's %s was %s before", i+1, found[j+1], v, prev)
			}
			values[v] = found[j+1]
		}
	}
	if len(got) > len(want) {
		return nil, fmt.Errorf("the output goes on after the README's last line: %q", got[len(want)])
	}
	return values, nil
}

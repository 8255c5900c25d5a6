// Package readmetest reads the examples of the documentation — README.md, CONTRIBUTING.md and every
// Markdown page under docs/ — for tests, so that what the documentation shows is what the tests run.
package readmetest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Document is one Markdown file of the documentation.
type Document struct {
	Path string // from the repository's root, with slashes: "README.md", "docs/guides/webhooks.md"
	Text string
}

// root is the repository's root directory.
func root() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..")
}

// Documents returns README.md and CONTRIBUTING.md, then every Markdown file under docs/ in the order
// of their paths.
func Documents(t testing.TB) []Document {
	t.Helper()
	docs, err := documents(root())
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func documents(root string) ([]Document, error) {
	paths := []string{"README.md", "CONTRIBUTING.md"}
	var under []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, path)
		under = append(under, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(under)
	var docs []Document
	for _, p := range append(paths, under...) {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		docs = append(docs, Document{Path: p, Text: string(b)})
	}
	return docs, nil
}

// Block returns the code block (fenced as lang; "" for a block with no language) that follows marker
// in the documentation. The marker must occur exactly once in all of it, so that a test never runs a
// block of another page than the one it means.
func Block(t testing.TB, marker, lang string) string {
	t.Helper()
	block, err := find(Documents(t), marker, lang)
	if err != nil {
		t.Fatal(err)
	}
	return block
}

// find is Block over docs.
func find(docs []Document, marker, lang string) (string, error) {
	var at []string
	var text string
	for _, d := range docs {
		for range strings.Count(d.Text, marker) {
			at = append(at, d.Path)
		}
		if strings.Contains(d.Text, marker) {
			text = d.Text
		}
	}
	switch {
	case len(at) == 0:
		return "", fmt.Errorf("no page of the documentation (README.md, CONTRIBUTING.md, docs/) has a %q block", marker)
	case len(at) > 1:
		return "", fmt.Errorf("%q is in the documentation %d times (%s): a block's marker must be said once", marker, len(at), strings.Join(at, ", "))
	}
	_, rest, _ := strings.Cut(text, marker)
	_, rest, ok := strings.Cut(rest, "```"+lang+"\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		return "", fmt.Errorf("%s: the %q block is not a closed %s block", at[0], marker, lang)
	}
	return block, nil
}

// sample is what Match reads as a placeholder in a documented block: "…", or a run of at least 8
// lowercase hex characters (an id or a secret made at random).
var sample = regexp.MustCompile(`…|\b[0-9a-f]{8,}\b`)

// Match compares text, what a program printed, with a documented block that shows it, line by line.
// In the block "…" stands for any text, and a run of at least 8 lowercase hex characters with a digit
// in it (an id or a secret, different on each run) for a run as long. It returns each such value of
// the block with the value in its place in text, or an error naming the first line that differs.
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
			return nil, fmt.Errorf("line %d is %q; the documentation shows %q", i+1, got[i], line)
		}
		for j, v := range hex {
			if prev, ok := values[v]; ok && prev != found[j+1] {
				return nil, fmt.Errorf("line %d has %s where the documentation's %s was %s before", i+1, found[j+1], v, prev)
			}
			values[v] = found[j+1]
		}
	}
	if len(got) > len(want) {
		return nil, fmt.Errorf("the output goes on after the documentation's last line: %q", got[len(want)])
	}
	return values, nil
}

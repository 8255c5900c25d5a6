package readmetest

import (
	"strings"
	"testing"
)

// A block is found on whichever page holds its marker; a marker said twice, on one page or on two, or
// said nowhere, is refused with the pages named, as is a block left open.
func TestFindNeedsOneMarker(t *testing.T) {
	docs := []Document{
		{"README.md", "# Kassa\n\n<!-- run: -->\n```sh\nmake run\n```\n"},
		{"docs/guides/a.md", "<!-- a: -->\n```go\npackage a\n```\n<!-- twice -->\n```sh\n1\n```\n<!-- twice -->\n```sh\n2\n```\n"},
		{"docs/guides/b.md", "<!-- again -->\n```sh\nx\n```\n<!-- open: -->\n```sh\nnever closed\n"},
		{"docs/design/c.md", "<!-- again -->\n```sh\ny\n```\n"},
	}
	for marker, want := range map[string]string{"<!-- run:": "make run\n", "<!-- a:": "package a\n"} {
		lang := map[string]string{"<!-- run:": "sh", "<!-- a:": "go"}[marker]
		if got, err := find(docs, marker, lang); got != want || err != nil {
			t.Errorf("find(%q) = %q, %v; want %q", marker, got, err, want)
		}
	}
	for marker, names := range map[string][]string{
		"<!-- twice -->":   {"2 times", "docs/guides/a.md, docs/guides/a.md"},
		"<!-- again -->":   {"2 times", "docs/guides/b.md, docs/design/c.md"},
		"<!-- nowhere -->": {"no page"},
		"<!-- open: -->":   {"docs/guides/b.md", "not a closed sh block"},
	} {
		_, err := find(docs, marker, "sh")
		for _, name := range names {
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("find(%q) = %v; want an error saying %q", marker, err, name)
			}
		}
	}
}

// The documentation is README.md and CONTRIBUTING.md first, then every page under docs/, each once,
// by path.
func TestDocumentsAreTheREADMEAndDocs(t *testing.T) {
	docs := Documents(t)
	if len(docs) < 3 || docs[0].Path != "README.md" || docs[1].Path != "CONTRIBUTING.md" {
		t.Fatalf("Documents = %d pages, beginning with %q", len(docs), docs[0].Path)
	}
	for i, d := range docs[2:] {
		if !strings.HasPrefix(d.Path, "docs/") || !strings.HasSuffix(d.Path, ".md") || d.Text == "" {
			t.Errorf("page %d is %q, %d bytes", i+2, d.Path, len(d.Text))
		}
		if i > 0 && docs[i+1].Path >= d.Path {
			t.Errorf("%q comes after %q", d.Path, docs[i+1].Path)
		}
	}
}

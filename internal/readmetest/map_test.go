package readmetest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README is where a newcomer starts, and stays short: at most 250 lines, beginning with what Kassa
// is, then the two commands, a first sale and the map of the documentation, whose index
// (docs/README.md) links every page under docs/, so that no page is out of a reader's reach.
func TestREADMEIsAShortStartWithAMap(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 250 {
		t.Errorf("README.md has %d lines; at most 250", n)
	}
	var headings []string
	for line := range strings.Lines(string(readme)) {
		if strings.HasPrefix(line, "## ") {
			headings = append(headings, strings.TrimSpace(line[3:]))
		}
	}
	want := []string{"Two commands", "A first sale in three commands", "Documentation", "Tests"}
	if strings.Join(headings, "|") != strings.Join(want, "|") {
		t.Errorf("README.md's sections: %q, want %q", headings, want)
	}
	for _, s := range []string{"make run", "make test", "](docs/README.md)"} {
		if !strings.Contains(string(readme), s) {
			t.Errorf("README.md does not mention %s", s)
		}
	}
	index, err := os.ReadFile("../../docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range regexp.MustCompile(`\]\(([^)#\s]+\.md)`).FindAllStringSubmatch(string(index), -1) {
		linked[filepath.Clean(filepath.Join("docs", m[1]))] = true
	}
	pages, err := filepath.Glob("../../docs/*/*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../docs/*/*/*.md")
	pages = append(pages, more...)
	if len(pages) < 30 {
		t.Fatalf("%d pages under docs/: the glob is wrong", len(pages))
	}
	for _, p := range pages {
		rel := strings.TrimPrefix(filepath.ToSlash(p), "../../")
		if !linked[rel] {
			t.Errorf("docs/README.md does not link %s", rel)
		}
	}
}

// The contributor's guide answers what a newcomer to the code asks first, a section each: how the code
// is laid out, the tests (one package's, on PostgreSQL too), a migration, an API field, a dashboard
// page, a processor connector, and the commit convention (a subject of at most 72 characters).
func TestContributingCoversTheFirstQuestions(t *testing.T) {
	b, err := os.ReadFile("../../CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, h := range []string{"## How the code is laid out, and why", "## Tests", "## A migration", "## An API field",
		"## A dashboard page", "## A processor connector", "## Commits"} {
		if !strings.Contains(text, "\n"+h+"\n") {
			t.Errorf("CONTRIBUTING.md has no section %q", h)
		}
	}
	for _, s := range []string{"KASSA_REQUIRE_ALL", "72"} {
		if !strings.Contains(text, s) {
			t.Errorf("CONTRIBUTING.md does not mention %s", s)
		}
	}
}

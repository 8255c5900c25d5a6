package readmetest_test

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/kassapay/kassa/internal/readmetest"
)

// page is one document split into its shell blocks and the rest (prose, tables and other blocks).
type page struct {
	path  string
	shell []string
	prose string
}

// pages splits every document of the documentation (README.md and docs/).
func pages(t *testing.T) []page {
	t.Helper()
	var out []page
	for _, d := range readmetest.Documents(t) {
		p := page{path: d.Path}
		var rest, block strings.Builder
		in, isShell := false, false
		for line := range strings.Lines(d.Text) {
			switch {
			case strings.HasPrefix(line, "```") && !in:
				in, isShell = true, strings.TrimSpace(line) == "```sh"
				block.Reset()
			case strings.HasPrefix(line, "```"):
				in = false
				if isShell {
					p.shell = append(p.shell, block.String())
				}
			case in && isShell:
				block.WriteString(line)
			default:
				rest.WriteString(line)
			}
		}
		p.prose = rest.String()
		out = append(out, p)
	}
	return out
}

// The documentation's shell blocks and its CLI table run the CLI as bin/kassa, which make build and
// make run build, never as a kassa on the PATH that a newcomer does not have, nor through go run:
// a command copied from any page works from the repository as it stands.
func TestDocumentationRunsTheBuiltCLI(t *testing.T) {
	bare := regexp.MustCompile(`(?m)^\s*(?:[A-Z_]+=\S*\s+)*(kassa\s|go run \./cmd/kassa)`)
	row := regexp.MustCompile("(?m)^\\| `(\\S*kassa) ")
	rows, allowedOrigins := 0, false
	for _, p := range pages(t) {
		for _, b := range p.shell {
			if m := bare.FindString(b); m != "" {
				t.Errorf("a block of %s runs %q rather than bin/kassa:\n%s", p.path, strings.TrimSpace(m), b)
			}
		}
		for _, r := range row.FindAllStringSubmatch(p.prose, -1) {
			rows++
			if r[1] != "bin/kassa" {
				t.Errorf("a row of %s's CLI table runs %s rather than bin/kassa", p.path, r[1])
			}
		}
		allowedOrigins = allowedOrigins || strings.Contains(p.prose, "| `bin/kassa merchant update --merchant-id M --allowed-origins ")
	}
	if rows == 0 {
		t.Fatal("the documentation has no CLI table")
	}
	if !allowedOrigins {
		t.Error("the CLI table has no row for merchant update --allowed-origins")
	}
}

// Every $VARIABLE a page's shell blocks use is either set by a block of that page (from the field of
// an answer that it picks with jq, or from what make run printed) or named in the page's prose, which
// says what fills it: a reader who lands on one page learns there where each value comes from.
func TestDocumentationVariablesSaidWhereFrom(t *testing.T) {
	assign := regexp.MustCompile(`(?m)^\s*([A-Z_][A-Z0-9_]*)=`)
	use := regexp.MustCompile(`\$\{?([A-Z_][A-Z0-9_]*)`)
	for _, p := range pages(t) {
		set := map[string]bool{}
		for _, b := range p.shell {
			for _, m := range assign.FindAllStringSubmatch(b, -1) {
				set[m[1]] = true
			}
		}
		var unexplained []string
		for _, b := range p.shell {
			for _, m := range use.FindAllStringSubmatch(b, -1) {
				v := m[1]
				if !set[v] && !strings.Contains(p.prose, "`$"+v+"`") && !slices.Contains(unexplained, v) {
					unexplained = append(unexplained, v)
				}
			}
		}
		if len(unexplained) > 0 {
			t.Errorf("%s: blocks use variables that no block of the page sets and its text does not explain: %v", p.path, unexplained)
		}
	}
}

// Match takes "…" for any text and a hex run for any run as long, returns what stood in for each, and
// names the first line that differs.
func TestMatch(t *testing.T) {
	block := "id 3cf57c11b7\nat …/data\nsecret 3cf57c11b7:30c88c35e7\n"
	got, err := readmetest.Match(block, "id 0123456789\nat /tmp/x/data\nsecret 0123456789:abcdef0123\n")
	if err != nil || got["3cf57c11b7"] != "0123456789" || got["30c88c35e7"] != "abcdef0123" {
		t.Fatalf("Match = %v, %v", got, err)
	}
	for _, text := range []string{
		"id 0123456789\nat /tmp/x/data\nsecret 9999999999:abcdef0123\n", // the same sample, another value
		"id 012345678\nat /tmp/x/data\nsecret 012345678:abcdef0123\n",   // a value of another length
		"id 0123456789\nat /tmp/x/data\n",                               // a line short
		"id 0123456789\nat /tmp/x/data\nsecret 0123456789:abcdef0123\nmore\n",
		"ID 0123456789\nat /tmp/x/data\nsecret 0123456789:abcdef0123\n",
	} {
		if _, err := readmetest.Match(block, text); err == nil {
			t.Errorf("Match took %q", text)
		}
	}
}

// The documentation says what each thing does, not where a description is still to be written: a
// placeholder left in it (OVERVIEW_TEXT stood for the dashboard's Home for a while) fails here. Every
// page is read whole, code blocks included, and the page that describes the dashboard must be among
// them.
func TestDocumentationHasNoPlaceholders(t *testing.T) {
	placeholder := regexp.MustCompile(`\b(?:TODO|TBD|FIXME|XXX)\b|\b[A-Z][A-Z0-9]*_(?:TEXT|HERE|PLACEHOLDER)\b`)
	dashboard := false
	for _, d := range readmetest.Documents(t) {
		dashboard = dashboard || d.Path == "docs/guides/dashboard.md"
		for i, line := range strings.Split(d.Text, "\n") {
			if m := placeholder.FindString(line); m != "" {
				t.Errorf("%s:%d holds the placeholder %s: %s", d.Path, i+1, m, strings.TrimSpace(line))
			}
		}
	}
	if !dashboard {
		t.Fatal("no page describes the dashboard")
	}
}

// Every relative link of the documentation leads to a file of the repository and, when it names a
// heading (#anchor), to a heading of that page, as GitHub makes anchors of headings: pages moved, split
// or renamed leave no link behind.
func TestDocumentationLinksResolve(t *testing.T) {
	docs := readmetest.Documents(t)
	anchors := map[string]map[string]bool{}
	for _, d := range docs {
		anchors[d.Path] = headingAnchors(d.Text)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, d := range docs {
		for _, m := range link.FindAllStringSubmatch(withoutCode(d.Text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			if file == "" {
				file = d.Path
			} else {
				file = path.Clean(path.Join(path.Dir(d.Path), file))
			}
			if _, err := os.Stat("../../" + file); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", d.Path, target)
				continue
			}
			if anchor != "" {
				if a, ok := anchors[file]; !ok || !a[anchor] {
					t.Errorf("%s links to %s, but %s has no heading #%s", d.Path, target, file, anchor)
				}
			}
		}
	}
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// withoutCode is text without its fenced code blocks and inline code, where a "](…)" is not a link.
func withoutCode(text string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(inlineCode.ReplaceAllString(line, ""))
		}
	}
	return b.String()
}

// headingAnchors are the anchors GitHub gives the headings of a Markdown page: the heading's text in
// lower case, without punctuation but hyphens and underscores, spaces made hyphens, and "-1", "-2"…
// after a repeated one.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	in := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "```") {
			in = !in
		}
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if in || !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var a strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		anchor := a.String()
		if n := seen[anchor]; n > 0 {
			out[anchor+"-"+strconv.Itoa(n)] = true
		} else {
			out[anchor] = true
		}
		seen[anchor]++
	}
	return out
}

package readmetest_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/readmetest"
)

// readme splits README.md into its shell blocks and the rest (prose, tables and other blocks).
func readme(t *testing.T) (shell []string, prose string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rest, block strings.Builder
	in, isShell := false, false
	for line := range strings.Lines(string(b)) {
		switch {
		case strings.HasPrefix(line, "```") && !in:
			in, isShell = true, strings.TrimSpace(line) == "```sh"
			block.Reset()
		case strings.HasPrefix(line, "```"):
			in = false
			if isShell {
				shell = append(shell, block.String())
			}
		case in && isShell:
			block.WriteString(line)
		default:
			rest.WriteString(line)
		}
	}
	return shell, rest.String()
}

// The README's shell blocks and its CLI table run the CLI as bin/kassa, which make build and make run
// build, never as a kassa on the PATH that a newcomer does not have, nor through go run: every CLI
// example uses a command that works.
func TestREADMERunsTheBuiltCLI(t *testing.T) {
	shell, prose := readme(t)
	bare := regexp.MustCompile(`(?m)^\s*(?:[A-Z_]+=\S*\s+)*(kassa\s|go run \./cmd/kassa)`)
	for _, b := range shell {
		if m := bare.FindString(b); m != "" {
			t.Errorf("a README block runs %q rather than bin/kassa:\n%s", strings.TrimSpace(m), b)
		}
	}
	rows := regexp.MustCompile("(?m)^\\| `(\\S*kassa) ").FindAllStringSubmatch(prose, -1)
	if len(rows) == 0 {
		t.Fatal("the README has no CLI table")
	}
	for _, r := range rows {
		if r[1] != "bin/kassa" {
			t.Errorf("a row of the CLI table runs %s rather than bin/kassa", r[1])
		}
	}
	// merchant update --allowed-origins is in the CLI table.
	if !strings.Contains(prose, "| `bin/kassa merchant update --merchant-id M --allowed-origins ") {
		t.Error("the CLI table has no row for merchant update --allowed-origins")
	}
}

// Every $VARIABLE a README shell block uses is either set by a README block (from the field of an
// answer that it picks with jq, or from what make run printed) or named in the prose, which says what
// fills it.
func TestREADMEVariablesSaidWhereFrom(t *testing.T) {
	shell, prose := readme(t)
	set := map[string]bool{}
	assign := regexp.MustCompile(`(?m)^\s*([A-Z_][A-Z0-9_]*)=`)
	use := regexp.MustCompile(`\$\{?([A-Z_][A-Z0-9_]*)`)
	for _, b := range shell {
		for _, m := range assign.FindAllStringSubmatch(b, -1) {
			set[m[1]] = true
		}
	}
	var unexplained []string
	for _, b := range shell {
		for _, m := range use.FindAllStringSubmatch(b, -1) {
			v := m[1]
			if !set[v] && !strings.Contains(prose, "`$"+v+"`") && !slices.Contains(unexplained, v) {
				unexplained = append(unexplained, v)
			}
		}
	}
	if len(unexplained) > 0 {
		t.Errorf("README blocks use variables that no block sets and the text does not explain: %v", unexplained)
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

// The README says what each thing does, not where a description is still to be written: a
// placeholder left in it (OVERVIEW_TEXT stood for the dashboard's Home for a while) fails here. The
// whole file is read, shell blocks included, and its Dashboard section must be there.
func TestREADMEHasNoPlaceholders(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, "\n## Dashboard\n") {
		t.Fatal("the README has no Dashboard section")
	}
	placeholder := regexp.MustCompile(`\b(?:TODO|TBD|FIXME|XXX)\b|\b[A-Z][A-Z0-9]*_(?:TEXT|HERE|PLACEHOLDER)\b`)
	for i, line := range strings.Split(s, "\n") {
		if m := placeholder.FindString(line); m != "" {
			t.Errorf("README.md:%d holds the placeholder %s: %s", i+1, m, strings.TrimSpace(line))
		}
	}
}

package main

import (
	"slices"
	"testing"
)

// lines are the line numbers of check's findings in the file name holding src.
func lines(name, src string) []int {
	var ns []int
	for _, f := range check(name, []byte(src)) {
		ns = append(ns, f.line)
	}
	return ns
}

// TestCatchesIssueReferences: every way the code has cited an issue is found, in each kind of file,
// at its line — one-line and block comments, a Go help text, and a reference spread over a comment's
// lines.
func TestCatchesIssueReferences(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []int
	}{
		{"a.go", "package a\n\n// Trail is the audit trail (issue 17, point 2).\nfunc Trail() {}\n", []int{3}},
		{"a.go", "package a\n\n// Issues 14 and 16 ask\n// for it.\nvar x = 1\n", []int{3}},
		{"a.go", "package a\n\n// Issue 20: fast.\nvar x = 1 // see (#12)\n", []int{3, 4}},
		{"a.go", "package a\n\n/*\nThe limits,\nfrom issue #14.\n*/\nvar x = 1\n", []int{5}},
		{"a.go", "package a\n\n// Sessions end\n// (issue 16,\n// point 1).\nvar x = 1\n", []int{4, 5}},
		{"a.go", "package a\n\nconst usage = `then the comparisons of\nissue 20, point 5`\n", []int{4}},
		{"a.go", "package a\n\nvar s = \"see issue12\"\n", []int{3}},
		{"m.sql", "-- +goose Up\n-- Refunds (issue 19, point 7).\nCREATE TABLE r (id TEXT); -- issue 3\n/* two\nissues 4 and 5 */\n", []int{2, 3, 5}},
		{"p.html", "{{/* pager: issue 17 */}}\n<p>x</p>\n<!-- a\n#21 -->\n{{- /* point 3 */ -}}\n", []int{1, 4, 5}},
		{"w.js", "// issue 12\nconst a = 1; /* #7 */\n", []int{1, 2}},
		{"scripts/x.sh", "#!/bin/sh\n# issue 9\necho hi # (#10)\n", []int{2, 3}},
		{".ci/run", "#!/usr/bin/env bash\n# Issue 20 drill\nmake test\n", []int{2}},
		{"Makefile", "## check: the checks (issue 22)\ncheck:\n\tgo vet ./...\n", []int{1}},
		{"api/openapi.yaml", "# issue 5\npaths:\n  /x:\n    description: as issue 19 asks\n", []int{1, 4}},
		{"deploy/kassa.service", "[Service]\n# hardened (issue 13)\nNoNewPrivileges=yes\n", []int{2}},
	} {
		if got := lines(c.name, c.src); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: findings at lines %v, want %v", c.name, c.src, got, c.want)
		}
	}
}

// TestAllowsLegitimateText: standards, upstream trackers, colours, order numbers, a card brand's
// "issues" and shell syntax are not issue references, and neither is anything in a test or in
// Markdown.
func TestAllowsLegitimateText(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"a.go", "package a\n\n// RFC 6749 §4.1, ISO 8583 field 25, a point of sale, PKCS #8 and PKCS#1.\nvar x = 1\n"},
		{"a.go", "package a\n\n// Fixed upstream as golang/go#12345; see also golang/go#4.\nvar x = 1\n"},
		{"a.go", "package a\n\n// Visa issues 16-digit numbers, Maestro issues 12 to 19 digits, and the\n// issuer issues 3-D Secure challenges.\nvar x = 1\n"},
		{"a.go", "package a\n\nvar svg = `<path fill=\"#000\"/>` + \"#1\"\n\nfunc (l *links) issue(n int) {}\n"},
		{"a.go", "package a\n\n// &#8212; is a dash.\nvar x = 1\n"},
		{"p.html", "<style>body { color: #333; }</style>\n<p>Order #1234</p>\n{{/* a pager */}}\n"},
		{"api/openapi.yaml", "paths:\n  /x:\n    description: \"Invoice #12 of the customer\"\n    example: 'see #3'\n"},
		{"scripts/x.sh", "#!/bin/sh\necho $# ${#args[@]}\n"},
		{"a_test.go", "package a\n\n// issue 12\n"},
		{"web/card-encryption.test.js", "// issue 12\n"},
		{"internal/x/testdata/fuzz/F/1", "issue 12\n"},
		{"README.md", "issue 12\n"},
		{"docs/decisions.md", "issue 12\n"},
	} {
		if got := check(c.name, []byte(c.src)); got != nil {
			t.Errorf("%s %q: findings %v, want none", c.name, c.src, got)
		}
	}
}

// TestFindingNamesFileAndLine: a finding reads file:line: the line, as an editor opens it.
func TestFindingNamesFileAndLine(t *testing.T) {
	got := check("internal/x/x.go", []byte("package x\n\n\t// The limits (issue 14).\nvar x = 1\n"))
	if len(got) != 1 || got[0].String() != "internal/x/x.go:3: // The limits (issue 14)." {
		t.Errorf("findings %q, want one: internal/x/x.go:3: // The limits (issue 14).", got)
	}
}

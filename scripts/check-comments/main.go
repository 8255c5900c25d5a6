// Command check-comments fails, listing file:line, where the repository's own code refers to an issue
// number: "issue N", "issues N and M", "Issue N:", "point N" (an item of an issue's list) or "(#N)",
// N a number. A reader of the repository cannot open the project's issues, so a comment says what the
// code guarantees and why, in the system's own terms. `make check` runs it from the repository's root
// (and so does `make test`, before the tests):
//
//	go run ./scripts/check-comments
//
// It reads every file of the work tree that git does not ignore (outside a git work tree, every file
// under the working directory) but tests (*_test.go, *.test.js, testdata/) and Markdown (README.md
// and docs/, which are reviewed as documentation), and in each what a reader takes for prose:
//   - Go: comments, and string literals too (a command's help is read like a comment);
//   - SQL: "--" and "/* */" comments;
//   - HTML templates: "{{/* */}}" and "<!-- -->" comments, and those of their inline styles;
//   - JavaScript and CSS: "//" and "/* */" comments;
//   - YAML (the OpenAPI description, the client generator's configuration): all of its text, since the
//     descriptions are published as the API's documentation;
//   - shell scripts (by extension, or a "#!" line), the Makefile, Dockerfiles, the systemd unit and
//     the ignore files: "#" comments.
//
// "issue N" and "point N" are refused anywhere in that prose; a bare "#N" only in comments, where it
// cannot be a colour or an example's order number. Allowed, because anyone can open or look them up:
// a fully-qualified reference to another project's tracker, such as golang/go#12345 (the "#" joined
// to the repository's name), HTML character references (&#8212;), and numbered standards ("PKCS #8";
// "RFC 6749 §4.1" and "ISO 8583" hold neither word nor "#"). A card brand's "issues 16-digit
// numbers", "issues 12 to 19 digits" or "issues 3-D Secure challenges" is a verb, not a tracker: a
// number (or range) joined by a hyphen to a word, or followed by "digits", is not an issue's.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	files, err := listFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "check-comments:", err)
		os.Exit(2)
	}
	n := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "check-comments:", err)
			os.Exit(2)
		}
		for _, f := range check(name, src) {
			fmt.Println(f)
			n++
		}
	}
	if n > 0 {
		fmt.Printf("check-comments: %d line(s) refer to an issue number; say what the code guarantees and why instead\n", n)
		os.Exit(1)
	}
}

// listFiles is every file of the git work tree under the working directory that git does not ignore,
// tracked or not yet, or, outside a git work tree, every regular file under it but those of .git.
func listFiles() ([]string, error) {
	if out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output(); err == nil {
		return strings.FieldsFunc(string(out), func(r rune) bool { return r == 0 }), nil
	}
	var names []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.Type().IsRegular():
			names = append(names, filepath.ToSlash(path))
		}
		return nil
	})
	return names, err
}

// kind is how a file's prose is found.
type kind int

const (
	skip kind = iota
	goSource
	sql
	html
	js
	yaml
	hash
)

// kindOf is how the file name, holding src, is read: by its name, or, for a file without an
// extension, by a "#!" line that makes it a script.
func kindOf(name string, src []byte) kind {
	base := filepath.Base(name)
	if strings.HasSuffix(base, "_test.go") || strings.HasSuffix(base, ".test.js") ||
		slices.Contains(strings.Split(filepath.ToSlash(name), "/"), "testdata") {
		return skip
	}
	switch filepath.Ext(base) {
	case ".go":
		return goSource
	case ".sql":
		return sql
	case ".html", ".tmpl":
		return html
	case ".js", ".css":
		return js
	case ".yaml", ".yml":
		return yaml
	case ".sh", ".bash", ".service", ".dockerignore", ".mk":
		return hash
	case "":
		if base == "Makefile" || base == "Dockerfile" || bytes.HasPrefix(src, []byte("#!")) {
			return hash
		}
	}
	if base == ".gitignore" {
		return hash
	}
	return skip // Markdown, JSON, go.mod and go.sum, fuzz corpora: no comments of the code's
}

// A finding is one line that refers to an issue.
type finding struct {
	file string
	line int
	text string
}

func (f finding) String() string { return fmt.Sprintf("%s:%d: %s", f.file, f.line, f.text) }

var (
	// issueWords is "issue N", "Issues N and M", "issue #N" and "point N" (as in "issue N, point
	// M"); the last group is what makes the number a card brand's instead (see the package comment).
	issueWords = regexp.MustCompile(`(?i)\b(?:issues?[ \t]*#?|points?[ \t]+)[ \t]*\d+\b((?:[ \t]*(?:-|to|or)[ \t]*\d+)?(?:-[a-z]|[ \t]+digits?\b))?`)
	// hashNumber is "#N" standing alone: not joined to a word ("golang/go#12345", "&#8212;").
	hashNumber = regexp.MustCompile(`(?:^|[^\w/&#])#\d+\b`)
	// standard is a numbered standard written with "#".
	standard = regexp.MustCompile(`\bPKCS[ \t]*#\d+\b`)
)

// prose is a piece of a file read as text: a comment, a string literal, or a line of YAML.
type prose struct {
	line    int // of the piece's first line, from 1
	text    string
	comment bool // a comment, where a bare "#N" is refused too
}

// check is every line of the file name, holding src, whose prose refers to an issue, in order.
func check(name string, src []byte) []finding {
	lines := strings.Split(string(src), "\n")
	seen := map[int]bool{}
	var found []finding
	for _, p := range prosesOf(src, kindOf(name, src)) {
		for i, text := range strings.Split(p.text, "\n") {
			n := p.line + i
			if !seen[n] && refersToIssue(text, p.comment) {
				seen[n] = true
				found = append(found, finding{name, n, strings.TrimSpace(lines[n-1])})
			}
		}
	}
	slices.SortFunc(found, func(a, b finding) int { return a.line - b.line })
	return found
}

// refersToIssue reports whether text refers to an issue number; with comment, a bare "#N" counts.
func refersToIssue(text string, comment bool) bool {
	for _, m := range issueWords.FindAllStringSubmatch(text, -1) {
		if m[1] == "" {
			return true
		}
	}
	return comment && hashNumber.MatchString(standard.ReplaceAllString(text, ""))
}

// prosesOf is the prose of src, read as k.
func prosesOf(src []byte, k kind) []prose {
	switch k {
	case goSource:
		return goProse(src)
	case sql:
		return delimited(string(src), "--", "/*", "*/")
	case html:
		return append(delimited(string(src), "", "/*", "*/"), delimited(string(src), "", "<!--", "-->")...)
	case js:
		return delimited(string(src), "//", "/*", "*/")
	case yaml, hash:
		var ps []prose
		for i, l := range strings.Split(string(src), "\n") {
			if k == yaml {
				ps = append(ps, prose{i + 1, l, false})
			}
			if c, ok := hashComment(l, k == yaml); ok {
				ps = append(ps, prose{i + 1, c, true})
			}
		}
		return ps
	}
	return nil
}

// goProse is the comments and string literals of a Go file, as go/scanner reads them.
func goProse(src []byte) []prose {
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile("", -1, len(src)), src, nil, scanner.ScanComments)
	var ps []prose
	for {
		pos, tok, lit := s.Scan()
		switch tok {
		case token.EOF:
			return ps
		case token.COMMENT:
			ps = append(ps, prose{fset.Position(pos).Line, lit, true})
		case token.STRING:
			ps = append(ps, prose{fset.Position(pos).Line, lit, false})
		}
	}
}

// delimited is the comments of src, markers left out: those that run from line to the end of their
// line (none when line is ""), and those from open to close (or to the end of src, unclosed).
func delimited(src, line, open, close string) []prose {
	var ps []prose
	n, counted := 1, 0 // the line of src[counted]
	for i := 0; i < len(src); {
		o, l := strings.Index(src[i:], open), -1
		if line != "" {
			l = strings.Index(src[i:], line)
		}
		var start, end, next int
		switch {
		case l >= 0 && (o < 0 || l < o):
			start = i + l + len(line)
			end = strings.IndexByte(src[start:], '\n')
			if end < 0 {
				end = len(src) - start
			}
			end += start
			next = end
		case o >= 0:
			start = i + o + len(open)
			end = strings.Index(src[start:], close)
			if end < 0 {
				end = len(src) - start
			}
			end += start
			next = min(end+len(close), len(src))
		default:
			return ps
		}
		n += strings.Count(src[counted:start], "\n")
		counted = start
		ps = append(ps, prose{n, src[start:end], true})
		i = next
	}
	return ps
}

// hashComment is the comment of a line of a "#"-commented file: from a "#" at the line's start or
// after a space ("$#" and "${#x}" in a script are not comments); with fullLine (YAML, where "#" inside
// a quoted string is text), only a "#" that the line's indentation alone precedes.
func hashComment(l string, fullLine bool) (string, bool) {
	if fullLine {
		t := strings.TrimLeft(l, " \t")
		c, ok := strings.CutPrefix(t, "#")
		return c, ok
	}
	for i := range len(l) {
		if l[i] == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t') {
			return l[i+1:], true
		}
	}
	return "", false
}

//go:build ignore

// Test-times prints where a test run's time went, from the JSON events of `go test -json`: each
// package's elapsed time, slowest first, then the slowest tests (subtests included), each with its
// package. Build lines and other output are ignored, so go test's stderr may be mixed in.
//
//	go test -race -count=1 -json ./... > /tmp/t.json
//	go run scripts/test-times.go [-n 30] [-pkg dashboard] [-top] < /tmp/t.json
//
// A parallel test's time counts from when it resumed after t.Parallel (as go test reports it). With
// -top, each top-level test's time is the sum of its subtests' (each counted so, recursively), or its
// own when it has none: a test whose subtests run in parallel (storetest.Each) reports either almost
// nothing of its own (it returned before they ran) or, when they waited for a parallel slot behind
// the package's other tests, that wait too. The lists show where to look, not sums that add up to the
// wall time.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is the part of a test2json event this reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

// result is a finished package or test.
type result struct {
	pkg, test, action string
	elapsed           float64
}

func main() {
	n := flag.Int("n", 25, "how many of the slowest tests to print")
	pkg := flag.String("pkg", "", "only packages whose import path contains this")
	top := flag.Bool("top", false, "top-level tests only, each with its subtests' time")
	flag.Parse()
	pkgs, tests, err := read(os.Stdin, *pkg, *top)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-times:", err)
		os.Exit(1)
	}
	if len(pkgs) == 0 {
		fmt.Fprintln(os.Stderr, "test-times: no finished package in the input (is it go test -json output?)")
		os.Exit(1)
	}
	var total float64
	fmt.Println("seconds  package")
	for _, p := range pkgs {
		total += p.elapsed
		fmt.Printf("%7.1f  %s%s\n", p.elapsed, p.pkg, mark(p.action))
	}
	fmt.Printf("%7.1f  (sum over %d packages: test binaries' own time, not wall time)\n\n", total, len(pkgs))
	fmt.Printf("seconds  slowest %d tests\n", min(*n, len(tests)))
	for _, r := range tests[:min(*n, len(tests))] {
		fmt.Printf("%7.1f  %s %s%s\n", r.elapsed, short(r.pkg), r.test, mark(r.action))
	}
}

// read collects the finished packages and tests of r, each list slowest first.
func read(r io.Reader, pkgFilter string, topOnly bool) (pkgs, tests []result, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20) // a test's output line can be long
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // build output, or the stderr of go test mixed in
		}
		var e event
		if json.Unmarshal(line, &e) != nil || e.Package == "" || !strings.Contains(e.Package, pkgFilter) {
			continue
		}
		if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
			continue
		}
		res := result{pkg: e.Package, test: e.Test, action: e.Action, elapsed: e.Elapsed}
		if e.Test == "" {
			pkgs = append(pkgs, res)
		} else {
			tests = append(tests, res)
		}
	}
	if topOnly {
		tests = topLevel(tests)
	}
	slower := func(a, b result) int {
		if a.elapsed != b.elapsed {
			if a.elapsed > b.elapsed {
				return -1
			}
			return 1
		}
		return strings.Compare(a.pkg+" "+a.test, b.pkg+" "+b.test)
	}
	slices.SortFunc(pkgs, slower)
	slices.SortFunc(tests, slower)
	return pkgs, tests, sc.Err()
}

// topLevel folds each test's subtests into it: a test's time becomes the sum of its direct subtests'
// (folded first), or stays its own when it has none, and only top-level tests are left.
func topLevel(tests []result) []result {
	// Deepest first, so that a subtest is complete before it is added to its parent.
	slices.SortStableFunc(tests, func(a, b result) int {
		return strings.Count(b.test, "/") - strings.Count(a.test, "/")
	})
	index := map[string]int{}
	for i, r := range tests {
		index[r.pkg+" "+r.test] = i
	}
	sums := make([]float64, len(tests))
	parents := make([]bool, len(tests))
	var top []result
	for i, r := range tests {
		if parents[i] {
			r.elapsed = sums[i]
		}
		parent, _, nested := cutLast(r.test, "/")
		if !nested {
			top = append(top, r)
			continue
		}
		if p, ok := index[r.pkg+" "+parent]; ok {
			sums[p] += r.elapsed
			parents[p] = true
		}
	}
	return top
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// mark flags a result that did not pass.
func mark(action string) string {
	if action == "pass" {
		return ""
	}
	return "  (" + action + ")"
}

// short is an import path without the module's own prefix.
func short(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/kassapay/kassa/")
}

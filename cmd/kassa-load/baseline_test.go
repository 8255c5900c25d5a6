package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The comparison with the baseline: a figure better than, equal to, or up to 10 % worse than the
// baseline's is no regression, one more than 10 % worse is — a lower ratio, a higher p99 or CPU — and
// a figure on one side only is listed as such, never as a regression.
func TestCompareWithBaseline(t *testing.T) {
	base := figures{"sqlite": {"sale": {figRatio: 0.40, figP99: 20, figCPU: 0.200}}}
	for _, c := range []struct {
		name              string
		figure            string
		value             float64
		worse             float64
		regressed, inBase bool
	}{
		{"a better ratio", figRatio, 0.44, -0.10, false, true},
		{"the same ratio", figRatio, 0.40, 0, false, true},
		{"a ratio 9 % worse", figRatio, 0.364, 0.09, false, true},
		{"a ratio 11 % worse", figRatio, 0.356, 0.11, true, true},
		{"a better p99", figP99, 15, -0.25, false, true},
		{"the same p99", figP99, 20, 0, false, true},
		{"a p99 9 % worse", figP99, 21.8, 0.09, false, true},
		{"a p99 11 % worse", figP99, 22.2, 0.11, true, true},
		{"CPU 9 % worse", figCPU, 0.218, 0.09, false, true},
		{"CPU 11 % worse", figCPU, 0.222, 0.11, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := compare(base, figures{"sqlite": {"sale": {c.figure: c.value}}})
			var got *comparison
			for i := range cs {
				if cs[i].figure == c.figure {
					got = &cs[i]
				}
			}
			if got == nil || !got.inRun || !got.inBase || !near(got.worse+1, c.worse+1) || got.regressed != c.regressed ||
				got.value != c.value || got.base != base["sqlite"]["sale"][c.figure] {
				t.Errorf("compare: %+v, want worse %v, regressed %v", got, c.worse, c.regressed)
			}
		})
	}
	t.Run("missing in the baseline", func(t *testing.T) {
		cs := compare(base, figures{"sqlite": {"ledger": {figRatio: 0.1}}, "postgres": {"sale": {figP99: 500}}})
		for _, c := range cs {
			if c.inRun && (c.inBase || c.regressed || c.worse != 0) {
				t.Errorf("a figure the baseline has not: %+v", c)
			}
		}
		if len(cs) != 5 {
			t.Errorf("%d comparisons, want the baseline's 3 and the run's 2: %+v", len(cs), cs)
		}
	})
	t.Run("missing in the run", func(t *testing.T) {
		cs := compare(base, figures{"sqlite": {"sale": {figP99: 20}}})
		want := []comparison{
			{backend: "sqlite", scenario: "sale", figure: figRatio, base: 0.40, inBase: true},
			{backend: "sqlite", scenario: "sale", figure: figP99, value: 20, base: 20, inRun: true, inBase: true},
			{backend: "sqlite", scenario: "sale", figure: figCPU, base: 0.200, inBase: true},
		}
		if !reflect.DeepEqual(cs, want) {
			t.Errorf("compare:\n%+v\nwant\n%+v", cs, want)
		}
	})
	t.Run("in order", func(t *testing.T) {
		cs := compare(figures{}, figures{"postgres": {"sale": {figCPU: 1, figRatio: 1}}, "sqlite": {"sale": {figP99: 1}, "ledger": {figP99: 1}}})
		var order []string
		for _, c := range cs {
			order = append(order, c.backend+" "+c.scenario+" "+c.figure)
		}
		if want := []string{"sqlite ledger p99_ms", "sqlite sale p99_ms", "postgres sale ratio", "postgres sale cpu_s_per_1000"}; !reflect.DeepEqual(order, want) {
			t.Errorf("order %q, want %q", order, want)
		}
	})
}

// The report beside the baseline marks each regression and ends with a summary line counting them;
// a figure of the baseline the run did not measure is listed when its backend and scenario ran, and
// only counted when they did not.
func TestBaselineReportMarksRegressions(t *testing.T) {
	b := &baseline{Commit: "abc123", Date: "2025-01-02T03:04:05Z", Note: "a quiet machine",
		Figures: figures{"sqlite": {"sale": {figRatio: 0.40, figP99: 20, figCPU: 0.2}, "token": {figP99: 5}},
			"postgres": {"sale": {figRatio: 0.35}}}}
	run := figures{"sqlite": {"sale": {figRatio: 0.30, figP99: 20}, "ledger": {figRatio: 0.46}}}
	var out bytes.Buffer
	n := (&reporter{w: &out}).baseline("base.json", b, compare(b.Figures, run), []string{"sqlite"}, []string{"ledger", "sale"})
	text := out.String()
	if n != 1 {
		t.Errorf("%d regressions, want 1 (the ratio 25 %% worse):\n%s", n, text)
	}
	for _, want := range []string{
		"Against the baseline base.json: commit abc123, 2025-01-02T03:04:05Z (a quiet machine); more than 10 % worse is marked REGRESSED\n",
		"sqlite    ledger        ratio                0.460          —  new: not in the baseline\n",
		"sqlite    sale          ratio                0.300      0.400  25.0 % worse  REGRESSED\n",
		"sqlite    sale          p99_ms               20.00      20.00  the same\n",
		"sqlite    sale          cpu_s_per_1000           —      0.200  not measured in this run\n",
		"baseline: REGRESSED: 1 of the 2 figures compared more than 10 % worse than the baseline (sqlite sale ratio); " +
			"one run on a busy machine moves figures that far: it fails the command only with --fail-on-regression; " +
			"2 figures of the baseline for backends or scenarios not in this run\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no line with\n%q\nin:\n%s", want, text)
		}
	}
	if strings.Contains(text, "token") || strings.Contains(text, "postgres") {
		t.Errorf("figures of a scenario or backend not run are listed:\n%s", text)
	}
	out.Reset()
	run["sqlite"]["sale"][figRatio] = 0.41
	if n := (&reporter{w: &out}).baseline("base.json", b, compare(b.Figures, run), []string{"sqlite"}, []string{"ledger", "sale"}); n != 0 ||
		!strings.Contains(out.String(), "baseline: none of the 2 figures compared is more than 10 % worse than the baseline;") ||
		strings.Contains(out.String(), "  REGRESSED\n") {
		t.Errorf("%d regressions without one:\n%s", n, out.String())
	}
}

// A regression fails the run only with --fail-on-regression; the new baseline asked for is written
// either way, before it fails.
func TestConcludeFailsOnRegressionOnlyWhenAsked(t *testing.T) {
	b := &baseline{Commit: "abc123", Figures: figures{"sqlite": {"sale": {figP99: 20}}}}
	worse := figures{"sqlite": {"sale": {figP99: 23}}}
	c := config{backends: []string{"sqlite"}, scenarios: []string{"sale"}, base: b, basePath: "base.json", commit: "def456"}
	if err := c.conclude(&reporter{w: &bytes.Buffer{}}, worse); err != nil {
		t.Errorf("a regression without --fail-on-regression: %v", err)
	}
	c.failOnRegression = true
	c.writeBaseline = filepath.Join(t.TempDir(), "new.json")
	err := c.conclude(&reporter{w: &bytes.Buffer{}}, worse)
	if err == nil || !strings.Contains(err.Error(), "1 figures more than 10 % worse than the baseline") {
		t.Errorf("a regression with --fail-on-regression: %v", err)
	}
	if written, err := readBaseline(c.writeBaseline); err != nil || written.Commit != "def456" || written.Figures["sqlite"]["sale"][figP99] != 23 {
		t.Errorf("the new baseline: %+v, %v", written, err)
	}
	if err := c.conclude(&reporter{w: &bytes.Buffer{}}, figures{"sqlite": {"sale": {figP99: 21.9}}}); err != nil {
		t.Errorf("9.5 %% worse with --fail-on-regression: %v", err)
	}
}

// A baseline written is read back as it was, with the commit and the date of the run; a file with
// an unknown figure, a figure that is not one, or no commit is refused, naming the field.
func TestBaselineFile(t *testing.T) {
	dir := t.TempDir()
	c := config{backends: []string{"sqlite"}, scenarios: []string{"ledger", "sale"}, clients: 64, latencyClients: 2000,
		duration: 5 * time.Second, warmup: 2 * time.Second, rounds: 1, commit: "0123abcd", baseNote: "noisy"}
	got := figures{"sqlite": {"ledger": {figRatio: 0.312345678, figP99: 30.456, figCPU: 0.1234567}}}
	path := filepath.Join(dir, "baseline.json")
	if err := writeBaseline(path, newBaseline(c, got, time.Date(2025, 6, 7, 8, 9, 10, 0, time.FixedZone("X", 3600)))); err != nil {
		t.Fatal(err)
	}
	b, err := readBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	want := figures{"sqlite": {"ledger": {figRatio: 0.3123, figP99: 30.46, figCPU: 0.1235}}}
	if b.Commit != "0123abcd" || b.Date != "2025-06-07T07:09:10Z" || b.Note != "noisy" || !reflect.DeepEqual(b.Figures, want) ||
		!strings.Contains(b.Command, "--backends sqlite --scenarios ledger,sale --clients 64") || b.Machine == "" {
		t.Errorf("read back %+v", b)
	}
	for _, bad := range []struct{ file, want string }{
		{`{"commit":"a","figures":{"sqlite":{"sale":{"p95_ms":3}}}}`, "figures.sqlite.sale.p95_ms: unknown figure"},
		{`{"commit":"a","figures":{"sqlite":{"sale":{"ratio":-1}}}}`, "figures.sqlite.sale.ratio: -1 is not a figure"},
		{`{"figures":{"sqlite":{"sale":{"ratio":1}}}}`, "no commit"},
		{`{"commit":"a"}`, "no figures"},
		{`{"commit":"a","figures":{"sqlite":{"sale":{"ratio":1}}},"extra":1}`, `unknown field "extra"`},
	} {
		if err := os.WriteFile(path, []byte(bad.file), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readBaseline(path); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error with %q", bad.file, err, bad.want)
		}
	}
}

// The repository's baseline, which "make bench" compares with, holds each figure of the ledger, the
// sale and the bare handler on both backends, and says which commit it measured.
func TestRepositoryBaseline(t *testing.T) {
	b, err := readBaseline("baseline.json")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(b.Commit) {
		t.Errorf("commit %q: not the full hash of a clean tree", b.Commit)
	}
	if _, err := time.Parse(time.RFC3339, b.Date); err != nil {
		t.Errorf("date: %v", err)
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		for scenario, want := range map[string][]string{"ledger": figureOrder, "sale": figureOrder, "http-ceiling": {figP99, figCPU}} {
			for _, figure := range want {
				if v := b.Figures[backend][scenario][figure]; v <= 0 {
					t.Errorf("%s %s %s: %v", backend, scenario, figure, v)
				}
			}
		}
	}
}

// The ledger scenario end to end, briefly, on both backends: the ledger alone in this process, beside
// the bare handler of the same run, its ratio with the target on SQLite and none on PostgreSQL; the
// figures compared with a baseline and written as a new one.
func TestLedgerScenarioBesideTheBareHandler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a PostgreSQL cluster")
	}
	if err := pgcluster.Available(); err != nil {
		storetest.Unavailable(t, "PostgreSQL: %v", err)
	}
	dir := buildKassa(t)
	var out bytes.Buffer
	c := config{kassa: filepath.Join(dir, "kassa"), backends: []string{"sqlite", "postgres"}, scenarios: []string{"ledger", "sale", "http-ceiling"},
		clients: 4, latencyClients: 100, duration: time.Second, warmup: 300 * time.Millisecond, rounds: 1, jsonOut: true,
		base: &baseline{Commit: "abc", Figures: figures{"sqlite": {"ledger": {figRatio: 1e6}}}}, basePath: "base.json",
		writeBaseline: filepath.Join(t.TempDir(), "new.json"), commit: "def"}
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	seen := map[string]bool{}
	for _, r := range jsonLines(t, out.String()) {
		switch {
		case r["ledger_sales_per_s"] != nil:
			backend := r["backend"].(string)
			ratio, _ := r["ledger_to_http_ceiling"].(float64)
			if r["ledger_sales_per_s"].(float64) <= 0 || r["ledger_p99_ms"].(float64) <= 0 || r["ledger_cpu_s_per_1000"].(float64) <= 0 ||
				ratio <= 0 || r["clients"] != 4.0 {
				t.Errorf("ledger line %v", r)
			}
			if target, met := r["target_ratio"], r["ratio_met"]; backend == "sqlite" && (target != 0.45 || met == nil) || backend == "postgres" && (target != nil || met != nil) {
				t.Errorf("%s ledger target %v, met %v", backend, target, met)
			}
			seen["ledger "+backend] = true
		case r["operation"] == ledgerOp:
			if r["ops_per_s"].(float64) <= 0 || r["errors"].(float64) != 0 || r["cpu_s_per_1000"].(float64) <= 0 {
				t.Errorf("ledger result %v", r)
			}
		case r["figure"] == figRatio && r["scenario"] == "ledger" && r["backend"] == "sqlite":
			if r["baseline"] != 1e6 || r["regressed"] != true {
				t.Errorf("the ledger's ratio beside the baseline's: %v", r)
			}
			seen["compared"] = true
		case r["regressions"] != nil:
			if r["regressions"] != 1.0 || r["compared"] != 1.0 {
				t.Errorf("summary %v", r)
			}
			seen["summary"] = true
		}
	}
	for _, want := range []string{"ledger sqlite", "ledger postgres", "compared", "summary"} {
		if !seen[want] {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	b, err := readBaseline(c.writeBaseline)
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range c.backends {
		for _, scenario := range []string{"ledger", "sale"} {
			if f := b.Figures[backend][scenario]; f[figRatio] <= 0 || f[figP99] <= 0 || f[figCPU] <= 0 {
				t.Errorf("the new baseline's %s %s: %v", backend, scenario, f)
			}
		}
		if f := b.Figures[backend]["http-ceiling"]; len(f) != 2 || f[figP99] <= 0 || f[figCPU] <= 0 {
			t.Errorf("the new baseline's %s http-ceiling: %v", backend, f)
		}
	}
}

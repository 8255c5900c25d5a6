package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The baseline: the last release's figures of the load benchmark, kept in the repository
// (defaultBaseline), beside which a run prints its own. Each scenario on each backend has up to three
// figures: its ratio (a latency-tolerance scenario's to min(ideal, the same path at once), any other's
// but the bare handler's own to the bare handler's rate of the same run), its p99 in milliseconds and
// the server's CPU seconds per 1000 operations (the ledger's own process's for the ledger scenario).
// Ratios, not rates: a rate moves with the machine and its neighbours, a ratio to what the same cores
// did in the same run much less. A figure more than regressionMargin worse than the baseline's — a
// lower ratio, a higher p99 or CPU — is a regression: marked, counted, and a failure only with
// --fail-on-regression, as one noisy run on a shared machine moves figures that far.

// defaultBaseline is the baseline's file, from the repository's root (where "make bench" runs).
const defaultBaseline = "cmd/kassa-load/baseline.json"

// The figures of a scenario.
const (
	figRatio = "ratio"
	figP99   = "p99_ms"
	figCPU   = "cpu_s_per_1000"
)

// figureOrder is the order a scenario's figures are printed in; it names every figure there is.
var figureOrder = []string{figRatio, figP99, figCPU}

// regressionMargin is how much worse than the baseline's a figure may be, as a fraction of it, before
// it counts as a regression.
const regressionMargin = 0.10

// figures are a run's or a baseline's figures: by backend, by scenario, by figure.
type figures map[string]map[string]map[string]float64

// baseline is the baseline's file.
type baseline struct {
	// Commit is the commit measured (git rev-parse HEAD; "-dirty" when the tree had changes).
	Commit string `json:"commit"`
	// Date is when it was measured, RFC 3339 in UTC.
	Date string `json:"date"`
	// Note says on what machine, and how quiet it was.
	Note string `json:"note,omitempty"`
	// Command is the measurement, with the settings its figures depend on.
	Command string `json:"command"`
	// Machine is the processor, its count and the Go version.
	Machine string  `json:"machine"`
	Figures figures `json:"figures"`
}

// figuresOf are the figures of each scenario of sums that a baseline keeps: its p99 and CPU per 1000
// operations, and its ratio where it has one (see above).
func figuresOf(sums map[string]summary) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for name, s := range sums {
		f := map[string]float64{figP99: s.p99, figCPU: s.cpu}
		if scenarios[name].atOnce != "" {
			if _, bound, _, _ := toleranceBound(name, s, sums); bound > 0 {
				f[figRatio] = s.rate / bound
			}
		} else if ratio, ok := toBare(name, sums); ok && !scenarios[name].bare {
			f[figRatio] = ratio
		}
		out[name] = f
	}
	return out
}

// comparison is one figure of a run beside the baseline's.
type comparison struct {
	backend, scenario, figure string
	value, base               float64
	inRun, inBase             bool
	// worse is how much worse than the baseline's the figure is, as a fraction of it (negative:
	// better); 0 unless both have it and the baseline's is above 0.
	worse     float64
	regressed bool // worse by more than regressionMargin
}

// compare sets each figure of run beside the same figure of base, and lists the figures either has
// and the other has not, in the order of the backends, the scenarios (defaultScenarios) and
// figureOrder.
func compare(base, run figures) []comparison {
	var out []comparison
	seen := map[[3]string]bool{}
	add := func(backend, scenario, figure string) {
		key := [3]string{backend, scenario, figure}
		if seen[key] {
			return
		}
		seen[key] = true
		c := comparison{backend: backend, scenario: scenario, figure: figure}
		c.value, c.inRun = run[backend][scenario][figure]
		c.base, c.inBase = base[backend][scenario][figure]
		if c.inRun && c.inBase && c.base > 0 {
			if figure == figRatio {
				c.worse = (c.base - c.value) / c.base
			} else {
				c.worse = (c.value - c.base) / c.base
			}
			c.regressed = c.worse > regressionMargin
		}
		out = append(out, c)
	}
	for _, both := range []figures{run, base} {
		for backend, byScenario := range both {
			for scenario, byFigure := range byScenario {
				for figure := range byFigure {
					add(backend, scenario, figure)
				}
			}
		}
	}
	backendRank := rank([]string{"sqlite", "postgres"})
	scenarioRank, figureRank := rank(split(defaultScenarios)), rank(figureOrder)
	slices.SortFunc(out, func(a, b comparison) int {
		return cmp.Or(backendRank(a.backend, b.backend), cmp.Compare(a.backend, b.backend),
			scenarioRank(a.scenario, b.scenario), cmp.Compare(a.scenario, b.scenario),
			figureRank(a.figure, b.figure), cmp.Compare(a.figure, b.figure))
	})
	return out
}

// rank orders names as known lists them, the names it does not list after those it does.
func rank(known []string) func(a, b string) int {
	at := func(s string) int {
		if i := slices.Index(known, s); i >= 0 {
			return i
		}
		return len(known)
	}
	return func(a, b string) int { return cmp.Compare(at(a), at(b)) }
}

// baseline prints each figure of cs beside the baseline's, those more than regressionMargin worse
// marked REGRESSED, then a summary line, and returns how many regressed. A figure of the baseline
// that the run did not measure is listed when its backend and scenario ran (the ratio of a run
// without http-ceiling, say), and only counted otherwise.
func (r *reporter) baseline(path string, b *baseline, cs []comparison, backends, scenarios []string) int {
	var regressed []string
	compared, skipped := 0, 0
	var shown []comparison
	for _, c := range cs {
		if !c.inRun && (!slices.Contains(backends, c.backend) || !slices.Contains(scenarios, c.scenario)) {
			skipped++
			continue
		}
		shown = append(shown, c)
		if c.inRun && c.inBase {
			compared++
		}
		if c.regressed {
			regressed = append(regressed, c.backend+" "+c.scenario+" "+c.figure)
		}
	}
	if r.json {
		for _, c := range shown {
			line := map[string]any{"compared_with_baseline": path, "backend": c.backend, "scenario": c.scenario, "figure": c.figure,
				"regressed": c.regressed}
			if c.inRun {
				line["value"] = c.value
			}
			if c.inBase {
				line["baseline"] = c.base
			}
			if c.inRun && c.inBase {
				line["worse_fraction"] = c.worse
			}
			r.emit(line)
		}
		r.emit(map[string]any{"baseline": path, "baseline_commit": b.Commit, "baseline_date": b.Date, "compared": compared,
			"regressions": len(regressed), "regressed": regressed, "not_in_this_run": skipped, "margin": regressionMargin})
		return len(regressed)
	}
	fmt.Fprintf(r.w, "\nAgainst the baseline %s: commit %s, %s", path, b.Commit, b.Date)
	if b.Note != "" {
		fmt.Fprintf(r.w, " (%s)", b.Note)
	}
	fmt.Fprintf(r.w, "; more than %.0f %% worse is marked REGRESSED\n", regressionMargin*100)
	fmt.Fprintf(r.w, "%-9s %-13s %-15s %10s %10s  %s\n", "backend", "scenario", "figure", "this run", "baseline", "change")
	for _, c := range shown {
		value, base := "—", "—"
		if c.inRun {
			value = formatFigure(c.figure, c.value)
		}
		if c.inBase {
			base = formatFigure(c.figure, c.base)
		}
		var change string
		switch {
		case !c.inBase:
			change = "new: not in the baseline"
		case !c.inRun:
			change = "not measured in this run"
		case c.base <= 0:
			change = "baseline 0: not compared"
		case c.worse > 0:
			change = fmt.Sprintf("%.1f %% worse", c.worse*100)
		case c.worse < 0:
			change = fmt.Sprintf("%.1f %% better", -c.worse*100)
		default:
			change = "the same"
		}
		if c.regressed {
			change += "  REGRESSED"
		}
		fmt.Fprintf(r.w, "%-9s %-13s %-15s %10s %10s  %s\n", c.backend, c.scenario, c.figure, value, base, change)
	}
	if len(regressed) == 0 {
		fmt.Fprintf(r.w, "baseline: none of the %d figures compared is more than %.0f %% worse than the baseline", compared, regressionMargin*100)
	} else {
		fmt.Fprintf(r.w, "baseline: REGRESSED: %d of the %d figures compared more than %.0f %% worse than the baseline (%s); "+
			"one run on a busy machine moves figures that far: it fails the command only with --fail-on-regression",
			len(regressed), compared, regressionMargin*100, strings.Join(regressed, ", "))
	}
	if skipped > 0 {
		fmt.Fprintf(r.w, "; %d figures of the baseline for backends or scenarios not in this run", skipped)
	}
	fmt.Fprintln(r.w)
	return len(regressed)
}

// formatFigure is v as the tables print figure: ratios and CPU seconds to 3 places, milliseconds to 2.
func formatFigure(figure string, v float64) string {
	if figure == figP99 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// prepareBaseline reads the baseline of c.basePath into c.base, and finds the commit measured (git)
// when the run is to be written as a baseline and --commit did not name it. Both happen before the
// measurement, which takes minutes, so that a bad file or a missing commit fails at once. A baseline
// file that does not exist is an error when it was asked for (explicit), and otherwise — the default
// path, from outside the repository's root — a note that the run is compared with nothing.
func (c *config) prepareBaseline(explicit bool) error {
	if c.basePath != "" {
		b, err := readBaseline(c.basePath)
		switch {
		case err == nil:
			c.base = b
		case errors.Is(err, fs.ErrNotExist) && !explicit:
			fmt.Fprintf(os.Stderr, "kassa-load: no baseline at %s (run from the repository's root, or pass --baseline): nothing to compare the figures with\n",
				c.basePath)
		default:
			return err
		}
	}
	if c.writeBaseline != "" && c.commit == "" {
		commit, err := gitCommit()
		if err != nil {
			return fmt.Errorf("--write-baseline: the commit measured: %w (pass --commit)", err)
		}
		c.commit = commit
	}
	return nil
}

// gitCommit is the commit checked out in the working directory, with "-dirty" when tracked files
// differ from it: the tree "make build" built the binaries measured from.
func gitCommit() (string, error) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse HEAD: %w", err)
	}
	status, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return "", fmt.Errorf("git status: %w", err)
	}
	commit := strings.TrimSpace(string(head))
	if len(bytes.TrimSpace(status)) > 0 {
		commit += "-dirty"
	}
	return commit, nil
}

// readBaseline reads a baseline file, refusing one with a field it does not know, without a commit,
// without figures, or with a figure that is not a finite number ≥ 0, naming the field.
func readBaseline(path string) (*baseline, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var b baseline
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	if b.Commit == "" {
		return nil, fmt.Errorf("baseline %s: no commit", path)
	}
	if len(b.Figures) == 0 {
		return nil, fmt.Errorf("baseline %s: no figures", path)
	}
	for backend, byScenario := range b.Figures {
		for scenario, byFigure := range byScenario {
			for figure, v := range byFigure {
				field := "figures." + backend + "." + scenario + "." + figure
				if !slices.Contains(figureOrder, figure) {
					return nil, fmt.Errorf("baseline %s: %s: unknown figure (%s)", path, field, strings.Join(figureOrder, ", "))
				}
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					return nil, fmt.Errorf("baseline %s: %s: %v is not a figure", path, field, v)
				}
			}
		}
	}
	return &b, nil
}

// newBaseline is a baseline of the figures got, measured by the run c describes at now, each rounded
// to 4 places (p99s to 2): far finer than the comparison's 10 %.
func newBaseline(c config, got figures, now time.Time) *baseline {
	rounded := figures{}
	for backend, byScenario := range got {
		rounded[backend] = map[string]map[string]float64{}
		for scenario, byFigure := range byScenario {
			rounded[backend][scenario] = map[string]float64{}
			for figure, v := range byFigure {
				places := 1e4
				if figure == figP99 {
					places = 1e2
				}
				rounded[backend][scenario][figure] = math.Round(v*places) / places
			}
		}
	}
	return &baseline{Commit: c.commit, Date: now.UTC().Format(time.RFC3339), Note: c.baseNote,
		Command: fmt.Sprintf("kassa-load --backends %s --scenarios %s --clients %d --latency-clients %d --duration %v --warmup %v --rounds %d",
			strings.Join(c.backends, ","), strings.Join(c.scenarios, ","), c.clients, c.latencyClients, c.duration, c.warmup, c.rounds),
		Machine: fmt.Sprintf("%s, %d CPUs, %s", cpuName(), runtime.NumCPU(), runtime.Version()),
		Figures: rounded}
}

// writeBaseline writes b to path, indented, as readBaseline reads it.
func writeBaseline(path string, b *baseline) error {
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}

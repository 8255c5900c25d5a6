// Command kassa-load measures Kassa under load. For each storage backend it starts "kassa serve" (on
// a fresh SQLite data directory, or on a throwaway PostgreSQL cluster with durable commits), creates
// a merchant, and drives scenarios over HTTP from concurrent clients:
//
//	ledger         the ledger alone: Ledger.Charge of the sale scenario's sale from the clients, in this
//	               process, no HTTP (ledger.go)
//	sale           approved sales
//	http-ceiling   the same requests to a bare net/http handler in a process of its own (barehttp.go)
//	token          client-credentials token requests
//	mixed          authorize, capture, refund and a list of 100, in turn
//	iso8583        approved sales of a merchant on an ISO 8583 account at kassa-acquirer
//	iso8583-50ms   the same with the host answering after 50 ms, from 1,000 clients
//	iso8583-250ms  the same with the host answering after 250 ms, from --latency-clients (2,000)
//	sale-250ms     approved sales from a kassa serve whose simulator answers after 250 ms, from
//	               --latency-clients
//
// It reports throughput, latency percentiles, errors, the server's CPU time per 1000 operations (and
// in the iso8583 scenarios the acquirer host's) and, in the JSON lines, its peak resident memory.
// The comparisons with their targets follow, each a ratio to the bare handler measured in the same
// run, on the same cores: the ledger alone against the HTTP-stack ceiling (the bare handler's answers
// per second; target 0.45 on SQLite, none on PostgreSQL), API sales against it (targets 0.33 on
// SQLite, 0.30 on PostgreSQL, sale p99 ≤ 25 ms at 64 clients), and each 250 ms scenario against
// min(clients ÷ latency, the same path at once) (target 0.9, p99 ≤ 600 ms, the server under 300 MB),
// each saying whether its target is met; a missed one does not fail the command, as none of its
// comparisons does.
//
// Then each scenario's figures — its ratio, p99 and CPU per 1000 operations — are printed beside the
// baseline's, the last release's (--baseline, cmd/kassa-load/baseline.json; baseline.go), those more
// than 10 % worse marked REGRESSED and counted on a summary line. Machine noise moves them, so they
// fail the command only with --fail-on-regression. --write-baseline FILE writes this run's figures
// as a new baseline, with the commit measured and the date.
// It then measures the machine's durable-write ceiling for the backend — the rows a sale writes,
// inserted by a plain program through the same driver, with the same durability and concurrency and
// no HTTP — and the ratio of API sales to that ceiling.
//
// "kassa-load webhooks" is the webhooks' benchmark instead (webhooks.go): sales with and without an
// endpoint subscribed to every event, and deliveries per second to a local receiver.
//
// "kassa-load scale" is the benchmark of the scale of data instead (scale.go): sales on an empty
// ledger and on one holding 10,000,000 bulk-loaded transactions, side by side, and the loaded
// merchant's lists and filters through the gateway API, failing when a target is missed.
//
// "kassa-load dashboard" is the dashboard's benchmark instead (dashboard.go): it loads 1,000,000
// transactions of one merchant, runs the server in this process, and reports the server time of the
// dashboard's pages and the time and memory of a CSV export, failing when a target is missed.
//
// Usage:
//
//	kassa-load [--kassa bin/kassa] [--acquirer bin/kassa-acquirer] [--backends sqlite,postgres]
//	           [--scenarios ledger,sale,http-ceiling,token,mixed] [--clients 64] [--latency-clients 2000] [--duration 10s]
//	           [--baseline cmd/kassa-load/baseline.json] [--fail-on-regression] [--write-baseline FILE]
//	kassa-load dashboard [--backends sqlite,postgres] [--transactions 1000000] [--requests 200]
//	           [--export-rows 100000] [--json]
//	kassa-load webhooks [--backends sqlite,postgres] [--clients 64] [--duration 10s] [--events 20000]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// defaultScenarios are the scenarios "make bench" runs: the ledger alone, the sale and the HTTP-stack
// ceiling one after the other, and the 2,000 clients of the latency-tolerance scenarios last, after
// the scenarios they are compared with.
const defaultScenarios = "ledger,sale,http-ceiling,token,mixed,iso8583,iso8583-50ms,iso8583-250ms,sale-250ms"

// usage is the help of "kassa-load -h": the scenarios and the other benchmarks, then the flags.
func usage() {
	w := flag.CommandLine.Output()
	fmt.Fprint(w, `kassa-load measures Kassa under load: for each backend it starts kassa serve on a fresh database,
drives the scenarios over HTTP from concurrent clients, and reports throughput, latency percentiles,
errors and the server's CPU per 1000 operations, then the comparisons with their targets, each a
ratio to the bare handler measured in the same run and saying whether its target is met, then each
figure beside the baseline's (--baseline), those more than 10 % worse marked REGRESSED.

Scenarios:
  ledger         the ledger alone: Ledger.Charge of the sale scenario's sale from the clients, in
                 this process, no HTTP (the simulator answering at once, production durability);
                 compared with http-ceiling (target ≥ 0.45 SQLite, PostgreSQL reported, no target)
  sale           approved sales (the built-in simulator answering at once)
  http-ceiling   the HTTP-stack ceiling: the same sale requests, from the same clients, to a bare
                 net/http handler in its own process that decodes them, checks the card number and
                 answers as many bytes as Kassa; compared with sale (target ≥ 0.33 SQLite, ≥ 0.30
                 PostgreSQL, sale p99 ≤ 25 ms at 64 clients)
  token          client-credentials token requests
  mixed          authorize, capture, refund and a list of 100, in turn
  iso8583        sales through the ISO 8583 connector to kassa-acquirer answering at once
  iso8583-50ms   the same, the host answering after 50 ms, from 1,000 clients
  iso8583-250ms  latency tolerance: the host answering after 250 ms, from --latency-clients; compared
                 with min(clients ÷ 250 ms, iso8583) (target ≥ 0.90, p99 ≤ 600 ms, server < 300 MB)
  sale-250ms     the same through a kassa serve --simulator-latency 250ms of its own, compared with
                 min(clients ÷ 250 ms, sale)

Other benchmarks: kassa-load dashboard -h, kassa-load webhooks -h, kassa-load drill -h,
kassa-load drill-ha -h, kassa-load drill-pitr -h, kassa-load upgrade -h.

Flags:
`)
	flag.PrintDefaults()
}

type config struct {
	kassa     string
	acquirer  string
	backends  []string
	scenarios []string
	clients   int
	// latencyClients are the clients of the latency-tolerance scenarios (iso8583-250ms, sale-250ms).
	latencyClients int
	duration       time.Duration
	warmup         time.Duration
	rounds         int
	ceiling        bool
	jsonOut        bool
	serveArgs      []string
	// base is the baseline the run's figures are compared with, read from basePath; nil: none.
	base     *baseline
	basePath string
	// failOnRegression makes a figure more than 10 % worse than the baseline's fail the command.
	failOnRegression bool
	// writeBaseline is the file this run's figures are written to as a new baseline ("": none), with
	// commit, the commit measured, and baseNote.
	writeBaseline    string
	commit, baseNote string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "dashboard" {
		os.Exit(dashboardMain(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "scale" {
		os.Exit(scaleMain(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "drill" {
		os.Exit(drillMain(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "upgrade" {
		os.Exit(upgradeMain(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "drill-ha" {
		os.Exit(drillHAMain(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "drill-pitr" {
		os.Exit(drillPITRMain(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "webhooks" {
		os.Exit(webhooksMain(os.Args[2:], os.Stdout))
	}
	// Not in the help: the bare server the http-ceiling scenario starts (barehttp.go).
	if len(os.Args) > 1 && os.Args[1] == "bare-http" {
		os.Exit(bareHTTPMain(os.Args[2:], os.Stdout))
	}
	var c config
	var backends, scenarios, serveArgs string
	flag.StringVar(&c.kassa, "kassa", "bin/kassa", "the kassa binary to start")
	flag.StringVar(&c.acquirer, "acquirer", "bin/kassa-acquirer", "the kassa-acquirer binary the iso8583 scenarios start")
	flag.StringVar(&backends, "backends", "sqlite,postgres", "storage backends to measure, comma-separated")
	flag.StringVar(&scenarios, "scenarios", defaultScenarios, "scenarios to run, comma-separated (see above)")
	flag.IntVar(&c.clients, "clients", 64, "concurrent clients")
	flag.IntVar(&c.latencyClients, "latency-clients", 2000, "concurrent clients of the latency-tolerance scenarios (iso8583-250ms, sale-250ms)")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long each scenario runs")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "how long each scenario runs before it is measured")
	flag.IntVar(&c.rounds, "rounds", 1, "how many times the scenarios run, one after the other, on each backend; the comparisons use each scenario's median")
	flag.BoolVar(&c.ceiling, "ceiling", true, "also measure the durable-write ceiling of each backend")
	flag.BoolVar(&c.jsonOut, "json", false, "print results as JSON lines instead of a table")
	flag.StringVar(&serveArgs, "serve-args", "", "extra flags for kassa serve, space-separated")
	flag.StringVar(&c.basePath, "baseline", defaultBaseline, "the baseline to compare the figures with (\"\": none)")
	flag.BoolVar(&c.failOnRegression, "fail-on-regression", false, "exit 1 when a figure is more than 10 % worse than the baseline's")
	flag.StringVar(&c.writeBaseline, "write-baseline", "", "write this run's figures as a new baseline to this file")
	flag.StringVar(&c.commit, "commit", "", "the commit measured, for --write-baseline (default: git rev-parse HEAD, -dirty when the tree has changes)")
	flag.StringVar(&c.baseNote, "baseline-note", "", "a note for --write-baseline: the machine and how quiet it was")
	flag.Usage = usage
	flag.Parse()
	c.backends, c.scenarios, c.serveArgs = split(backends), split(scenarios), strings.Fields(serveArgs)
	if flag.NArg() > 0 {
		// A word the tool does not know (a subcommand of a newer build, say) is refused, rather than
		// taken as a request for the whole load benchmark.
		fmt.Fprintf(os.Stderr, "kassa-load: unknown command %q (kassa-load -h lists the commands)\n", flag.Arg(0))
		os.Exit(2)
	}
	if c.clients < 1 || c.latencyClients < 1 || c.duration <= 0 || c.rounds < 1 {
		fmt.Fprintln(os.Stderr, "kassa-load: --clients, --latency-clients and --rounds must be >= 1 and --duration > 0")
		os.Exit(2)
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "baseline" })
	if err := c.prepareBaseline(explicit); err != nil {
		fmt.Fprintln(os.Stderr, "kassa-load:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kassa-load:", err)
		os.Exit(1)
	}
}

// judge runs the measurement of the benchmark command until SIGINT or SIGTERM and makes its outcome
// the exit status: 1 with the error when the benchmark itself failed, 1 with missed when a target
// was missed or a request failed, 0 otherwise.
func judge(command, missed string, measure func(context.Context) (bool, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := measure(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kassa-load %s: %v\n", command, err)
		return 1
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "kassa-load %s: %s (see above)\n", command, missed)
		return 1
	}
	return 0
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run measures c's scenarios on each of its backends, then compares their figures with c's baseline
// and writes them as a new one when asked to. It fails when a figure is more than 10 % worse than the
// baseline's only with c.failOnRegression, and then after the new baseline is written.
func run(ctx context.Context, c config, out io.Writer) error {
	rep := &reporter{w: out, json: c.jsonOut}
	rep.machine(c)
	got := figures{}
	for _, backend := range c.backends {
		figs, err := runBackend(ctx, c, backend, rep)
		if err != nil {
			return fmt.Errorf("%s: %w", backend, err)
		}
		got[backend] = figs
	}
	return c.conclude(rep, got)
}

// conclude compares the run's figures, got, with c's baseline and writes them as a new baseline when
// c asks for it; then, with c.failOnRegression, it fails when a figure is more than regressionMargin
// worse than the baseline's (after writing the new one, which a maintainer may want all the same).
func (c config) conclude(rep *reporter, got figures) error {
	regressed := 0
	if c.base != nil {
		regressed = rep.baseline(c.basePath, c.base, compare(c.base.Figures, got), c.backends, c.scenarios)
	}
	if c.writeBaseline != "" {
		if err := writeBaseline(c.writeBaseline, newBaseline(c, got, time.Now())); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "kassa-load: this run's figures written to %s as the baseline of %s\n", c.writeBaseline, c.commit)
	}
	if regressed > 0 && c.failOnRegression {
		return fmt.Errorf("%d figures more than %.0f %% worse than the baseline (--fail-on-regression)", regressed, regressionMargin*100)
	}
	return nil
}

// runBackend measures c's scenarios on backend and returns their figures for the baseline.
func runBackend(ctx context.Context, c config, backend string, rep *reporter) (map[string]map[string]float64, error) {
	env, err := newEnvironment(backend)
	if err != nil {
		return nil, err
	}
	defer env.close()
	// The merchant of the iso8583 scenarios is connected to kassa-acquirer before the server starts,
	// so that the server reads its account at once.
	var acq *acquirer
	var isoMerchant merchant
	most := c.clients
	for _, name := range c.scenarios {
		sc, ok := scenarios[name]
		if !ok {
			return nil, fmt.Errorf("unknown scenario %q", name)
		}
		most = max(most, clientsOf(sc, c))
		if sc.iso && acq == nil {
			if acq, err = startAcquirer(ctx, c.acquirer, env.dir); err != nil {
				return nil, err
			}
			defer acq.stop()
			cli := &kassa{bin: c.kassa, dbArgs: env.dbArgs("api")}
			if isoMerchant, err = cli.newMerchant(ctx, "acquirer"); err != nil {
				return nil, err
			}
			if err := cli.connect(ctx, isoMerchant, acq, env.dir, 10*time.Second); err != nil {
				return nil, err
			}
		}
	}
	// Every client holds a connection open, here and in the server: 2,000 of them need more open files
	// than a shell's usual 1,024.
	if err := ensureOpenFiles(filesFor(most)); err != nil {
		return nil, err
	}
	srv, err := startKassa(ctx, c.kassa, env.dbArgs("api"), c.serveArgs)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	if err := checkOpenFiles(srv.cmd.Process.Pid, "kassa serve", filesFor(most)); err != nil {
		return nil, err
	}
	m, err := srv.newMerchant(ctx, "load")
	if err != nil {
		return nil, err
	}
	// Each scenario's operations per second (of its first operation), p99 and server's peak memory, a
	// figure a round. A virtual machine's neighbours move one run by several percent; rounds
	// interleaved on one server, compared by their medians, compare the scenarios under the same
	// conditions.
	rounds := map[string][]*result{}
	var slowMerchant merchant // the merchant of the simulator-latency scenarios, on their own database
	answerBytes := 0          // the length of Kassa's approved sale answer, which the bare server's matches
	var lb *ledgerBench       // the ledger scenario's, opened on its first round
	for round := range c.rounds * len(c.scenarios) {
		name := c.scenarios[round%len(c.scenarios)]
		sc, cc, target, who := scenarios[name], c, srv, m
		cc.clients = clientsOf(sc, c)
		var host *acquirer
		var res *result
		switch {
		case sc.ledger:
			if lb == nil {
				if lb, err = openLedger(ctx, env); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				defer lb.close()
			}
			if res, err = lb.drive(ctx, cc); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		case sc.iso:
			if err := acq.setLatency(ctx, sc.latency); err != nil {
				return nil, err
			}
			who, host = isoMerchant, acq
		case sc.simLatency > 0:
			// The simulator's latency is the server's setting: a server of its own for the scenario's
			// run, on a database of its own, stopped after it.
			if target, err = startKassa(ctx, c.kassa, env.dbArgs("latency"),
				append(slices.Clone(c.serveArgs), "--simulator-latency", sc.simLatency.String())); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if err = checkOpenFiles(target.cmd.Process.Pid, "kassa serve", filesFor(cc.clients)); err == nil && slowMerchant.ID == "" {
				slowMerchant, err = target.newMerchant(ctx, "latency")
			}
			if err != nil {
				target.stop()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			who = slowMerchant
		case sc.bare:
			// The bare server answers as many bytes as Kassa's approved sale of this run.
			if answerBytes == 0 {
				if answerBytes, err = saleAnswerBytes(ctx, srv, m); err != nil {
					return nil, fmt.Errorf("%s: a sale to measure the answer: %w", name, err)
				}
			}
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			if target, err = startBareHTTP(ctx, self, answerBytes); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			who = merchant{ClientID: "bare", ClientSecret: "bare"}
		}
		if res == nil {
			res, err = drive(ctx, target, who, sc, cc, host)
			if target != srv {
				target.stop()
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		res.backend, res.scenario = backend, name
		rep.result(res)
		rounds[name] = append(rounds[name], res)
		// Only after a scenario that wrote to the server's database: analyzed while still empty (after
		// the ledger scenario, the first, which writes to a database of its own), its ledger would be
		// planned as empty through the next scenario — PostgreSQL scanned the whole table for each
		// outcome, and sales ran at a quarter of their rate.
		if sc.ledger {
			continue
		}
		if err := env.analyze(ctx, "api"); err != nil {
			return nil, err
		}
	}
	sums := map[string]summary{}
	medians := map[string]float64{}
	for name, rs := range rounds {
		sums[name] = summarize(scenarios[name], clientsOf(scenarios[name], c), rs)
		medians[name] = sums[name].rate
	}
	rep.acquirer(backend, medians, c.rounds)
	rep.ledger(backend, sums, c.rounds)
	rep.httpCeiling(backend, sums, c.rounds)
	reported := map[string]bool{}
	for _, name := range c.scenarios {
		if scenarios[name].atOnce != "" && !reported[name] {
			rep.tolerance(backend, name, sums, c.rounds)
			reported[name] = true
		}
	}
	srv.stop()
	if c.ceiling {
		rate, err := ceiling(ctx, env, c)
		if err != nil {
			return nil, fmt.Errorf("ceiling: %w", err)
		}
		rep.ceiling(backend, rate, medians["sale"])
	}
	return figuresOf(sums), nil
}

// clientsOf is how many clients run sc: --latency-clients for a latency-tolerance scenario, the
// scenario's own number when it has one, --clients otherwise.
func clientsOf(sc scenario, c config) int {
	switch {
	case sc.latencyClients:
		return c.latencyClients
	case sc.clients > 0:
		return sc.clients
	}
	return c.clients
}

// summary is a scenario's figures over its rounds: the medians of its first operation's rate, p99
// and the server's CPU per 1000 of it, and the highest of the server's peaks of resident memory.
type summary struct {
	rate, p99 float64 // operations per second, milliseconds
	cpu       float64 // CPU seconds per 1000 operations
	// machineCPU is the whole machine's busy CPU seconds per 1000 operations (load generator, server,
	// PostgreSQL), and busy the share of its cores that were busy.
	machineCPU, busy float64
	rss              uint64 // bytes
	rssBefore        uint64 // bytes, in the round of the highest peak
	clients          int
}

// summarize sums up rs, the rounds of sc run from clients clients.
func summarize(sc scenario, clients int, rs []*result) summary {
	s := summary{clients: clients}
	var rates, p99s, cpus, machine, busy []float64
	for _, r := range rs {
		rates = append(rates, r.rate(sc.ops[0]))
		p99s = append(p99s, r.ops[sc.ops[0]].percentiles()[2])
		cpus = append(cpus, r.per1000(r.cpu, sc.ops[0]))
		machine = append(machine, r.per1000(r.machine.busy, sc.ops[0]))
		busy = append(busy, r.machine.share())
		if r.rssPeak >= s.rss {
			s.rss, s.rssBefore = r.rssPeak, r.rssBefore
		}
	}
	s.rate, s.p99, s.cpu = median(rates), median(p99s), median(cpus)
	s.machineCPU, s.busy = median(machine), median(busy)
	return s
}

// median is the middle of rs, or the mean of its two middle figures.
func median(rs []float64) float64 {
	s := slices.Sorted(slices.Values(rs))
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}

// reporter prints results as a table or JSON lines.
type reporter struct {
	w    io.Writer
	json bool
}

func (r *reporter) machine(c config) {
	cpu := cpuName()
	if r.json {
		r.emit(map[string]any{"machine": cpu, "cpus": runtime.NumCPU(), "go": runtime.Version(), "clients": c.clients,
			"latency_clients": c.latencyClients, "duration_s": c.duration.Seconds()})
		return
	}
	fmt.Fprintf(r.w, "machine: %s, %d CPUs, %s; %d clients, %v per scenario after %v warm-up; load generator and server on this machine\n\n",
		cpu, runtime.NumCPU(), runtime.Version(), c.clients, c.duration, c.warmup)
	fmt.Fprintf(r.w, "%-9s %-13s %-18s %8s %8s %8s %8s %8s %7s %14s %15s\n", "backend", "scenario", "operation", "ops/s",
		"p50 ms", "p95 ms", "p99 ms", "max ms", "errors", "CPU s/1000 ops", "host CPU s/1000")
}

func (r *reporter) result(res *result) {
	for _, op := range res.order {
		s := res.ops[op]
		p := s.percentiles()
		host, hosted := res.per1000(res.hostCPU, op), res.host && op == res.order[0]
		if r.json {
			line := map[string]any{"backend": res.backend, "scenario": res.scenario, "operation": op, "ops_per_s": res.rate(op),
				"p50_ms": p[0], "p95_ms": p[1], "p99_ms": p[2], "max_ms": p[3], "errors": s.errors, "cpu_s_per_1000": res.per1000(res.cpu, op),
				"server_peak_rss_mb": megabytes(res.rssPeak)}
			if hosted {
				line["host_cpu_s_per_1000"] = host
			}
			r.emit(line)
			continue
		}
		hostCol := ""
		if hosted {
			hostCol = fmt.Sprintf("%.3f", host)
		}
		fmt.Fprintf(r.w, "%-9s %-13s %-18s %8.0f %8.2f %8.2f %8.2f %8.2f %7d %14.3f %15s\n", res.backend, res.scenario, op,
			res.rate(op), p[0], p[1], p[2], p[3], s.errors, res.per1000(res.cpu, op), hostCol)
	}
	for _, e := range res.sampleErrors {
		fmt.Fprintf(os.Stderr, "  %s %s: %s\n", res.backend, res.scenario, e)
	}
}

func (r *reporter) ceiling(backend string, ceiling, sales float64) {
	ratio := 0.0
	if ceiling > 0 {
		ratio = sales / ceiling
	}
	if r.json {
		r.emit(map[string]any{"backend": backend, "ceiling_sales_per_s": ceiling, "api_sales_per_s": sales, "ratio": ratio})
		return
	}
	fmt.Fprintf(r.w, "%-9s ceiling: %.0f sales/s written by a plain program (same rows, driver, durability, concurrency); API/ceiling = %.2f\n",
		backend, ceiling, ratio)
}

// acquirer compares the ISO 8583 scenarios with what they are measured against: sales
// through kassa-acquirer answering at once with the simulator's sales, and with a host answering after
// 50 ms with the smaller of the ideal (clients ÷ latency) and the figure at once. It says nothing when
// the scenarios compared did not run. Over several rounds, the rates are each scenario's median.
func (r *reporter) acquirer(backend string, rates map[string]float64, rounds int) {
	iso, ok := rates["iso8583"]
	if !ok {
		return
	}
	sale, withSale := rates["sale"]
	slow, withSlow := rates["iso8583-50ms"]
	sc := scenarios["iso8583-50ms"]
	ideal := float64(sc.clients) / sc.latency.Seconds()
	if r.json {
		line := map[string]any{"backend": backend, "iso8583_sales_per_s": iso, "rounds": rounds}
		if withSale && sale > 0 {
			line["iso8583_to_sale"] = iso / sale
		}
		if withSlow && iso > 0 {
			line["iso8583_50ms_to_bound"] = slow / min(ideal, iso)
		}
		r.emit(line)
		return
	}
	fmt.Fprintf(r.w, "%-9s ISO 8583:", backend)
	if rounds > 1 {
		fmt.Fprintf(r.w, " medians of %d rounds:", rounds)
	}
	if withSale && sale > 0 {
		fmt.Fprintf(r.w, " host answering at once %.0f sales/s = %.2f of the simulator's %.0f;", iso, iso/sale, sale)
	}
	if withSlow && iso > 0 {
		fmt.Fprintf(r.w, " after %v, from %d clients, %.0f = %.2f of min(%.0f ideal, %.0f at once)", sc.latency, sc.clients, slow,
			slow/min(ideal, iso), ideal, iso)
	}
	fmt.Fprintln(r.w)
}

// The targets the comparisons are measured against.
var (
	// httpCeilingTargets are the least fraction of the HTTP-stack ceiling Kassa's sales reach, by
	// backend.
	httpCeilingTargets = map[string]float64{"sqlite": 0.33, "postgres": 0.30}
	// ledgerTargets are the least fraction of the HTTP-stack ceiling the ledger alone reaches, by
	// backend; PostgreSQL's figure is reported without one.
	ledgerTargets = map[string]float64{"sqlite": 0.45}
)

const (
	httpCeilingP99Target = 25.0 // ms: the sale scenario's p99
	httpCeilingClients   = 64   // the clients the HTTP-stack ceiling's and the ledger's targets are stated for
	toleranceTarget      = 0.9  // the least fraction of min(ideal, at once) a latency-tolerance scenario reaches
	toleranceP99Target   = 600.0
	toleranceRSSTarget   = 300 << 20 // bytes of the server's resident memory, which it stays under
)

// verdict says whether a target is met, plainly.
func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// megabytes is b in MB of 2^20 bytes, as the soak counts them (soak.go).
func megabytes(b uint64) float64 { return float64(b) / (1 << 20) }

// httpCeiling compares Kassa's sales with the HTTP-stack ceiling: the bare
// net/http handler's answers per second, from the same clients on the same cores in the same run;
// the ratio sales/ceiling and the sale scenario's p99 are checked against the targets, and the line
// says whether each is met. It says nothing when the http-ceiling scenario did not run. As the rest of
// the main command's comparisons, a missed target is reported, and does not fail the command.
func (r *reporter) httpCeiling(backend string, sums map[string]summary, rounds int) {
	bare, ok := sums["http-ceiling"]
	if !ok {
		return
	}
	sale, withSale := sums["sale"]
	ratio, _ := toBare("sale", sums)
	target := httpCeilingTargets[backend]
	if r.json {
		line := map[string]any{"backend": backend, "clients": bare.clients, "rounds": rounds,
			"http_ceiling_per_s": bare.rate, "http_ceiling_p99_ms": bare.p99, "http_ceiling_cpu_s_per_1000": bare.cpu}
		if withSale {
			line["sales_per_s"], line["sale_p99_ms"], line["sales_to_http_ceiling"] = sale.rate, sale.p99, ratio
			line["sale_cpu_s_per_1000"] = sale.cpu
			if bound, ok := cpuBound(sale, bare); ok {
				line["sale_machine_cpu_s_per_1000"], line["http_ceiling_machine_cpu_s_per_1000"] = sale.machineCPU, bare.machineCPU
				line["sale_cores_busy"], line["http_ceiling_cores_busy"], line["sales_to_http_ceiling_cpu_bound"] = sale.busy, bare.busy, bound
			}
			line["target_ratio"], line["ratio_met"] = target, ratio >= target
			line["target_p99_ms"], line["p99_met"] = httpCeilingP99Target, sale.p99 <= httpCeilingP99Target
		}
		r.emit(line)
		return
	}
	fmt.Fprintf(r.w, "%-9s HTTP-stack ceiling:", backend)
	if rounds > 1 {
		fmt.Fprintf(r.w, " medians of %d rounds:", rounds)
	}
	fmt.Fprintf(r.w, " a bare net/http handler answered %.0f sales/s (p99 %.2f ms, CPU %.3f s/1000) from %d clients;", bare.rate, bare.p99,
		bare.cpu, bare.clients)
	if !withSale {
		fmt.Fprintln(r.w, " no sale scenario in this run to compare with it")
		return
	}
	fmt.Fprintf(r.w, " Kassa's %.0f sales/s = %.2f of it (target ≥ %.2f: %s), sale p99 %.2f ms (target ≤ %.0f ms: %s), CPU %.3f s/1000 sales",
		sale.rate, ratio, target, verdict(ratio >= target), sale.p99, httpCeilingP99Target, verdict(sale.p99 <= httpCeilingP99Target), sale.cpu)
	if bare.clients != httpCeilingClients {
		fmt.Fprintf(r.w, "; the targets are stated at %d clients, this run had %d", httpCeilingClients, bare.clients)
	}
	fmt.Fprintln(r.w)
	if bound, ok := cpuBound(sale, bare); ok {
		fmt.Fprintf(r.w, "%-9s the machine's CPU per 1000 (load generator, server and database together): sales %.3f s with %.0f %% of the cores busy, the bare handler %.3f s with %.0f %% busy; with every core busy, sales would be at most %.2f of the ceiling\n",
			backend, sale.machineCPU, 100*sale.busy, bare.machineCPU, 100*bare.busy, bound)
	}
}

// cpuBound is the most sales can be of the bare handler's rate on this machine whatever the waits: the
// ratio of the whole machine's CPU per answer of the bare handler to its CPU per sale, the bare
// handler's share of busy cores counted (it is what the ceiling reached, not every core's worth).
func cpuBound(sale, bare summary) (float64, bool) {
	if sale.machineCPU <= 0 || bare.machineCPU <= 0 || bare.busy <= 0 {
		return 0, false
	}
	return bare.machineCPU / sale.machineCPU / bare.busy, true
}

// tolerance reports the latency-tolerance scenario name: its sales per second
// against min(ideal = clients ÷ latency, the same path's figure at once in this run), its p99 and the
// server's peak resident memory, each against its target, saying whether it is met. Without the
// figure at once in the run, the bound is the ideal alone, and the line says so.
func (r *reporter) tolerance(backend, name string, sums map[string]summary, rounds int) {
	sc := scenarios[name]
	s, ok := sums[name]
	if !ok {
		return
	}
	ideal, bound, atOnce, withAtOnce := toleranceBound(name, s, sums)
	ratio := 0.0
	if bound > 0 {
		ratio = s.rate / bound
	}
	ratioMet, p99Met, rssMet := ratio >= toleranceTarget, s.p99 <= toleranceP99Target, s.rss > 0 && s.rss < toleranceRSSTarget
	if r.json {
		line := map[string]any{"backend": backend, "scenario": name, "latency_ms": float64(sc.delay().Microseconds()) / 1000,
			"clients": s.clients, "rounds": rounds, "sales_per_s": s.rate, "ideal_per_s": ideal, "bound_per_s": bound,
			"ratio_to_bound": ratio, "target_ratio": toleranceTarget, "ratio_met": ratioMet,
			"p99_ms": s.p99, "target_p99_ms": toleranceP99Target, "p99_met": p99Met,
			"cpu_s_per_1000": s.cpu, "server_peak_rss_mb": megabytes(s.rss), "server_rss_before_mb": megabytes(s.rssBefore),
			"target_rss_mb": megabytes(toleranceRSSTarget), "rss_met": rssMet}
		if withAtOnce {
			line["at_once_per_s"] = atOnce.rate
		}
		r.emit(line)
		return
	}
	path := "ISO 8583 host"
	if sc.simLatency > 0 {
		path = "simulator"
	}
	fmt.Fprintf(r.w, "%-9s latency tolerance:", backend)
	if rounds > 1 {
		fmt.Fprintf(r.w, " medians of %d rounds:", rounds)
	}
	fmt.Fprintf(r.w, " %s %v away, %d clients: %.0f sales/s = %.2f of ", path, sc.delay(), s.clients, s.rate, ratio)
	if withAtOnce {
		fmt.Fprintf(r.w, "min(%.0f ideal, %.0f at once)", ideal, atOnce.rate)
	} else {
		fmt.Fprintf(r.w, "the %.0f ideal (no %s figure at once in this run)", ideal, sc.atOnce)
	}
	fmt.Fprintf(r.w, " (target ≥ %.2f: %s); p99 %.2f ms (target ≤ %.0f ms: %s); CPU %.3f s/1000 sales; server's peak resident memory %.0f MB, %.0f MB before its clients (target < %.0f MB: %s)\n",
		toleranceTarget, verdict(ratioMet), s.p99, toleranceP99Target, verdict(p99Met), s.cpu, megabytes(s.rss), megabytes(s.rssBefore),
		megabytes(toleranceRSSTarget), verdict(rssMet))
}

// toleranceBound is what the latency-tolerance scenario name, whose figures are s, is measured
// against: the ideal, its clients ÷ its latency, and the bound, min(ideal, the same path's figure at
// once in this run), the ideal alone when that path did not run (withAtOnce false).
func toleranceBound(name string, s summary, sums map[string]summary) (ideal, bound float64, atOnce summary, withAtOnce bool) {
	sc := scenarios[name]
	ideal = float64(s.clients) / sc.delay().Seconds()
	atOnce, withAtOnce = sums[sc.atOnce]
	bound = ideal
	if withAtOnce {
		bound = min(ideal, atOnce.rate)
	}
	return ideal, bound, atOnce, withAtOnce
}

// toBare is scenario name's rate as a fraction of the bare handler's in the same run (http-ceiling);
// false when either did not run or the bare handler answered nothing.
func toBare(name string, sums map[string]summary) (float64, bool) {
	s, ok := sums[name]
	bare, withBare := sums["http-ceiling"]
	if !ok || !withBare || bare.rate <= 0 {
		return 0, false
	}
	return s.rate / bare.rate, true
}

// ledger compares the ledger alone with the HTTP-stack ceiling of the same run: its sales per second
// as a fraction of the bare handler's answers, against its target where the backend has one, with
// its p99 and CPU per 1000 sales. It says nothing when the ledger scenario did not run.
func (r *reporter) ledger(backend string, sums map[string]summary, rounds int) {
	l, ok := sums["ledger"]
	if !ok {
		return
	}
	ratio, withBare := toBare("ledger", sums)
	target, withTarget := ledgerTargets[backend]
	if r.json {
		line := map[string]any{"backend": backend, "clients": l.clients, "rounds": rounds, "ledger_sales_per_s": l.rate,
			"ledger_p99_ms": l.p99, "ledger_cpu_s_per_1000": l.cpu}
		if withBare {
			line["ledger_to_http_ceiling"] = ratio
			if withTarget {
				line["target_ratio"], line["ratio_met"] = target, ratio >= target
			}
		}
		r.emit(line)
		return
	}
	fmt.Fprintf(r.w, "%-9s ledger alone:", backend)
	if rounds > 1 {
		fmt.Fprintf(r.w, " medians of %d rounds:", rounds)
	}
	fmt.Fprintf(r.w, " Ledger.Charge from %d goroutines, no HTTP, %.0f sales/s (p99 %.2f ms, CPU %.3f s/1000 sales);",
		l.clients, l.rate, l.p99, l.cpu)
	switch {
	case !withBare:
		fmt.Fprint(r.w, " no http-ceiling scenario in this run to compare with it")
	case withTarget:
		fmt.Fprintf(r.w, " %.2f of the bare handler's %.0f (target ≥ %.2f: %s)", ratio, sums["http-ceiling"].rate, target, verdict(ratio >= target))
	default:
		fmt.Fprintf(r.w, " %.2f of the bare handler's %.0f (no target on this backend)", ratio, sums["http-ceiling"].rate)
	}
	if l.clients != httpCeilingClients {
		fmt.Fprintf(r.w, "; the targets are stated at %d clients, this run had %d", httpCeilingClients, l.clients)
	}
	fmt.Fprintln(r.w)
}

func (r *reporter) emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(r.w, string(b))
}

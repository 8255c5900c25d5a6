// Command kassa-load measures Kassa under load. For each storage backend it starts "kassa serve" (on
// a fresh SQLite data directory, or on a throwaway PostgreSQL cluster with durable commits), creates
// a merchant, and drives scenarios over HTTP from concurrent clients:
//
//	sale    approved sales
//	token   client-credentials token requests
//	mixed   authorize, capture, refund and a list of 100, in turn
//	iso8583       approved sales of a merchant on an ISO 8583 account at kassa-acquirer
//	iso8583-50ms  the same with the host answering after 50 ms, from 1,000 clients
//
// It reports throughput, latency percentiles, errors and the server's CPU time per 1000 operations
// (and in the iso8583 scenarios the acquirer host's).
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
//	           [--scenarios sale,token,mixed] [--clients 64] [--duration 10s]
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

type config struct {
	kassa     string
	acquirer  string
	backends  []string
	scenarios []string
	clients   int
	duration  time.Duration
	warmup    time.Duration
	rounds    int
	ceiling   bool
	jsonOut   bool
	serveArgs []string
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
	if len(os.Args) > 1 && os.Args[1] == "webhooks" {
		os.Exit(webhooksMain(os.Args[2:], os.Stdout))
	}
	var c config
	var backends, scenarios, serveArgs string
	flag.StringVar(&c.kassa, "kassa", "bin/kassa", "the kassa binary to start")
	flag.StringVar(&c.acquirer, "acquirer", "bin/kassa-acquirer", "the kassa-acquirer binary the iso8583 scenarios start")
	flag.StringVar(&backends, "backends", "sqlite,postgres", "storage backends to measure, comma-separated")
	flag.StringVar(&scenarios, "scenarios", "sale,token,mixed,iso8583,iso8583-50ms", "scenarios to run, comma-separated: sale, token, mixed, iso8583, iso8583-50ms")
	flag.IntVar(&c.clients, "clients", 64, "concurrent clients")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long each scenario runs")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "how long each scenario runs before it is measured")
	flag.IntVar(&c.rounds, "rounds", 1, "how many times the scenarios run, one after the other, on each backend; the comparisons use each scenario's median")
	flag.BoolVar(&c.ceiling, "ceiling", true, "also measure the durable-write ceiling of each backend")
	flag.BoolVar(&c.jsonOut, "json", false, "print results as JSON lines instead of a table")
	flag.StringVar(&serveArgs, "serve-args", "", "extra flags for kassa serve, space-separated")
	flag.Parse()
	c.backends, c.scenarios, c.serveArgs = split(backends), split(scenarios), strings.Fields(serveArgs)
	if c.clients < 1 || c.duration <= 0 || c.rounds < 1 {
		fmt.Fprintln(os.Stderr, "kassa-load: --clients and --rounds must be >= 1 and --duration > 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kassa-load:", err)
		os.Exit(1)
	}
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

func run(ctx context.Context, c config, out io.Writer) error {
	rep := &reporter{w: out, json: c.jsonOut}
	rep.machine(c)
	for _, backend := range c.backends {
		if err := runBackend(ctx, c, backend, rep); err != nil {
			return fmt.Errorf("%s: %w", backend, err)
		}
	}
	return nil
}

func runBackend(ctx context.Context, c config, backend string, rep *reporter) error {
	env, err := newEnvironment(backend)
	if err != nil {
		return err
	}
	defer env.close()
	// The merchant of the iso8583 scenarios is connected to kassa-acquirer before the server starts,
	// so that the server reads its account at once.
	var acq *acquirer
	var isoMerchant merchant
	for _, name := range c.scenarios {
		if sc, ok := scenarios[name]; !ok {
			return fmt.Errorf("unknown scenario %q", name)
		} else if sc.iso && acq == nil {
			if acq, err = startAcquirer(ctx, c.acquirer, env.dir); err != nil {
				return err
			}
			defer acq.stop()
			cli := &kassa{bin: c.kassa, dbArgs: env.dbArgs("api")}
			if isoMerchant, err = cli.newMerchant(ctx, "acquirer"); err != nil {
				return err
			}
			if err := cli.connect(ctx, isoMerchant, acq, env.dir, 10*time.Second); err != nil {
				return err
			}
		}
	}
	srv, err := startKassa(ctx, c.kassa, env.dbArgs("api"), c.serveArgs)
	if err != nil {
		return err
	}
	defer srv.stop()
	m, err := srv.newMerchant(ctx, "load")
	if err != nil {
		return err
	}
	// Each scenario's operations per second (of its first operation), a figure a round. A virtual
	// machine's neighbours move one run by several percent; rounds interleaved on one server, compared
	// by their medians, compare the scenarios under the same conditions.
	rates := map[string][]float64{}
	for round := range c.rounds * len(c.scenarios) {
		name := c.scenarios[round%len(c.scenarios)]
		sc, cc, who := scenarios[name], c, m
		if sc.iso {
			if err := acq.setLatency(ctx, sc.latency); err != nil {
				return err
			}
			who = isoMerchant
			if sc.clients > 0 {
				cc.clients = sc.clients
			}
		}
		var host *acquirer
		if sc.iso {
			host = acq
		}
		res, err := drive(ctx, srv, who, sc, cc, host)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res.backend, res.scenario = backend, name
		rep.result(res)
		rates[name] = append(rates[name], res.rate(sc.ops[0]))
		if err := env.analyze(ctx, "api"); err != nil {
			return err
		}
	}
	medians := map[string]float64{}
	for name, rs := range rates {
		medians[name] = median(rs)
	}
	rep.acquirer(backend, medians, c.rounds)
	srv.stop()
	if c.ceiling {
		rate, err := ceiling(ctx, env, c)
		if err != nil {
			return fmt.Errorf("ceiling: %w", err)
		}
		rep.ceiling(backend, rate, medians["sale"])
	}
	return nil
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
		r.emit(map[string]any{"machine": cpu, "cpus": runtime.NumCPU(), "go": runtime.Version(), "clients": c.clients, "duration_s": c.duration.Seconds()})
		return
	}
	fmt.Fprintf(r.w, "machine: %s, %d CPUs, %s; %d clients, %v per scenario after %v warm-up; load generator and server on this machine\n\n",
		cpu, runtime.NumCPU(), runtime.Version(), c.clients, c.duration, c.warmup)
	fmt.Fprintf(r.w, "%-9s %-12s %-17s %8s %8s %8s %8s %8s %7s %14s %15s\n", "backend", "scenario", "operation", "ops/s",
		"p50 ms", "p95 ms", "p99 ms", "max ms", "errors", "CPU s/1000 ops", "host CPU s/1000")
}

func (r *reporter) result(res *result) {
	for _, op := range res.order {
		s := res.ops[op]
		p := s.percentiles()
		host := res.per1000(res.hostCPU, op)
		if r.json {
			line := map[string]any{"backend": res.backend, "scenario": res.scenario, "operation": op, "ops_per_s": res.rate(op),
				"p50_ms": p[0], "p95_ms": p[1], "p99_ms": p[2], "max_ms": p[3], "errors": s.errors, "cpu_s_per_1000": res.per1000(res.cpu, op)}
			if host > 0 {
				line["host_cpu_s_per_1000"] = host
			}
			r.emit(line)
			continue
		}
		hostCol := ""
		if host > 0 {
			hostCol = fmt.Sprintf("%.3f", host)
		}
		fmt.Fprintf(r.w, "%-9s %-12s %-17s %8.0f %8.2f %8.2f %8.2f %8.2f %7d %14.3f %15s\n", res.backend, res.scenario, op,
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

// acquirer compares the ISO 8583 scenarios with what they are measured against (issue 15): sales
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

func (r *reporter) emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(r.w, string(b))
}

// Command kassa-acquirer runs an ISO 8583 acquirer host that speaks Kassa's profile: a host to point
// a merchant's iso8583 processor at, to try the connector before going live, and what the tests and
// benchmarks of the connector use. It decides by the profile's test cards, journals every request and
// answer in DIR, and serves the settlement report of a day on its HTTP listener.
//
// Usage:
//
//	kassa-acquirer --addr 127.0.0.1:9583 --data-dir DIR [--latency 50ms] [--drop-rate 0.02] [--http 127.0.0.1:9584]
//	               [--cpu-profile FILE]
//
// It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/kassapay/kassa/internal/acquirer"
	"github.com/kassapay/kassa/internal/private"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kassa-acquirer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg acquirer.Config
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:9583", "ISO 8583 listen address")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory of the journal (required)")
	fs.DurationVar(&cfg.Latency, "latency", 0, "how long the host waits before answering each request")
	fs.Float64Var(&cfg.DropRate, "drop-rate", 0, "share of answers to 0100, 0200 and 0220 that are processed but never sent, 0 to 1")
	fs.StringVar(&cfg.HTTPAddr, "http", "", "listen address of the settlement reports, the journal and the controls (default none)")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of the whole run to this file (diagnostics)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.DataDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "kassa-acquirer: --data-dir is required, and there are no arguments")
		fs.Usage()
		return 2
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, nil))
	if *cpuProfile != "" {
		f, err := private.Create(*cpuProfile)
		if err == nil {
			defer f.Close()
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "kassa-acquirer:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	h, err := acquirer.Start(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "kassa-acquirer:", err)
		return 1
	}
	fmt.Fprintf(stdout, "kassa-acquirer is listening on %s (ISO 8583), journal in %s\n", h.Addr(), cfg.DataDir)
	if cfg.HTTPAddr != "" {
		base := "http://" + h.HTTPAddr()
		fmt.Fprintf(stdout, "HTTP on %s: %s/settlement/YYYY-MM-DD.csv, %s/journal?reference=R, POST %s/control, %s/healthz\n",
			base, base, base, base, base)
	}
	<-ctx.Done()
	if err := h.Close(); err != nil {
		fmt.Fprintln(stderr, "kassa-acquirer:", err)
		return 1
	}
	return 0
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/synth"
)

// "kassa-load scale" is the benchmark of the scale of data: with 10,000,000 transactions already in
// the ledger (bulk-loaded), sale throughput must stay within 10 % of an empty ledger's, and listing or
// filtering a merchant's transactions at a p99 of at most 20 ms.
//
// For each backend it makes two databases side by side: an empty one, and one where a merchant's
// history of --transactions rows (with their audit records and the merchant's customers) is
// bulk-loaded with package synth. It starts a "kassa serve" on each, both running at once, and
// drives the sale scenario of the load benchmark (drive.go) against each in turn, in the order empty,
// loaded, loaded, empty, empty, loaded…, so that the neighbours of a shared machine and a growing
// database weigh on both sides alike; the ratio is of the means. The loaded ledger's sales are the
// loaded merchant's: its indexes (the merchant's time, card, e-mail, and the ledger's transaction
// ids) are the deep ones each sale inserts into. Then it sends --requests requests of each list and
// filter of the gateway API (GET /transaction-service/transaction) for that merchant, one at a time,
// with values drawn from the loaded data, and reports the client's time of each (request sent to
// body read) — the merchant's software waits for all of it. It exits 1 when a target is missed.
//
// Usage:
//
//	kassa-load scale [--kassa bin/kassa] [--backends sqlite,postgres] [--transactions 10000000]
//	           [--clients 64] [--duration 10s] [--warmup 2s] [--rounds 2] [--requests 200] [--json]

// scaleConfig configures the scale benchmark. Of config it uses kassa, backends, clients, duration,
// warmup, rounds (pairs of sale runs, one on each ledger) and jsonOut.
type scaleConfig struct {
	config
	transactions, customers int
	requests                int           // measured requests per list
	minRatio                float64       // the least loaded/empty sales ratio
	listLimit               time.Duration // the most a list's p99 may be
}

// scaleMain runs "kassa-load scale" and returns the exit code: 1 when a target is missed, a list
// fails or the benchmark itself does, 2 for bad flags.
func scaleMain(args []string, out io.Writer) int {
	var c scaleConfig
	var backends string
	fs := flag.NewFlagSet("kassa-load scale", flag.ExitOnError)
	fs.StringVar(&c.kassa, "kassa", "bin/kassa", "the kassa binary to start")
	fs.StringVar(&backends, "backends", "sqlite,postgres", "storage backends to measure, comma-separated")
	fs.IntVar(&c.transactions, "transactions", 10_000_000, "ledger rows to load for the merchant before its sales")
	fs.IntVar(&c.customers, "customers", 0, "vault customers the loaded transactions are made by (default: one for every 20 transactions)")
	fs.IntVar(&c.clients, "clients", 64, "concurrent clients of the sale scenario")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each sale run is measured")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "how long each sale run goes before it is measured")
	fs.IntVar(&c.rounds, "rounds", 2, "pairs of sale runs, one on each ledger, in the order empty, loaded, loaded, empty…; the ratio is of the means")
	fs.IntVar(&c.requests, "requests", 200, "measured requests per list or filter, one at a time")
	fs.Float64Var(&c.minRatio, "min-ratio", 0.90, "the least the loaded ledger's sales/s may be, as a share of the empty one's")
	fs.DurationVar(&c.listLimit, "list-p99", 20*time.Millisecond, "the most a list's or filter's p99 may be")
	fs.BoolVar(&c.jsonOut, "json", false, "print results as JSON lines instead of tables")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: kassa-load scale [flags]\n\nCompares sales on an empty ledger with sales on a loaded one, and measures the loaded merchant's lists and filters.")
		fs.PrintDefaults()
	}
	fs.Parse(args)
	c.backends = split(backends)
	if c.customers == 0 {
		c.customers = max(1, c.transactions/20)
	}
	if c.transactions < 1 || c.customers < 1 || c.clients < 1 || c.duration <= 0 || c.rounds < 1 || c.requests < 1 {
		fmt.Fprintln(os.Stderr, "kassa-load scale: --transactions, --customers, --clients, --rounds and --requests must be >= 1, --duration > 0")
		return 2
	}
	return judge("scale", "a target was missed or a request failed", func(ctx context.Context) (bool, error) {
		return runScale(ctx, c, out)
	})
}

// runScale measures every backend of c and reports to out; ok is false when a target was missed or
// a list failed. An error is a failure of the benchmark itself.
func runScale(ctx context.Context, c scaleConfig, out io.Writer) (ok bool, err error) {
	rep := &scaleReporter{reporter: reporter{w: out, json: c.jsonOut}, c: c}
	rep.machine()
	ok = true
	for _, backend := range c.backends {
		good, err := scaleBackend(ctx, c, backend, rep)
		if err != nil {
			return false, fmt.Errorf("%s: %w", backend, err)
		}
		ok = ok && good
	}
	return ok, nil
}

// loadedLedger is what scaleBackend loaded: the summary of the history, how long the load took,
// the range of the merchant's loaded ids (for cursors deep in the history) and the database's size.
type loadedLedger struct {
	sum    synth.Summary
	took   time.Duration
	lo, hi int64
	bytes  int64
}

// scaleBackend measures one backend: it loads the ledger, starts a server on it and one on an empty
// database, measures the loaded merchant's lists, then the sale runs on both in turn; it reports
// whether every target was met and every request answered.
func scaleBackend(ctx context.Context, c scaleConfig, backend string, rep *scaleReporter) (bool, error) {
	env, err := newEnvironment(backend)
	if err != nil {
		return false, err
	}
	defer env.close()
	// The loaded ledger first, while no server runs: the merchant is made as the other benchmarks make
	// theirs, then its history is loaded in bulk.
	if err := env.createDatabase(ctx, "scale"); err != nil {
		return false, err
	}
	lm, err := (&kassa{bin: c.kassa, dbArgs: env.dbArgs("scale")}).newMerchant(ctx, "scale")
	if err != nil {
		return false, err
	}
	ledger, err := loadLedger(ctx, env, lm, c)
	if err != nil {
		return false, err
	}
	rep.loaded(backend, ledger)

	empty, err := startKassa(ctx, c.kassa, env.dbArgs("api"), nil)
	if err != nil {
		return false, err
	}
	defer empty.stop()
	em, err := empty.newMerchant(ctx, "empty")
	if err != nil {
		return false, err
	}
	loaded, err := startKassa(ctx, c.kassa, env.dbArgs("scale"), nil)
	if err != nil {
		return false, err
	}
	defer loaded.stop()

	// The lists first, on the history as loaded: the sale runs add hundreds of thousands of approved
	// sales of one card at the top of the ledger, which no merchant's traffic looks like (a filter of
	// the declined would first step over all of them).
	api, err := apiClient(ctx, loaded.url, auth.Credentials{ClientID: lm.ClientID, ClientSecret: lm.ClientSecret})
	if err != nil {
		return false, err
	}
	if !rep.json {
		pageHeader(rep.w, "list")
	}
	ok := true
	for _, p := range scaleLists(ledger) {
		res := measurePage(p, c.requests, func(u string) (time.Duration, error) { return listOnce(ctx, api, loaded.url+u) })
		res.backend = backend
		ok = pageLine(rep.w, rep.json, res, c.listLimit) && ok
	}

	rep.salesHeader()
	sides := [2]struct {
		name string
		srv  *kassa
		m    merchant
		db   string
	}{{"empty", empty, em, "api"}, {"loaded", loaded, lm, "scale"}}
	var rates [2][]float64
	failed := false
	for round := range c.rounds {
		for _, side := range []int{round % 2, 1 - round%2} {
			s := sides[side]
			res, err := drive(ctx, s.srv, s.m, scenarios["sale"], c.config, nil)
			if err != nil {
				return false, fmt.Errorf("sale, %s ledger: %w", s.name, err)
			}
			res.backend, res.scenario = backend, "sale "+s.name
			rep.result(res)
			rates[side] = append(rates[side], res.rate("sale"))
			failed = failed || res.ops["sale"].errors > 0
			if err := env.analyze(ctx, s.db); err != nil {
				return false, err
			}
		}
	}
	return rep.sales(backend, mean(rates[0]), mean(rates[1]), c.transactions) && !failed && ok, nil
}

// loadLedger loads the history of merchant m into the environment's "scale" database.
func loadLedger(ctx context.Context, env *environment, m merchant, c scaleConfig) (loadedLedger, error) {
	var l loadedLedger
	db, err := store.Open(ctx, env.storeConfig("scale"))
	if err != nil {
		return l, err
	}
	defer db.Close()
	if l.sum, l.took, err = loadHistory(ctx, db, synth.Options{MerchantID: m.ID, ClientID: m.ClientID,
		Transactions: c.transactions, Customers: c.customers, Seed: 20}); err != nil {
		return l, err
	}
	if err := db.Raw().QueryRowContext(ctx, `SELECT MIN(id), MAX(id) FROM transactions WHERE merchant_id = $1`, m.ID).Scan(&l.lo, &l.hi); err != nil {
		return l, err
	}
	l.bytes, err = databaseSize(ctx, db)
	return l, err
}

// databaseSize is the space the database takes: PostgreSQL's size of it, or SQLite's pages (the
// write-ahead log aside).
func databaseSize(ctx context.Context, db *store.DB) (int64, error) {
	var n int64
	q := `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`
	if db.Dialect() == store.Postgres {
		q = `SELECT pg_database_size(current_database())`
	}
	err := db.Raw().QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// scaleLists are the lists and filters of the gateway API that the merchant's software asks for,
// with values drawn from the loaded data: the newest page; a page deep in the history (the after
// cursor of an id spread over the loaded ones); one day; a customer's e-mail, alone and with dates
// (the history's span: a dated list is ordered by time, not by id); the declined; one amount (a
// customer's payment looked for by its amount); and the large payments, at least 400.00. A range of
// a few units is left out: on a large ledger it is the amount filter's slow case (payment.amountProbe).
func scaleLists(l loadedLedger) []page {
	days := make([]string, 0, len(l.sum.PerDay))
	for d := range l.sum.PerDay {
		days = append(days, d)
	}
	sort.Strings(days)
	first, last := days[0], days[len(days)-1] // the history's span, whatever a customer's transactions' dates
	if len(days) > 2 {
		days = days[1 : len(days)-1] // whole days only
	}
	const path = "/transaction-service/transaction"
	day := func(i int) string { return days[(i*7)%len(days)] }
	email := func(i int) string { return url.QueryEscape(l.sum.Emails[i%len(l.sum.Emails)]) }
	spread := func(i int) float64 { _, f := math.Modf(float64(i) * 0.6180339887); return f } // evenly spread in [0, 1)
	return []page{
		{"newest", func(int) string { return path }},
		{"deep page", func(i int) string {
			return path + "?after=" + httpapi.EncodeCursor(l.lo+int64(spread(i+1)*float64(l.hi-l.lo)))
		}},
		{"one day", func(i int) string { return path + "?from_date=" + day(i) + "&to_date=" + day(i) }},
		{"e-mail", func(i int) string { return path + "?email_address=" + email(i) }},
		{"e-mail, dated", func(i int) string {
			return path + "?email_address=" + email(i) + "&from_date=" + first + "&to_date=" + last
		}},
		{"declined", func(int) string { return path + "?transaction_status=DECLINED" }},
		{"one amount", func(i int) string {
			a := l.sum.Amounts[i%len(l.sum.Amounts)]
			return path + "?min_amount=" + a + "&max_amount=" + a
		}},
		{"amount ≥", func(int) string { return path + "?min_amount=400.00" }},
	}
}

// listOnce sends one GET of the list at u with the merchant's token and returns the client's time
// for it, from sending it to the end of the body. Anything but a 200 with at least one transaction
// is an error: the values are drawn from the loaded data, so an empty answer means a filter that
// did not apply.
func listOnce(ctx context.Context, api *http.Client, u string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := api.Do(req)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(resp.Body)
	d := time.Since(start)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var page struct {
		Entities []json.RawMessage `json:"entities"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return 0, err
	}
	if len(page.Entities) == 0 {
		return 0, errors.New("no transactions")
	}
	return d, nil
}

// scaleReporter prints the scale benchmark's results as tables or JSON lines and judges the sales.
type scaleReporter struct {
	reporter
	c scaleConfig
}

func (r *scaleReporter) machine() {
	if r.json {
		r.emit(map[string]any{"machine": cpuName(), "cpus": runtime.NumCPU(), "go": runtime.Version(), "transactions": r.c.transactions,
			"clients": r.c.clients, "duration_s": r.c.duration.Seconds(), "rounds": r.c.rounds, "requests_per_list": r.c.requests})
		return
	}
	fmt.Fprintf(r.w, "machine: %s, %d CPUs, %s; sales from %d clients, %v per run after %v warm-up, %d runs per ledger; "+
		"%d requests per list after %d unmeasured, one at a time, client time; load generator and servers on this machine\n\n",
		cpuName(), runtime.NumCPU(), runtime.Version(), r.c.clients, r.c.duration, r.c.warmup, r.c.rounds, r.c.requests, warmUp)
}

func (r *scaleReporter) loaded(backend string, l loadedLedger) {
	if r.json {
		r.emit(map[string]any{"backend": backend, "loaded_transactions": l.sum.Transactions,
			"customers": l.sum.Customers, "load_s": l.took.Seconds(), "database_bytes": l.bytes})
		return
	}
	fmt.Fprintf(r.w, "%-9s loaded %d transactions, %d customers of one merchant in %.1f s (%.0f rows/s); database %.2f GiB\n",
		backend, l.sum.Transactions, l.sum.Customers, l.took.Seconds(), float64(l.sum.Transactions)/l.took.Seconds(),
		float64(l.bytes)/(1<<30))
}

// salesHeader heads the sale runs' table (the load benchmark's columns).
func (r *scaleReporter) salesHeader() {
	if !r.json {
		fmt.Fprintf(r.w, "\n%-9s %-12s %-17s %8s %8s %8s %8s %8s %7s %14s\n", "backend", "run", "operation", "ops/s",
			"p50 ms", "p95 ms", "p99 ms", "max ms", "errors", "CPU s/1000 ops")
	}
}

// sales reports the mean sales/s of the runs on each ledger and their ratio, and says whether the
// ratio meets its target.
func (r *scaleReporter) sales(backend string, empty, loaded float64, rows int) bool {
	ratio := 0.0
	if empty > 0 {
		ratio = loaded / empty
	}
	ok := ratio >= r.c.minRatio
	if r.json {
		r.emit(map[string]any{"backend": backend, "empty_sales_per_s": empty, "loaded_sales_per_s": loaded, "ratio": ratio,
			"min_ratio": r.c.minRatio, "ok": ok})
		return ok
	}
	verdict := map[bool]string{true: "ok", false: "MISSED"}[ok]
	fmt.Fprintf(r.w, "%-9s sales: %.0f/s on an empty ledger, %.0f/s with %d rows loaded: ratio %.3f (target ≥ %.2f): %s\n\n",
		backend, empty, loaded, rows, ratio, r.c.minRatio, verdict)
	return ok
}

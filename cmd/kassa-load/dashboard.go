package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/httpapi"
	merchants "github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/synth"
	"github.com/kassapay/kassa/internal/user"
)

// The dashboard benchmark: "make bench" loads 1,000,000 transactions for one merchant by a fast bulk
// path and reports the server time, p50 and p99, of the overview, the first list page, a filter by
// last 4, a customer e-mail search and a detail page, on both backends, each p99 to be at most 100 ms;
// and the time and peak memory of a 100,000-row CSV export, at most 5 s with memory flat.
//
// For each backend it loads the history with package synth, runs the real server in this process
// (server.New and Serve, so that its background work runs), signs an owner in through the dashboard's
// sign-in form with a cookie jar, and sends each page's requests one at a time. A page's time is the
// server's: from the moment the server's handler is entered to the moment it returns (timedHandler),
// so neither the client nor the network is counted. The export's memory is the Go heap in use, sampled
// while the export streams, compared with the heap before it, for two sizes of export.

// dashConfig configures the dashboard benchmark.
type dashConfig struct {
	backends                []string
	transactions, customers int
	carded                  int // customers given a real, encrypted card through the vault's API
	requests                int // measured requests per page
	exportRows              int
	pageLimit, exportLimit  time.Duration
	jsonOut                 bool
	// wrap, when set, wraps the server's handler (server.Config.Wrap): the test holds the
	// server's responses to api/openapi.yaml with it.
	wrap func(h http.Handler, routes []httpapi.Route) http.Handler
}

// dashboardMain runs "kassa-load dashboard" and returns the exit code: 1 when a target is missed or a
// page fails.
func dashboardMain(args []string, out io.Writer) int {
	var c dashConfig
	var backends string
	fs := flag.NewFlagSet("kassa-load dashboard", flag.ExitOnError)
	fs.StringVar(&backends, "backends", "sqlite,postgres", "storage backends to measure, comma-separated")
	fs.IntVar(&c.transactions, "transactions", 1_000_000, "ledger rows to load for the merchant")
	fs.IntVar(&c.customers, "customers", 50_000, "vault customers to load; the transactions are theirs")
	fs.IntVar(&c.carded, "carded", 200, "customers given a stored card through the vault's API (the card number encrypted)")
	fs.IntVar(&c.requests, "requests", 200, "measured requests per page")
	fs.IntVar(&c.exportRows, "export-rows", 100_000, "rows of the large CSV export (the small one has a tenth)")
	fs.DurationVar(&c.pageLimit, "page-p99", 100*time.Millisecond, "the most a page's p99 server time may be")
	fs.DurationVar(&c.exportLimit, "export-time", 5*time.Second, "the most the large export may take")
	fs.BoolVar(&c.jsonOut, "json", false, "print results as JSON lines instead of a table")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: kassa-load dashboard [flags]\n\nLoads a merchant's history and measures the dashboard's pages' server time and the CSV export.")
		fs.PrintDefaults()
	}
	fs.Parse(args)
	c.backends = split(backends)
	if c.transactions < 1 || c.customers < 1 || c.requests < 1 || c.exportRows < 10 || c.carded < 0 || c.carded > c.customers {
		fmt.Fprintln(os.Stderr, "kassa-load dashboard: --transactions, --customers and --requests must be >= 1, --export-rows >= 10, --carded at most --customers")
		return 2
	}
	return judge("dashboard", "a target was missed or a page failed", func(ctx context.Context) (bool, error) {
		return runDashboard(ctx, c, out)
	})
}

// runDashboard measures every backend of c and reports to out; ok is false when a page failed or a
// target was missed. An error is a failure of the benchmark itself (a database that does not start).
func runDashboard(ctx context.Context, c dashConfig, out io.Writer) (ok bool, err error) {
	rep := &dashReporter{w: out, json: c.jsonOut, c: c}
	rep.machine()
	ok = true
	for _, backend := range c.backends {
		good, err := dashBackend(ctx, c, backend, rep)
		if err != nil {
			return false, fmt.Errorf("%s: %w", backend, err)
		}
		ok = ok && good
	}
	return ok, nil
}

// benchPassword is the owner's password: the benchmark's databases are thrown away.
const benchPassword = "correct horse battery staple 17"

// benchTimezone is the merchant's time zone, one with daylight saving time.
const benchTimezone = "America/Toronto"

func dashBackend(ctx context.Context, c dashConfig, backend string, rep *dashReporter) (bool, error) {
	env, err := newEnvironment(backend)
	if err != nil {
		return false, err
	}
	defer env.close()
	db, err := store.Open(ctx, env.storeConfig("api"))
	if err != nil {
		return false, err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return false, err
	}
	shop, err := newBenchShop(ctx, db)
	if err != nil {
		return false, err
	}
	loc, _ := time.LoadLocation(benchTimezone)
	// The overview reads the ledger's rollup (internal/report), which the server's roller keeps up to
	// date a few seconds behind the sales; loadHistory brings it up to date at once, as part of the load.
	sum, loaded, err := loadHistory(ctx, db, synth.Options{MerchantID: shop.merchantID, ClientID: shop.creds.ClientID,
		Transactions: c.transactions, Customers: c.customers, Location: loc, Seed: 17})
	if err != nil {
		return false, err
	}
	srv, err := startBenchServer(ctx, db, c.wrap)
	if err != nil {
		return false, err
	}
	defer srv.stop()
	if err := srv.storeCards(ctx, shop, sum.CustomerLookups[:min(c.carded, len(sum.CustomerLookups))]); err != nil {
		return false, fmt.Errorf("store cards through the vault's API: %w", err)
	}
	rep.loaded(backend, sum, c.carded, loaded)
	b, err := srv.signIn(ctx, merchantOwner)
	if err != nil {
		return false, err
	}
	ok := true
	for _, p := range dashPages(sum) {
		res := b.measure(ctx, p, c.requests)
		res.backend = backend
		ok = rep.page(res) && ok
	}
	small, large := exportRange(sum.PerDay, c.exportRows/10), exportRange(sum.PerDay, c.exportRows)
	var exports [2]exportResult
	for i, r := range []dayRange{small, large} {
		exports[i] = b.export(ctx, r)
		exports[i].backend = backend
	}
	return rep.exports(exports, c) && ok, nil
}

// merchantOwner is the e-mail of the merchant's owner, who signs in.
const merchantOwner = "owner@bench.example"

// benchShop is the merchant the benchmark loads: its owner signs in to the dashboard, its API client
// stores cards and is recorded on the loaded transactions.
type benchShop struct {
	merchantID string
	creds      auth.Credentials
}

// newBenchShop creates the merchant, with its owner (password benchPassword), three currencies, a time
// zone with daylight saving time, and an API client.
func newBenchShop(ctx context.Context, db *store.DB) (benchShop, error) {
	hash, err := user.HashPassword(ctx, password.NewGate(password.GateConfig{}), benchPassword)
	if err != nil {
		return benchShop{}, err
	}
	var s benchShop
	tz := benchTimezone
	err = db.Write(ctx, func(tx *store.Tx) error {
		m, _, err := user.CreateMerchant(ctx, tx, merchants.New{Name: "Bench & Co", Email: merchantOwner, Currency: "CAD"}, hash, time.Now())
		if err != nil {
			return err
		}
		if _, err := merchants.ApplyUpdate(ctx, tx, m.ID, merchants.Update{Currencies: []string{"USD", "EUR"}, Timezone: &tz}); err != nil {
			return err
		}
		s.merchantID = m.ID
		s.creds, err = auth.CreateClient(ctx, tx, m.ID, auth.DefaultValidity, time.Now())
		return err
	})
	return s, err
}

// benchServer is the real server running in this process: Serve on one listener, for its background
// work, and the same handler, timed, on another, which the benchmark's requests go to.
type benchServer struct {
	*server.Server
	url    string
	timed  *timedHandler
	hs     *http.Server
	cancel context.CancelFunc
	done   chan error
}

func startBenchServer(ctx context.Context, db *store.DB, wrap func(http.Handler, []httpapi.Route) http.Handler) (*benchServer, error) {
	kek, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	bg, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(ctx, server.Config{DB: db, KEK: kek, Logger: logger, PublicURL: base, Wrap: wrap})
	if err != nil {
		ln.Close()
		bg.Close()
		return nil, err
	}
	s := &benchServer{Server: srv, url: base, timed: newTimedHandler(srv.Handler()), done: make(chan error, 1)}
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	ready := make(chan struct{})
	go func() { s.done <- srv.Serve(sctx, bg, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-s.done:
		ln.Close()
		cancel()
		return nil, fmt.Errorf("serve: %w", err)
	}
	s.hs = &http.Server{Handler: s.timed, ReadHeaderTimeout: 10 * time.Second}
	go s.hs.Serve(ln)
	return s, nil
}

func (s *benchServer) stop() {
	s.hs.Close()
	s.cancel()
	<-s.done
}

// storeCards gives each customer a card through the vault's API (POST
// /customer-service/customer/{c}/card), so that the number is stored encrypted as the vault does it.
func (s *benchServer) storeCards(ctx context.Context, shop benchShop, lookups []string) error {
	if len(lookups) == 0 {
		return nil
	}
	api, err := apiClient(ctx, s.url, shop.creds)
	if err != nil {
		return err
	}
	for i, lookup := range lookups {
		body := fmt.Sprintf(`{"card_number": %q, "card_expiry_month": "%02d", "card_expiry_year": "%d"}`,
			luhnVisa(i), 1+i%12, time.Now().Year()+1+i%5)
		req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/customer-service/customer/"+lookup+"/card", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := api.Do(req)
		if err != nil {
			return err
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("POST %s: %d %s", req.URL.Path, resp.StatusCode, msg)
		}
	}
	return nil
}

// luhnVisa is the i-th of a series of 16-digit Visa numbers with a valid check digit.
func luhnVisa(i int) string {
	digits := []byte(fmt.Sprintf("4%014d", 31_415_926_535_897+i*7_919))
	sum := 0
	for j := len(digits) - 1; j >= 0; j-- {
		d := int(digits[j] - '0')
		if (len(digits)-j)%2 == 1 { // doubled: every second digit from the right, counting the check digit
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return string(digits) + string(rune('0'+(10-sum%10)%10))
}

// browser is a signed-in dashboard user: a cookie jar, redirects not followed.
type browser struct {
	c   *http.Client
	srv *benchServer
}

// signIn signs email in through the dashboard's sign-in form, as a browser without script does.
func (s *benchServer) signIn(ctx context.Context, email string) (*browser, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"email": {email}, "password": {benchPassword}}
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/dashboard/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.url)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		return nil, fmt.Errorf("sign in as %s: %d %s", email, resp.StatusCode, body)
	}
	return &browser{c: c, srv: s}, nil
}

// page is a page the benchmark measures: its name, and the URL of its i-th request.
type page struct {
	name string
	url  func(i int) string
}

// dashPages are the pages the benchmark times, with values drawn from the loaded data.
func dashPages(sum synth.Summary) []page {
	pick := func(s []string, i int) string { return url.QueryEscape(s[i%len(s)]) }
	return []page{
		{"overview", func(int) string { return "/dashboard" }},
		{"list", func(int) string { return "/dashboard/transactions" }},
		{"last 4", func(i int) string { return "/dashboard/transactions?last4=" + pick(sum.CardSuffixes, i) }},
		{"e-mail", func(i int) string { return "/dashboard/transactions?email=" + pick(sum.Emails, i) }},
		{"customer", func(i int) string { return "/dashboard/customers?q=" + pick(sum.Emails, i) }},
		{"detail", func(i int) string { return "/dashboard/transactions/" + sum.TransactionIDs[i%len(sum.TransactionIDs)] }},
	}
}

// pageResult is one page's measurement: its server times, or the failure that stopped it.
type pageResult struct {
	backend, name, example string
	stats                  stats
	failure                string // the request that did not answer 200, and how it answered
}

// warmUp is how many requests of a page are sent, unmeasured, before its measured ones: the first
// renders compile templates and fill caches.
const warmUp = 5

// measure sends warmUp then n requests for p, one at a time, and records each one's server time. A
// request answered with anything but 200 stops the page, named in the result.
func (b *browser) measure(ctx context.Context, p page, n int) pageResult {
	return measurePage(p, n, func(u string) (time.Duration, error) { return b.get(ctx, u, io.Discard) })
}

// measurePage sends warmUp then n requests for p with get, one at a time, and records the time get
// returns for each. A request get fails stops the page, named in the result.
func measurePage(p page, n int, get func(path string) (time.Duration, error)) pageResult {
	res := pageResult{name: p.name, example: p.url(0)}
	for i := range warmUp + n {
		u := p.url(i)
		d, err := get(u)
		if err != nil {
			res.failure = "GET " + u + ": " + err.Error()
			return res
		}
		if i >= warmUp {
			res.stats.latencies = append(res.stats.latencies, d)
		}
	}
	return res
}

// get requests path, copies the body to w, and returns the server's time for it. Anything but a 200
// is an error naming the status.
func (b *browser) get(ctx context.Context, path string, w io.Writer) (time.Duration, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.url+path, nil)
	b.srv.timed.expect()
	resp, err := b.c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(w, resp.Body)
	resp.Body.Close()
	d, terr := b.srv.timed.took(10 * time.Second)
	switch {
	case resp.StatusCode != http.StatusOK:
		return 0, errors.New(resp.Status)
	case err != nil:
		return 0, err
	}
	return d, terr
}

// dayRange is an inclusive range of days of the merchant's time zone, and the rows created in it.
type dayRange struct {
	from, to string
	rows     int
}

// exportRange is the shortest range of whole days, ending with the last whole day of the history,
// that holds at least rows rows.
func exportRange(perDay map[string]int, rows int) dayRange {
	days := make([]string, 0, len(perDay))
	for d := range perDay {
		days = append(days, d)
	}
	sort.Strings(days)
	if len(days) < 2 {
		return dayRange{}
	}
	r := dayRange{to: days[len(days)-2]} // the last day is not over
	for i := len(days) - 2; i >= 0 && r.rows < rows; i-- {
		r.from, r.rows = days[i], r.rows+perDay[days[i]]
	}
	return r
}

// exportResult is one CSV export: the rows it held, the server's time, and the memory while it ran.
type exportResult struct {
	backend    string
	r          dayRange
	rows       int
	took       time.Duration
	mem        memPeak
	failure    string
	clientTook time.Duration
}

// export downloads the CSV of the days of r and measures it.
func (b *browser) export(ctx context.Context, r dayRange) exportResult {
	res := exportResult{r: r}
	u := "/dashboard/transactions/export.csv?from=" + r.from + "&to=" + r.to
	var rows csvRows
	sampler := startMemSampler()
	start := time.Now()
	d, err := b.get(ctx, u, &rows)
	res.clientTook = time.Since(start)
	res.mem = sampler.stop()
	if err != nil {
		res.failure = "GET " + u + ": " + err.Error()
		return res
	}
	res.took, res.rows = d, max(rows.records()-1, 0) // less the header
	return res
}

// dashReporter prints the dashboard benchmark's results as a table or JSON lines, and judges them
// against the targets.
type dashReporter struct {
	w    io.Writer
	json bool
	c    dashConfig
}

func (r *dashReporter) emit(v map[string]any) { (&reporter{w: r.w}).emit(v) }

func (r *dashReporter) machine() {
	if r.json {
		r.emit(map[string]any{"machine": cpuName(), "cpus": runtime.NumCPU(), "go": runtime.Version(), "transactions": r.c.transactions,
			"requests_per_page": r.c.requests})
		return
	}
	fmt.Fprintf(r.w, "machine: %s, %d CPUs, %s; %d transactions of one merchant; %d requests per page after %d unmeasured; server time, handler entry to return\n\n",
		cpuName(), runtime.NumCPU(), runtime.Version(), r.c.transactions, r.c.requests, warmUp)
}

func (r *dashReporter) loaded(backend string, s synth.Summary, carded int, took time.Duration) {
	if r.json {
		r.emit(map[string]any{"backend": backend, "loaded_transactions": s.Transactions,
			"customers": s.Customers, "carded_customers": carded, "load_s": took.Seconds()})
		return
	}
	fmt.Fprintf(r.w, "%-9s loaded %d transactions (%d sales, %d declined), %d customers (%d with a card through the API) in %.1f s\n",
		backend, s.Transactions, s.Kinds["SALE"], s.Declined, s.Customers, carded, took.Seconds())
	pageHeader(r.w, "page")
}

// page reports one page and says whether it met its target.
func (r *dashReporter) page(p pageResult) bool { return pageLine(r.w, r.json, p, r.c.pageLimit) }

// pageHeader is the heading of pageLine's table, its second column called what.
func pageHeader(w io.Writer, what string) {
	fmt.Fprintf(w, "%-9s %-12s %-58s %6s %8s %8s %8s  %s\n", "backend", what, "example", "n", "p50 ms", "p99 ms", "max ms", "target")
}

// pageLine reports one page's measurement, as a row of pageHeader's table or a JSON line, and says
// whether it met its target: answered every time, with a p99 of at most limit.
func pageLine(w io.Writer, jsonOut bool, p pageResult, limit time.Duration) bool {
	r := &reporter{w: w, json: jsonOut}
	ms := p.stats.percentiles()
	ok := p.failure == "" && time.Duration(ms[2]*float64(time.Millisecond)) <= limit
	verdict := map[bool]string{true: "ok", false: fmt.Sprintf("MISSED: p99 > %v", limit)}[ok]
	if p.failure != "" {
		verdict = "FAILED: " + p.failure
	}
	if r.json {
		line := map[string]any{"backend": p.backend, "page": p.name, "example": p.example, "requests": len(p.stats.latencies),
			"p50_ms": ms[0], "p99_ms": ms[2], "max_ms": ms[3], "ok": ok}
		if p.failure != "" {
			line["failure"] = p.failure
		}
		r.emit(line)
		return ok
	}
	if p.failure != "" {
		fmt.Fprintf(r.w, "%-9s %-12s %-58s %6s %8s %8s %8s  %s\n", p.backend, p.name, clip(p.example, 58), "-", "-", "-", "-", verdict)
		return ok
	}
	fmt.Fprintf(r.w, "%-9s %-12s %-58s %6d %8.2f %8.2f %8.2f  %s\n", p.backend, p.name, clip(p.example, 58), len(p.stats.latencies),
		ms[0], ms[2], ms[3], verdict)
	return ok
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// exports reports the small and the large export and judges them: the large one holds the rows asked
// for and takes at most the time allowed, and its memory is flat — the peak heap in use while it ran
// grew over the heap before it by at most twice what the small one's did, plus flatSlack. An export
// that kept its rows in memory would grow by tens of megabytes more for ten times the rows.
func (r *dashReporter) exports(e [2]exportResult, c dashConfig) bool {
	small, large := e[0], e[1]
	var problems []string
	for _, x := range e {
		if x.failure != "" {
			problems = append(problems, "FAILED: "+x.failure)
		}
	}
	if len(problems) == 0 {
		if large.rows < c.exportRows*9/10 {
			problems = append(problems, fmt.Sprintf("the large export held %d rows, not about %d: the filter from=%s&to=%s did not select them",
				large.rows, c.exportRows, large.r.from, large.r.to))
		}
		if large.took > c.exportLimit {
			problems = append(problems, fmt.Sprintf("MISSED: the export took %.2f s > %v", large.took.Seconds(), c.exportLimit))
		}
		if large.mem.growth() > 2*small.mem.growth()+flatSlack {
			problems = append(problems, fmt.Sprintf("MISSED: memory not flat: the heap grew by %s for %d rows, %s for %d",
				mib(large.mem.growth()), large.rows, mib(small.mem.growth()), small.rows))
		}
	}
	for _, x := range e {
		if r.json {
			line := map[string]any{"backend": x.backend, "export_from": x.r.from, "export_to": x.r.to, "export_rows": x.rows,
				"export_s": x.took.Seconds(), "export_client_s": x.clientTook.Seconds(), "heap_before_bytes": x.mem.before,
				"heap_peak_bytes": x.mem.peak, "heap_live_peak_bytes": x.mem.livePeak, "rss_peak_bytes": x.mem.rssPeak}
			if x.failure != "" {
				line["failure"] = x.failure
			}
			r.emit(line)
			continue
		}
		if x.failure != "" {
			continue
		}
		fmt.Fprintf(r.w, "%-9s export %s..%s: %d rows in %.2f s (server; %.2f s at the client); heap in use %s before, peak %s (+%s); live heap peak %s; process RSS peak %s\n",
			x.backend, x.r.from, x.r.to, x.rows, x.took.Seconds(), x.clientTook.Seconds(), mib(x.mem.before), mib(x.mem.peak),
			mib(x.mem.growth()), mib(x.mem.livePeak), mib(x.mem.rssPeak))
	}
	if r.json {
		r.emit(map[string]any{"backend": large.backend, "export_ok": len(problems) == 0, "problems": problems})
	} else if len(problems) == 0 {
		fmt.Fprintf(r.w, "%-9s export: ok (≤ %v, memory flat)\n", large.backend, c.exportLimit)
	} else {
		for _, p := range problems {
			fmt.Fprintf(r.w, "%-9s export: %s\n", large.backend, p)
		}
	}
	return len(problems) == 0
}

// flatSlack is the growth of the heap, beyond twice the small export's, that an export of ten times
// the rows may show and still be flat: the garbage collector's timing moves a peak by a few megabytes.
const flatSlack = 8 << 20

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// cpuName is the machine's processor, as /proc/cpuinfo names it.
func cpuName() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

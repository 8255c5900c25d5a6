package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// scenario is one client's loop body: it performs one or more operations, reporting each. ops names
// them in the order they are reported.
type scenario struct {
	ops []string
	run func(ctx context.Context, c *client, report func(op string, d time.Duration, err error))
	// iso: the scenario's merchant is on an ISO 8583 account at kassa-acquirer, whose host waits
	// latency before each answer; clients, when set, replaces --clients.
	iso     bool
	latency time.Duration
	clients int
	// latencyClients: the scenario is a latency-tolerance one, run from
	// --latency-clients clients instead of --clients.
	latencyClients bool
	// simLatency: the scenario drives a kassa serve of its own whose built-in simulator waits this
	// long before each answer (--simulator-latency), on a database of its own.
	simLatency time.Duration
	// atOnce: the scenario measured on the same path with no latency, whose figure and clients ÷
	// latency bound a latency-tolerance scenario.
	atOnce string
	// bare: the scenario drives the bare net/http handler of "kassa-load bare-http" (barehttp.go),
	// the HTTP-stack ceiling, instead of Kassa.
	bare bool
	// ledger: the scenario is the ledger alone, Ledger.Charge called in this process (ledger.go),
	// instead of run over HTTP.
	ledger bool
}

// delay is how long the scenario's processor waits before each answer.
func (sc scenario) delay() time.Duration { return max(sc.latency, sc.simLatency) }

// sale is the sale scenario's loop body, its operation reported as op.
func sale(op string) func(context.Context, *client, func(string, time.Duration, error)) {
	return func(ctx context.Context, c *client, report func(string, time.Duration, error)) {
		_, d, err := c.transaction(ctx, "/transaction-service/sale", saleBody, "APPROVED")
		report(op, d, err)
	}
}

// isoSale is the sale scenario of a merchant on kassa-acquirer, its operation reported as op.
func isoSale(op string, latency time.Duration, clients int) scenario {
	return scenario{ops: []string{op}, iso: true, latency: latency, clients: clients, run: sale(op)}
}

var scenarios = map[string]scenario{
	// Sales through the ISO 8583 connector to kassa-acquirer: at once, and with the 50 ms of a real
	// host from 1,000 clients, which is what keeps 1,000 ÷ 0.05 s = 20,000 sales in flight a second.
	"iso8583":      isoSale("sale iso8583", 0, 0),
	"iso8583-50ms": isoSale("sale iso8583 50ms", 50*time.Millisecond, 1000),
	// Latency tolerance: the acquirer 250 ms away, from --latency-clients (2,000)
	// clients, through the ISO 8583 connector and through the built-in simulator; each is compared
	// with min(clients ÷ 250 ms, the same path at once).
	"iso8583-250ms": {ops: []string{"sale iso8583 250ms"}, iso: true, latency: 250 * time.Millisecond, latencyClients: true,
		atOnce: "iso8583", run: sale("sale iso8583 250ms")},
	"sale-250ms": {ops: []string{"sale 250ms"}, simLatency: 250 * time.Millisecond, latencyClients: true, atOnce: "sale",
		run: sale("sale 250ms")},
	"sale": {ops: []string{"sale"}, run: sale("sale")},
	// The ledger alone, in this process, from the same clients (ledger.go).
	"ledger": {ops: []string{ledgerOp}, ledger: true},
	// The HTTP-stack ceiling: the sale scenario's requests to a bare net/http
	// handler in a process of its own, from the same clients.
	"http-ceiling": {ops: []string{"bare http sale"}, bare: true, run: sale("bare http sale")},
	"token": {ops: []string{"token"}, run: func(ctx context.Context, c *client, report func(string, time.Duration, error)) {
		start := time.Now()
		_, err := c.do(ctx, "POST", "/oauth/token?grant_type=client_credentials", nil, true)
		report("token", time.Since(start), err)
	}},
	"mixed": {ops: []string{"authorize", "capture", "refund", "list"}, run: func(ctx context.Context, c *client, report func(string, time.Duration, error)) {
		auth, d, err := c.transaction(ctx, "/transaction-service/authorize", saleBody, "APPROVED")
		report("authorize", d, err)
		if err != nil {
			return
		}
		capture, d, err := c.transaction(ctx, "/transaction-service/capture/"+auth, []byte(`{"amount":"10.00"}`), "APPROVED")
		report("capture", d, err)
		if err != nil {
			return
		}
		_, d, err = c.transaction(ctx, "/transaction-service/refund/"+capture, []byte(`{"amount":"4.00"}`), "APPROVED")
		report("refund", d, err)
		start := time.Now()
		_, err = c.do(ctx, "GET", "/transaction-service/transaction?limit=100", nil, false)
		report("list", time.Since(start), err)
	}},
}

var saleBody = []byte(`{"amount":"10.00","currency":"CAD","card_number":"4242424242424242","card_expiry_month":"12","card_expiry_year":"30","cvv2":"123","email":"load@example.com"}`)

// client is one simulated shop server with its own token.
type client struct {
	base, token, id, secret string
	http                    *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body []byte, basic bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if basic {
		req.SetBasicAuth(c.id, c.secret)
	} else {
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, err
}

// transaction posts body to path and checks the transaction's result; it returns the transaction id.
func (c *client) transaction(ctx context.Context, path string, body []byte, want string) (string, time.Duration, error) {
	start := time.Now()
	b, err := c.do(ctx, "POST", path, body, false)
	d := time.Since(start)
	if err != nil {
		return "", d, err
	}
	var t struct {
		ID     json.Number `json:"id"`
		Result string      `json:"transaction_result"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return "", d, err
	}
	if t.Result != want {
		return "", d, fmt.Errorf("%s: %s, want %s", path, t.Result, want)
	}
	return t.ID.String(), d, nil
}

// stats are one operation's measurements.
type stats struct {
	latencies []time.Duration
	errors    int
}

// percentiles are p50, p95, p99 and max in milliseconds.
func (s *stats) percentiles() [4]float64 {
	if len(s.latencies) == 0 {
		return [4]float64{}
	}
	slices.Sort(s.latencies)
	at := func(q float64) float64 {
		i := int(q*float64(len(s.latencies))+0.5) - 1
		i = max(0, min(i, len(s.latencies)-1))
		return float64(s.latencies[i].Microseconds()) / 1000
	}
	return [4]float64{at(0.50), at(0.95), at(0.99), float64(s.latencies[len(s.latencies)-1].Microseconds()) / 1000}
}

// result is a scenario's measurements.
type result struct {
	backend, scenario string
	elapsed           time.Duration
	cpu               float64      // the server's CPU seconds
	hostCPU           float64      // the acquirer host's CPU seconds, in an ISO 8583 scenario
	machine           machineTimes // the whole machine's CPU over the measured period
	order             []string
	ops               map[string]*stats
	sampleErrors      []string
	rssPeak           uint64 // the server's peak resident memory in bytes, warm-up included (rssWatch)
	rssBefore         uint64 // the server's resident memory before the scenario's clients connected
	// host: the scenario has an acquirer's host, whose CPU is measured. Its figure may be 0: the
	// kernel counts CPU in ticks of 10 ms, and a short run on a busy machine can fall within one.
	host bool
}

func (r *result) rate(op string) float64 {
	s := r.ops[op]
	if s == nil || r.elapsed <= 0 {
		return 0
	}
	return float64(len(s.latencies)) / r.elapsed.Seconds()
}

// per1000 is cpu, CPU seconds of the scenario, per 1000 successful operations of op; in a mixed
// scenario the CPU is shared by all its operations, so it is given per 1000 rounds of the first.
func (r *result) per1000(cpu float64, op string) float64 {
	if op != r.order[0] || len(r.ops[op].latencies) == 0 {
		return 0
	}
	return cpu / float64(len(r.ops[op].latencies)) * 1000
}

// drive runs sc from c.clients clients: warm-up first, then the measured period. host is the acquirer's
// host of an ISO 8583 scenario, nil otherwise.
func drive(ctx context.Context, k *kassa, m merchant, sc scenario, c config, host *acquirer) (*result, error) {
	transport := &http.Transport{MaxIdleConns: c.clients * 2, MaxIdleConnsPerHost: c.clients * 2, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	tok, err := (&client{base: k.url, id: m.ClientID, secret: m.ClientSecret, http: hc}).do(ctx, "POST", "/oauth/token?grant_type=client_credentials", nil, true)
	if err != nil {
		return nil, err
	}
	var t struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(tok, &t); err != nil || t.AccessToken == "" {
		return nil, errors.New("no access token")
	}
	// The CPU time of the server and, when the scenario has one, of the acquirer's host.
	procs := []*os.Process{k.cmd.Process}
	if host != nil {
		procs = append(procs, host.cmd.Process)
	}
	return load(ctx, c, sc.ops, procs, func() loop {
		cl := &client{base: k.url, token: t.AccessToken, id: m.ClientID, secret: m.ClientSecret, http: hc}
		return func(ctx context.Context, report func(string, time.Duration, error)) { sc.run(ctx, cl, report) }
	})
}

// loop is one client's loop body: one or more operations, each reported.
type loop func(ctx context.Context, report func(op string, d time.Duration, err error))

// load runs c.clients clients, each a loop of newClient's called over and over: c.warmup first, then
// c.duration measured, in which the operations ops are reported. It measures the CPU time of procs
// over the measured period (the server's first, then the acquirer's host's when there is one), and
// the resident memory of procs[0] from before the clients start, warm-up included.
func load(ctx context.Context, c config, ops []string, procs []*os.Process, newClient func() loop) (*result, error) {
	res := &result{ops: map[string]*stats{}, order: ops}
	for _, op := range ops {
		res.ops[op] = &stats{}
	}
	var mu sync.Mutex
	measuring := false
	report := func(op string, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if !measuring {
			return
		}
		s := res.ops[op]
		if err != nil {
			s.errors++
			if len(res.sampleErrors) < 5 && ctx.Err() == nil {
				res.sampleErrors = append(res.sampleErrors, err.Error())
			}
			return
		}
		s.latencies = append(s.latencies, d)
	}
	// The server's memory is watched from before the clients connect: a peak during the warm-up is
	// one too.
	rss := watchRSS(procs[0].Pid)
	defer func() { res.rssPeak, res.rssBefore = rss.stop(), rss.before }()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range c.clients {
		run := newClient()
		wg.Go(func() {
			for runCtx.Err() == nil {
				run(runCtx, report)
			}
		})
	}
	time.Sleep(c.warmup)
	machine0 := readMachineTimes()
	cpu0, err := cpuTimes(procs)
	if err != nil {
		stop()
		wg.Wait()
		return nil, err
	}
	mu.Lock()
	measuring = true
	start := time.Now()
	mu.Unlock()
	time.Sleep(c.duration)
	mu.Lock()
	measuring = false
	res.elapsed = time.Since(start)
	mu.Unlock()
	cpu1, err := cpuTimes(procs)
	res.machine = readMachineTimes().since(machine0)
	stop()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	res.cpu = cpu1[0] - cpu0[0]
	if len(procs) > 1 {
		res.host, res.hostCPU = true, cpu1[1]-cpu0[1]
	}
	return res, nil
}

// cpuTimes are the CPU seconds of each process so far.
func cpuTimes(procs []*os.Process) ([]float64, error) {
	times := make([]float64, len(procs))
	for i, p := range procs {
		var err error
		if times[i], err = cpuSeconds(p); err != nil {
			return nil, err
		}
	}
	return times, nil
}

// machineTimes are the CPU seconds of the whole machine, all cores: busy (user, nice, system, irq,
// softirq, steal) and idle (idle, iowait). Over a scenario they are the load generator's, the
// server's, PostgreSQL's and anything else's together: what the scenario cost the machine.
type machineTimes struct{ busy, idle float64 }

// readMachineTimes reads /proc/stat; zero where there is none.
func readMachineTimes() machineTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineTimes{}
	}
	var t machineTimes
	for i, v := range f[1:9] {
		n, _ := strconv.ParseFloat(v, 64)
		n /= 100 // USER_HZ, 100 on Linux
		if i == 3 || i == 4 {
			t.idle += n
		} else {
			t.busy += n
		}
	}
	return t
}

func (t machineTimes) since(t0 machineTimes) machineTimes {
	return machineTimes{busy: t.busy - t0.busy, idle: t.idle - t0.idle}
}

// share is the part of the machine's cores that was busy.
func (t machineTimes) share() float64 {
	if t.busy+t.idle <= 0 {
		return 0
	}
	return t.busy / (t.busy + t.idle)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// "kassa-load drill" is the reliability drill: mixed load from many clients
// while the nodes are killed, then the books. For each backend it starts kassa-acquirer dropping a
// share of its answers, a merchant connected to it through the ISO 8583 connector, and "kassa serve"
// (one node on SQLite; two on PostgreSQL, which the clients take in turn), and for --duration:
//
//   - clients make sales; authorizations, their captures and two partial refunds of each; v1 payment
//     intents (created, confirmed, captured); and hosted-page payments (a session created with an API
//     key, then its card form posted as the page's script does). Each request carries an
//     Idempotency-Key (the hosted page's form has none: its session is its key), and a client retries
//     it with the same key on a timeout, a 5xx, a refused connection or "in progress", until it gets an
//     answer or --retry-bound passes;
//   - the billing engine charges subscriptions on a fast schedule: the drill moves their start back a
//     day every --warp-every (subscriptionWarp), so that the next daily cycle falls due;
//   - a node is killed (SIGKILL) every 2 to 5 s (--kill-min, --kill-max), the nodes in turn, and
//     restarted at once; kassa-acquirer is restarted once halfway, and PostgreSQL once at 60 % of the
//     run ("pg_ctl restart -m fast").
//
// Then it waits for recovery (no attempt pending, no reversal unanswered, no cycle due; at most
// --settle) and checks the books (books.go), printed as a table; it exits 1 on any imbalance.
//
// Usage:
//
//	kassa-load drill [--kassa bin/kassa] [--acquirer bin/kassa-acquirer] [--backends sqlite,postgres]
//	           [--clients 64] [--duration 2m] [--drop-rate 0.02] [--subscriptions 40] [--seed N]
func drillMain(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("kassa-load drill", flag.ExitOnError)
	var c drillConfig
	var backends string
	c.sharedFlags(fs, drillConfig{clients: 64, duration: 2 * time.Minute, dropRate: 0.02, subscriptions: 40, settle: 2 * time.Minute},
		"how long the load and the faults last, per backend")
	fs.StringVar(&backends, "backends", "sqlite,postgres", "storage backends to drill, comma-separated")
	fs.DurationVar(&c.killMin, "kill-min", 2*time.Second, "shortest time between two kills of a node")
	fs.DurationVar(&c.killMax, "kill-max", 5*time.Second, "longest time between two kills of a node")
	fs.DurationVar(&c.soak.duration, "soak", 0, "instead of the drill, the soak: the mixed load without faults at half its measured maximum for this long, the server sampled (make drill SOAK=10m)")
	fs.DurationVar(&c.soak.interval, "soak-interval", time.Minute, "how often the soak samples the server")
	fs.DurationVar(&c.soak.probe, "soak-probe", 30*time.Second, "how long the soak's unpaced load runs to find the maximum")
	fs.Float64Var(&c.soak.growth, "soak-growth", 10, "the most, in per cent, the server's resident memory or goroutines may grow over the soak")
	fs.Parse(args)
	c.backends = split(backends)
	if c.soak.duration > 0 {
		if c.soak.interval <= 0 || c.soak.probe <= 0 || c.soak.duration < 2*c.soak.interval {
			fmt.Fprintln(os.Stderr, "kassa-load drill: --soak-interval > 0, --soak-probe > 0, and --soak at least two intervals")
			return 2
		}
	}
	if c.clients < 1 || c.duration <= 0 || c.killMin <= 0 || c.killMax < c.killMin || c.dropRate < 0 || c.dropRate > 1 {
		fmt.Fprintln(os.Stderr, "kassa-load drill: --clients >= 1, --duration > 0, 0 < --kill-min <= --kill-max, 0 <= --drop-rate <= 1")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.soak.duration > 0 {
		return soakMain(ctx, c, out)
	}
	fmt.Fprintf(out, "drill: %d clients for %v per backend, a node killed every %v–%v, %.0f %% of the acquirer's answers dropped, seed %d\n",
		c.clients, c.duration, c.killMin, c.killMax, 100*c.dropRate, c.seed)
	balanced := true
	for _, backend := range c.backends {
		b, err := drill(ctx, c, backend, out)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kassa-load drill: %s: %v\n", backend, err)
			return 1
		}
		b.print(out)
		balanced = balanced && b.balanced()
	}
	if !balanced {
		fmt.Fprintln(out, "kassa-load drill: the books do not balance")
		return 1
	}
	return 0
}

// drillConfig is the drill's flags.
type drillConfig struct {
	kassa, acquirer  string
	backends         []string
	clients          int
	duration         time.Duration
	killMin, killMax time.Duration
	dropRate         float64
	subscriptions    int
	warpEvery        time.Duration
	retryBound       time.Duration
	settle           time.Duration
	seed             uint64
	soak             soakConfig
}

// sharedFlags registers on fs the flags every drill takes, into c: the binaries, the clients, the
// load's --duration (durationUsage says what it spans in that drill), the acquirer's dropped answers,
// the subscriptions and their fast schedule, the clients' retries, recovery's bound and the seed; d
// gives the defaults that differ between drills.
func (c *drillConfig) sharedFlags(fs *flag.FlagSet, d drillConfig, durationUsage string) {
	fs.StringVar(&c.kassa, "kassa", "bin/kassa", "the kassa binary to start")
	fs.StringVar(&c.acquirer, "acquirer", "bin/kassa-acquirer", "the kassa-acquirer binary to start")
	fs.IntVar(&c.clients, "clients", d.clients, "concurrent clients")
	fs.DurationVar(&c.duration, "duration", d.duration, durationUsage)
	fs.Float64Var(&c.dropRate, "drop-rate", d.dropRate, "share of the acquirer's answers it never sends during the load")
	fs.IntVar(&c.subscriptions, "subscriptions", d.subscriptions, "customers with a stored card, subscribed to a daily plan that the billing engine charges during the run")
	fs.DurationVar(&c.warpEvery, "warp-every", 3*time.Second, "how often a day passes for the subscriptions")
	fs.DurationVar(&c.retryBound, "retry-bound", time.Minute, "how long a client retries one request before it gives up")
	fs.DurationVar(&c.settle, "settle", d.settle, "how long recovery may take after the run")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "seed of the run's random choices: the clients', the kills'")
}

// drillServeArgs are the nodes' flags: abandoned attempts are looked for every second and due
// subscriptions every 200 ms, so that recovery and billing happen within the run; a processor call is
// bounded by 5 s, as an operator sets it above the acquirer's own timeout (drillProcessorTimeout), so
// that an attempt left by a killed node is presumed dead after 10 s rather than the default's minute.
var drillServeArgs = []string{"--recovery-interval", "1s", "--billing-interval", "200ms", "--processor-timeout", "5s"}

// drillProcessorTimeout is how long the connector waits for the acquirer's answer before it reverses:
// a dropped answer costs its client that long.
const drillProcessorTimeout = 2 * time.Second

// rig is what the drill and the soak run against: kassa-acquirer dropping a share of its answers, a
// merchant connected to it through the ISO 8583 connector, its nodes, the database, and the clients.
type rig struct {
	backend string
	env     *environment
	out     *outages
	acq     *acquirerNode
	cli     *kassa
	m       merchant
	nodes   []*node
	db      *store.DB
	fleet   *fleet
	subs    int
	rng     *rand.Rand
}

// newRig starts a rig of n nodes on backend, each started with drillServeArgs and extra, and
// subscribes c.subscriptions customers. close stops it.
func newRig(ctx context.Context, c drillConfig, backend string, n int, extra ...string) (r *rig, err error) {
	env, err := newEnvironment(backend)
	if err != nil {
		return nil, err
	}
	r = &rig{backend: backend, env: env, out: &outages{}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	r.acq = &acquirerNode{bin: c.acquirer, dir: env.dir, outages: r.out}
	if err := r.acq.start(ctx, "--drop-rate", fmt.Sprint(c.dropRate)); err != nil {
		r.acq = nil
		return nil, err
	}
	r.cli = &kassa{bin: c.kassa, dbArgs: env.dbArgs("api")}
	if r.m, err = r.cli.newMerchant(ctx, "drill"); err != nil {
		return nil, err
	}
	if err := r.cli.connect(ctx, r.m, r.acq.a, env.dir, drillProcessorTimeout); err != nil {
		return nil, err
	}
	apiKey, err := r.cli.apiKey(ctx, r.m)
	if err != nil {
		return nil, err
	}
	for i := range n {
		nd := &node{name: fmt.Sprintf("kassa %d", i+1), bin: c.kassa, dbArgs: env.dbArgs("api"), extra: extra, outages: r.out}
		if err := nd.start(ctx); err != nil {
			return nil, err
		}
		r.nodes = append(r.nodes, nd)
	}
	if r.db, err = env.open(ctx, "api"); err != nil {
		return nil, err
	}
	r.rng = rand.New(rand.NewPCG(c.seed, 0))
	if r.fleet, err = newFleet(ctx, r.nodes, r.m, apiKey, c.retryBound, r.out); err != nil {
		return nil, err
	}
	if r.subs, err = r.fleet.subscribe(ctx, c.subscriptions); err != nil {
		return nil, fmt.Errorf("subscriptions: %w", err)
	}
	return r, nil
}

// load runs c.clients clients and the subscriptions' fast schedule until ctx is done.
func (r *rig) load(ctx context.Context, c drillConfig) {
	var wg sync.WaitGroup
	wg.Go(func() { warpSubscriptions(ctx, r.db, c.warpEvery) })
	for i := range c.clients {
		seed := r.rng.Uint64()
		wg.Go(func() { r.fleet.client(ctx, i, rand.New(rand.NewPCG(seed, 2))) })
	}
	wg.Wait()
}

// books waits for recovery after a run that began at start and checks the books.
func (r *rig) books(ctx context.Context, c drillConfig, start time.Time) (*books, error) {
	ran := time.Since(start)
	pending, err := settle(ctx, r.db, c.settle)
	if err != nil {
		return nil, err
	}
	b := &books{backend: r.backend, ran: ran, calls: r.fleet.calls(), outages: r.out.list(), pending: pending}
	if err := b.check(ctx, r.db, r.cli, r.m, r.acq.a, start, r.env.dir); err != nil {
		return nil, err
	}
	return b, nil
}

func (r *rig) close() {
	if r.db != nil {
		r.db.Close()
	}
	for _, n := range r.nodes {
		n.stop()
	}
	if r.acq != nil {
		r.acq.stop()
	}
	r.env.close()
}

// drill runs the drill on one backend and returns its books.
func drill(ctx context.Context, c drillConfig, backend string, progress io.Writer) (*books, error) {
	n := 1
	if backend == "postgres" {
		n = 2
	}
	r, err := newRig(ctx, c, backend, n)
	if err != nil {
		return nil, err
	}
	defer r.close()
	fmt.Fprintf(progress, "%s: %d node(s) up, %d subscriptions, load and faults for %v\n", backend, len(r.nodes), r.subs, c.duration)

	start := time.Now()
	runCtx, stopRun := context.WithTimeout(ctx, c.duration)
	defer stopRun()
	var wg sync.WaitGroup
	faultErr := make(chan error, 4)
	killRNG := rand.New(rand.NewPCG(r.rng.Uint64(), 1)) // drawn here: rng is this goroutine's alone
	wg.Go(func() { faultErr <- killNodes(runCtx, r.nodes, c, killRNG) })
	wg.Go(func() { faultErr <- once(runCtx, c.duration/2, func() error { return r.acq.restart(ctx, nil) }) })
	if r.env.cluster != nil {
		wg.Go(func() {
			faultErr <- once(runCtx, c.duration*6/10, func() error {
				return r.out.during(ctx, "postgres", r.env.cluster.Restart)
			})
		})
	}
	wg.Go(func() { r.load(runCtx, c) })
	wg.Wait()
	close(faultErr)
	for err := range faultErr {
		if err != nil {
			return nil, err
		}
	}
	// The faults are over: every node is up (a node killed last was restarted before killNodes returned).
	return r.books(ctx, c, start)
}

// once runs f after d, unless ctx is done first.
func once(ctx context.Context, d time.Duration, f func() error) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(d):
		return f()
	}
}

// killNodes kills a node every killMin to killMax, the nodes in turn, and restarts it at once, until
// ctx is done.
func killNodes(ctx context.Context, nodes []*node, c drillConfig, rng *rand.Rand) error {
	for i := 0; ; i++ {
		wait := c.killMin + time.Duration(rng.Int64N(int64(c.killMax-c.killMin)+1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if err := nodes[i%len(nodes)].kill(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
}

// outage is a span of time during which a component was down: from the moment it was killed or told to
// stop until it was ready again (to zero while it still is down).
type outage struct {
	what     string
	from, to time.Time
}

// outages are the run's, which the books classify the clients' 5xx answers by.
type outages struct {
	mu    sync.Mutex
	spans []outage
}

// during records an outage of what for as long as f runs.
func (o *outages) during(ctx context.Context, what string, f func() error) error {
	o.mu.Lock()
	i := len(o.spans)
	o.spans = append(o.spans, outage{what: what, from: time.Now()})
	o.mu.Unlock()
	err := f()
	o.mu.Lock()
	o.spans[i].to = time.Now()
	o.mu.Unlock()
	return err
}

func (o *outages) list() []outage {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]outage(nil), o.spans...)
}

// outageGrace is how long after a component is back its outage still explains a 5xx: a node
// reconnecting to PostgreSQL or to the acquirer finds out on its first call that the old connection is
// gone.
const outageGrace = 2 * time.Second

// overlaps names the component that was down at some moment from t0 to t1, or "".
func (o *outages) overlaps(t0, t1 time.Time) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, u := range o.spans {
		if !u.from.After(t1) && (u.to.IsZero() || !u.to.Add(outageGrace).Before(t0)) {
			return u.what
		}
	}
	return ""
}

// node is one "kassa serve" of the drill, which keeps its address across restarts.
type node struct {
	name, bin string
	dbArgs    []string
	extra     []string // flags of its own beside drillServeArgs
	outages   *outages
	mu        sync.Mutex
	k         *kassa
	addr      string // host:port, fixed at the first start
}

func (n *node) start(ctx context.Context) error {
	args := append(append([]string{}, drillServeArgs...), n.extra...)
	if n.addr != "" {
		args = append(args, "--addr", n.addr)
	}
	// As a supervisor does (systemd's Restart=always), a node that exits at start — its database is
	// restarting — is started again, for at most a minute.
	var k *kassa
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if k, err = startKassa(ctx, n.bin, n.dbArgs, args); err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	n.mu.Lock()
	n.k, n.addr = k, strings.TrimPrefix(k.url, "http://")
	n.mu.Unlock()
	return nil
}

// url is where the node listens.
func (n *node) url() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return "http://" + n.addr
}

// kill kills the node with SIGKILL and starts it again.
func (n *node) kill(ctx context.Context) error {
	return n.outages.during(ctx, n.name, func() error {
		n.k.cmd.Process.Kill()
		<-n.k.done
		return n.start(ctx)
	})
}

func (n *node) stop() {
	if n.k != nil {
		n.k.stop()
	}
}

// acquirerNode is the drill's kassa-acquirer, which keeps its addresses across a restart.
type acquirerNode struct {
	bin, dir string
	outages  *outages
	a        *acquirer
	flags    []string
}

func (n *acquirerNode) start(ctx context.Context, flags ...string) error {
	a, err := startAcquirer(ctx, n.bin, n.dir, flags...)
	if err != nil {
		return err
	}
	n.a, n.flags = a, flags
	return nil
}

// restart stops the acquirer (SIGTERM), runs while (when not nil) while it is stopped, and starts it
// again on the same addresses and journal.
func (n *acquirerNode) restart(ctx context.Context, while func() error) error {
	return n.outages.during(ctx, "acquirer", func() error {
		old := n.a
		old.stop()
		var err error
		if while != nil {
			err = while()
		}
		return errors.Join(err, n.start(ctx, append(n.flags, "--addr", old.addr, "--http", old.web)...))
	})
}

func (n *acquirerNode) stop() { n.a.stop() }

// apiKey creates an API key of m's account with the permissions of payment intents, payment methods
// and hosted-page sessions (which hand out a secret URL, and need those of API keys).
func (k *kassa) apiKey(ctx context.Context, m merchant) (string, error) {
	args := append([]string{"apikey", "create", "--account-id", m.AccountID, "--permissions",
		"api_keys:read,api_keys:write,payment_intents:read,payment_intents:write,payment_methods:read,payment_methods:write"}, k.dbArgs...)
	out, err := exec.CommandContext(ctx, k.bin, args...).Output()
	if err != nil {
		return "", fmt.Errorf("kassa apikey create: %w", err)
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(out, &key); err != nil || key.Key == "" {
		return "", errors.New("kassa apikey create printed no key")
	}
	return key.Key, nil
}

// open opens the database called name as the nodes do, for the drill's own reads and its schedule.
func (e *environment) open(ctx context.Context, name string) (*store.DB, error) {
	args := e.dbArgs(name)
	if e.url != "" {
		return store.Open(ctx, store.Config{DatabaseURL: args[1]})
	}
	return store.Open(ctx, store.Config{DataDir: args[1]})
}

// warpSubscriptions makes a day pass for the subscriptions every d until ctx is done: the start of
// every active subscription whose current cycle is paid moves back a day, and its next run with it, so
// that the billing engine finds its next daily cycle due. This is the drill's fast schedule, written
// into the database rather than added to the server: the engine runs as in production.
func warpSubscriptions(ctx context.Context, db *store.DB, d time.Duration) {
	const day = int64(24 * time.Hour / time.Millisecond)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		// Errors are left to the next tick: PostgreSQL may be restarting.
		db.Exec(ctx, `UPDATE subscriptions SET start_date = start_date - $1, next_run = next_run - $1
			WHERE status = 'ACTIVE' AND next_run > $2`, day, time.Now().UnixMilli())
	}
}

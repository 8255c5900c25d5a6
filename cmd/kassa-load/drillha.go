package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// "kassa-load drill-ha" is the failover drill: the reliability drill's load, keys, acquirer journal and
// books (drill.go, books.go) against PostgreSQL run as deploy/ha runs it — a primary and a synchronous
// standby managed by Patroni, the leader key in etcd (patroni.go) — while the primary's machine fails.
// For each --fault mode it starts the cluster, kassa-acquirer, a merchant on the ISO 8583 connector,
// and two "kassa serve" nodes sharing the cluster through a multi-host --database-url
// (target_session_attrs=read-write), and for --duration the clients make the drill's mixed load,
// retrying each request with its Idempotency-Key. At --fail-at:
//
//	die      every process of the primary (Patroni, PostgreSQL and its children) killed at once with SIGKILL,
//	         as a machine that loses power; once the standby is primary, the old member is started
//	         again and rejoins through pg_rewind, and (--second-failover) the new primary dies too
//	hang     every process of the primary stopped with SIGSTOP, as a machine that freezes; once the
//	         standby is primary they are continued (SIGCONT): Patroni demotes the stale primary and
//	         rewinds it; then the second failover as in die
//	etcd     etcd (the drill has one) killed for --etcd-down: without its leader key the primary
//	         demotes itself, and writes stop until etcd is back
//	standby  the synchronous standby killed: with synchronous_mode_strict off the primary goes on
//	         alone once Patroni has dropped it from synchronous_standby_names; it is started again
//	         after --standby-down
//
// Then it waits for recovery and checks the books, with these checks of its own: no stretch without an
// approved sale longer than --max-gap (for etcd: writes stopped while it was down, and resumed within
// --max-gap of its return), and both nodes ready (/readyz) again without a restart. It prints per mode
// the longest gap, the 503s answered during it, the keys, the approved sales and whether the ledger
// matches the acquirer's journal, and exits 1 when any check fails.
//
// Usage:
//
//	kassa-load drill-ha [--fault die,hang,etcd,standby] [--dcs etcd] [--clients 32] [--duration 60s] [--fail-at 15s]
//	           [--second-failover] [--max-gap 15s] [--kassa bin/kassa] [--acquirer bin/kassa-acquirer]
func drillHAMain(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("kassa-load drill-ha", flag.ExitOnError)
	var c drillConfig
	var h haConfig
	var faults string
	c.sharedFlags(fs, drillConfig{clients: 32, duration: time.Minute, dropRate: 0.02, subscriptions: 5, settle: 2 * time.Minute},
		"how long the load lasts, per mode")
	fs.StringVar(&h.dcs, "dcs", "etcd", "the etcd API Patroni uses: etcd, the v2 API (as deploy/ha/patroni.yml), or etcd3")
	fs.StringVar(&faults, "fault", "die,hang,etcd,standby", "fault modes to drill, comma-separated: die, hang, etcd, standby")
	fs.DurationVar(&h.failAt, "fail-at", 15*time.Second, "when the fault strikes, from the start of the load")
	fs.BoolVar(&h.second, "second-failover", true, "die, hang: once the old primary has rejoined, fail the new one too (not before two thirds of --duration)")
	fs.DurationVar(&h.etcdDown, "etcd-down", 15*time.Second, "etcd: how long etcd stays down")
	fs.DurationVar(&h.standbyDown, "standby-down", 10*time.Second, "standby: how long the standby stays down")
	fs.DurationVar(&h.maxGap, "max-gap", 15*time.Second, "the longest stretch without an approved sale the drill accepts")
	fs.Parse(args)
	h.duration = c.duration
	modes := split(faults)
	for _, m := range modes {
		if !slices.Contains([]string{"die", "hang", "etcd", "standby"}, m) {
			fmt.Fprintf(os.Stderr, "kassa-load drill-ha: unknown --fault %q (die, hang, etcd or standby)\n", m)
			return 2
		}
	}
	if c.clients < 1 || c.duration <= 0 || h.failAt <= 0 || h.failAt >= c.duration || h.maxGap <= 0 || c.dropRate < 0 || c.dropRate > 1 {
		fmt.Fprintln(os.Stderr, "kassa-load drill-ha: --clients >= 1, 0 < --fail-at < --duration, --max-gap > 0, 0 <= --drop-rate <= 1")
		return 2
	}
	if h.dcs != "etcd3" && h.dcs != "etcd" {
		fmt.Fprintf(os.Stderr, "kassa-load drill-ha: unknown --dcs %q (etcd3 or etcd)\n", h.dcs)
		return 2
	}
	if err := haAvailable(); err != nil {
		fmt.Fprintln(os.Stderr, "kassa-load drill-ha:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(out, "drill-ha: %d clients for %v per mode, the fault at %v; Patroni on %s, ttl %d s, loop_wait %d s, retry_timeout %d s; %.0f %% of the acquirer's answers dropped, seed %d\n",
		c.clients, c.duration, h.failAt, h.dcs, haTTL, haLoopWait, haRetryTimeout, 100*c.dropRate, c.seed)
	var summaries []string
	balanced := true
	for _, mode := range modes {
		b, sum, err := drillHA(ctx, c, h, mode, out)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kassa-load drill-ha: %s: %v\n", mode, err)
			return 1
		}
		b.print(out)
		summaries = append(summaries, sum)
		balanced = balanced && b.balanced()
	}
	fmt.Fprintf(out, "\n%-8s %12s %10s %10s %8s %9s %14s\n", "fault", "longest gap", "503s in it", "503s", "keys", "approved", "journal match")
	for _, s := range summaries {
		fmt.Fprintln(out, s)
	}
	if !balanced {
		fmt.Fprintln(out, "kassa-load drill-ha: the books do not balance")
		return 1
	}
	return 0
}

// haConfig is the failover drill's own flags.
type haConfig struct {
	dcs                   string        // the etcd API Patroni uses: etcd (v2) or etcd3
	duration              time.Duration // the load's, the drill's --duration
	failAt                time.Duration
	second                bool
	etcdDown, standbyDown time.Duration
	maxGap                time.Duration
}

// haRun is what one mode's faults did, for its checks: when writes stopped and resumed.
type haRun struct {
	start time.Time
	// For etcd: when it was lost, when writes were first refused, when it was back, and when writes
	// were taken again.
	etcdLost, writesStopped, etcdBack, writesResumed time.Time
	// rejoins counts the failed members brought back, and notRejoined says which did not become the
	// synchronous standby again, and why.
	rejoins     int
	notRejoined []string
	log         []string
}

func (r *haRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf("  +%5.1f s  ", time.Since(r.start).Seconds())+fmt.Sprintf(format, args...))
}

// drillHA runs one mode and returns its books and its summary line.
func drillHA(ctx context.Context, c drillConfig, h haConfig, mode string, progress io.Writer) (*books, string, error) {
	backend := "patroni"
	if h.dcs == "etcd" {
		backend = "patroni-etcd2"
	}
	r, err := newRig(ctx, c, backend, 2)
	if err != nil {
		return nil, "", err
	}
	defer r.close()
	probe, err := sql.Open("pgx", r.env.url)
	if err != nil {
		return nil, "", err
	}
	defer probe.Close()
	// Each probe connects anew, as a new connection of a node does: to whichever member takes writes.
	probe.SetMaxIdleConns(0)
	fmt.Fprintf(progress, "\n%s: 2 Patroni members, 2 nodes up, %d subscriptions; load for %v, the fault at %v\n", mode, r.subs, c.duration, h.failAt)

	start := time.Now()
	run := &haRun{start: start}
	runCtx, stopRun := context.WithTimeout(ctx, c.duration)
	defer stopRun()
	var wg sync.WaitGroup
	var faultErr error
	wg.Go(func() { faultErr = faults(runCtx, ctx, r, h, mode, run, probe) })
	var loadEnd time.Time
	wg.Go(func() { r.load(runCtx, c); loadEnd = time.Now() })
	wg.Wait()
	for _, l := range run.log {
		fmt.Fprintln(progress, l)
	}
	if faultErr != nil {
		return nil, "", faultErr
	}
	// A cluster left without a standby to acknowledge its commits would hold the books' writes for
	// good: they are bounded.
	booksCtx, cancel := context.WithTimeout(ctx, c.settle+5*time.Minute)
	defer cancel()
	b, err := r.books(booksCtx, c, start)
	if err != nil {
		return nil, "", err
	}
	b.backend = "drill-ha " + mode
	// The gaps are the load's: recovery after it (a member rejoining) is not a stretch without sales.
	g := longestGap(b.calls, start, loadEnd)
	if mode == "etcd" {
		stopped := !run.writesStopped.IsZero()
		b.add("writes stop while etcd is down (the primary demotes)", 1, btoi(!stopped),
			fmt.Sprintf("etcd lost at +%.1f s, writes refused from +%.1f s", run.etcdLost.Sub(start).Seconds(), run.writesStopped.Sub(start).Seconds()))
		resumed := !run.writesResumed.IsZero() && run.writesResumed.Sub(run.etcdBack) <= h.maxGap
		b.add(fmt.Sprintf("writes resume within %v of etcd's return", h.maxGap), 1, btoi(!resumed),
			fmt.Sprintf("etcd back at +%.1f s, writes taken from +%.1f s", run.etcdBack.Sub(start).Seconds(), run.writesResumed.Sub(start).Seconds()))
	} else {
		b.add(fmt.Sprintf("no stretch without an approved sale > %v", h.maxGap), 1, btoi(g.length() > h.maxGap), g.String(start))
	}
	b.add("each failed member rejoined as the synchronous standby", run.rejoins, len(run.notRejoined), strings.Join(run.notRejoined, "; "))
	notReady := r.nodesReady(ctx, time.Minute)
	b.add("both nodes ready again without a restart", len(r.nodes), len(notReady), strings.Join(notReady, "; "))

	keys, approvedSales := 0, 0
	for _, cl := range b.calls {
		if cl.key != "" {
			keys++
		}
		if _, ok := approved(cl); ok && cl.op == "sale" {
			approvedSales++
		}
	}
	match := "yes"
	for _, row := range b.rows[:2] { // reconcile's two rows: the ledger against the acquirer's journal
		if row.wrong > 0 {
			match = "NO"
		}
	}
	sum := fmt.Sprintf("%-8s %10.1f s %10d %10d %8d %9d %14s", mode, g.length().Seconds(), g.unavailable, count503(b.calls), keys, approvedSales, match)
	return b, sum, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// faults runs mode's faults in runCtx (the load's); ctx outlives the load, for the recovery that a
// fault begun must finish.
func faults(runCtx, ctx context.Context, r *rig, h haConfig, mode string, run *haRun, probe *sql.DB) error {
	ha := r.env.ha
	select {
	case <-runCtx.Done():
		return nil
	case <-time.After(h.failAt):
	}
	switch mode {
	case "die", "hang":
		primary, err := failPrimary(ctx, r, mode, run, probe)
		if err != nil || !h.second {
			return err
		}
		if !rejoin(ha, primary, run) {
			return nil // no second failover without a standby to fail over to; the books say what came of it
		}
		if wait := time.Until(run.start.Add(h.duration * 2 / 3)); wait > 0 {
			select {
			case <-runCtx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		second, err := failPrimary(ctx, r, mode, run, probe)
		if err == nil {
			rejoin(ha, second, run)
		}
		return err
	case "etcd":
		run.etcdLost = time.Now()
		run.logf("etcd killed")
		err := r.out.during(ctx, "postgres without etcd", func() error {
			ha.killEtcd()
			for time.Since(run.etcdLost) < h.etcdDown {
				if !writes(ctx, probe) && run.writesStopped.IsZero() {
					run.writesStopped = time.Now()
					run.logf("writes refused: the primary demoted itself")
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err := ha.startEtcd(); err != nil {
				return err
			}
			run.etcdBack = time.Now()
			run.logf("etcd started again")
			return waitWrites(ctx, probe, 2*time.Minute)
		})
		run.writesResumed = time.Now()
		run.logf("writes taken again")
		return err
	case "standby":
		primary, err := ha.waitPrimary(time.Second, nil)
		if err != nil {
			return err
		}
		standby := ha.other(primary)
		t0 := time.Now()
		err = r.out.during(ctx, "postgres standby", func() error {
			standby.kill()
			run.logf("%s (the synchronous standby) killed", standby.name)
			return waitWrites(ctx, probe, time.Minute)
		})
		if err != nil {
			return err
		}
		run.logf("writes taken by %s alone, %.1f s after", primary.name, time.Since(t0).Seconds())
		select {
		case <-runCtx.Done():
		case <-time.After(h.standbyDown):
		}
		if err := standby.start(); err != nil {
			return err
		}
		rejoin(ha, standby, run)
	}
	return nil
}

// rejoin waits for m, brought back after its failure, to be the synchronous standby again, for at
// most 90 s, and records whether it was.
func rejoin(ha *haCluster, m *member, run *haRun) bool {
	run.rejoins++
	if err := ha.waitSync(90 * time.Second); err != nil {
		run.notRejoined = append(run.notRejoined, fmt.Sprintf("%s: %s", m.name, strings.SplitN(err.Error(), "\n", 2)[0]))
		run.logf("%s did not rejoin as the synchronous standby: %v", m.name, err)
		// Until a standby is back, the primary's commits wait for one and the books cannot be
		// written: the member that is not primary is copied anew from the primary, discarding
		// what it had that the primary lacks, which the books then count.
		if primary, err := ha.waitPrimary(10*time.Second, nil); err == nil {
			stuck := ha.other(primary)
			err := stuck.reinitialize()
			if err == nil {
				err = ha.waitSync(3 * time.Minute)
			}
			if err == nil {
				run.logf("%s copied anew from the primary %s (patronictl reinit), the synchronous standby again", stuck.name, primary.name)
			} else {
				run.logf("%s could not be copied anew from %s: %v", stuck.name, primary.name, err)
			}
		}
		return false
	}
	run.logf("%s rejoined as the synchronous standby (%s)", m.name, m.rewound())
	return true
}

// failPrimary fails the primary's machine as mode says, waits for the standby to take over and writes
// to be taken again, then brings the failed member back (started again, or continued), and returns it.
func failPrimary(ctx context.Context, r *rig, mode string, run *haRun, probe *sql.DB) (*member, error) {
	ha := r.env.ha
	primary, err := ha.waitPrimary(time.Second, nil)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	err = r.out.during(ctx, "postgres primary", func() error {
		if mode == "die" {
			primary.kill()
			run.logf("%s (the primary) killed with SIGKILL, Patroni and PostgreSQL", primary.name)
		} else {
			primary.signal(syscall.SIGSTOP)
			run.logf("%s (the primary) stopped with SIGSTOP, Patroni and PostgreSQL", primary.name)
		}
		next, err := ha.waitPrimary(time.Minute, primary)
		if err != nil {
			return err
		}
		run.logf("%s is primary, %.1f s after", next.name, time.Since(t0).Seconds())
		if err := waitWrites(ctx, probe, time.Minute); err != nil {
			return err
		}
		run.logf("writes taken by %s, %.1f s after", next.name, time.Since(t0).Seconds())
		return nil
	})
	if err != nil {
		return nil, err
	}
	if mode == "die" {
		err = primary.start()
		run.logf("%s started again", primary.name)
	} else {
		primary.signal(syscall.SIGCONT)
		run.logf("%s continued (SIGCONT)", primary.name)
	}
	return primary, err
}

// rewound says whether the member's Patroni ran pg_rewind, from its log.
func (m *member) rewound() string {
	b, _ := os.ReadFile(m.dir + "/patroni.log")
	if strings.Contains(string(b), "pg_rewind") {
		return "pg_rewind ran"
	}
	return "no pg_rewind in its log"
}

// writes reports whether the cluster takes a write within 5 s (time to try each member within the URL's
// connect_timeout of 2 s): a row inserted, whose commit on a primary in synchronous mode waits for the
// standby. (A transaction that only takes an xid, txid_current(), writes no WAL before its commit
// record and so does not wait: it would find writes taken while every payment's commit waits.)
func writes(ctx context.Context, db *sql.DB) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS drill_probe (at timestamptz); INSERT INTO drill_probe VALUES (now())")
	return err == nil
}

// waitWrites waits for the cluster to take a write, for at most limit.
func waitWrites(ctx context.Context, db *sql.DB, limit time.Duration) error {
	for deadline := time.Now().Add(limit); !writes(ctx, db); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no write taken within %v", limit)
		}
	}
	return nil
}

// nodesReady waits for every node to answer /readyz with 200, for at most limit, and names those that
// do not or that were restarted (the drill never restarts them: their process must be the first).
func (r *rig) nodesReady(ctx context.Context, limit time.Duration) []string {
	var bad []string
	deadline := time.Now().Add(limit)
	for _, n := range r.nodes {
		if n.k.cmd.ProcessState != nil {
			bad = append(bad, n.name+" exited")
			continue
		}
		status := 0
		for ; time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
			if status = get(ctx, n.url()+"/readyz"); status == http.StatusOK {
				break
			}
		}
		if status != http.StatusOK {
			bad = append(bad, fmt.Sprintf("%s /readyz %d after %v", n.name, status, limit))
		}
	}
	return bad
}

// get is the status of GET u, 0 when no answer came within 5 s.
func get(ctx context.Context, u string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// gap is the longest stretch of a run without an approved sale, and the 503s answered in it.
type gap struct {
	from, to    time.Time
	unavailable int
}

func (g gap) length() time.Duration { return g.to.Sub(g.from) }

func (g gap) String(start time.Time) string {
	return fmt.Sprintf("longest %.1f s, from +%.1f s to +%.1f s, %d × 503 in it", g.length().Seconds(),
		g.from.Sub(start).Seconds(), g.to.Sub(start).Seconds(), g.unavailable)
}

// longestGap finds the longest stretch from start to end in which no sale was answered APPROVED: the
// time from one approved sale's answer to the next (or from start, or to end).
func longestGap(calls []call, start, end time.Time) gap {
	times := []time.Time{start, end}
	for _, c := range calls {
		if _, ok := approved(c); ok && c.op == "sale" && c.end.After(start) && c.end.Before(end) {
			times = append(times, c.end)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var g gap
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d > g.length() {
			g = gap{from: times[i-1], to: times[i]}
		}
	}
	for _, c := range calls {
		for _, f := range c.failures {
			if f.status == http.StatusServiceUnavailable && !f.at.Before(g.from) && f.at.Before(g.to) {
				g.unavailable++
			}
		}
	}
	return g
}

// count503 is how many tries were answered 503.
func count503(calls []call) int {
	n := 0
	for _, c := range calls {
		for _, f := range c.failures {
			if f.status == http.StatusServiceUnavailable {
				n++
			}
		}
	}
	return n
}

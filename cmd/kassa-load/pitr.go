package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store"
)

// "kassa-load drill-pitr" is the point-in-time recovery drill: PostgreSQL with its WAL archived by
// pgBackRest (as deploy/ha sets it up, the repository in a local directory) under the reliability
// drill's mixed load from two nodes, the merchant on the ISO 8583 connector to kassa-acquirer. A full
// backup is taken as the load starts; at --at (or a second after the backup ended, when that is
// later) a moment T is read from the database's clock; the load goes on for --duration less --at
// after it. Then a new cluster is restored to T ("pgbackrest restore --type=time"), a Kassa node is
// started on it with the same vault key, and it checks:
//
//   - the restored database holds exactly what was committed at or before T: every row of every table
//     whose last change committed by T is there as it was, and no row there was committed after T
//     (by PostgreSQL's commit timestamps, track_commit_timestamp);
//   - against the acquirer's journal up to T: every request the acquirer received before T has its
//     attempt in the restored ledger (an attempt is recorded before the processor is called), and
//     every operation the restored ledger holds as approved was approved by the acquirer before T;
//   - idempotency across the restore: a client's retry of a sale answered before T gets that same
//     answer; a retry of one first sent after T is made afresh, as a new transaction;
//   - the stored cards decrypt with the vault key: each customer's card pays, and the acquirer
//     receives its number's last four digits;
//   - what was in flight at the moment is settled by the restored node's recovery within --settle.
//
// It prints the checks and the restore's figures, and exits 1 when a check fails.
//
// Usage:
//
//	kassa-load drill-pitr [--clients 16] [--duration 40s] [--at 20s] [--kassa bin/kassa] [--acquirer bin/kassa-acquirer]
func drillPITRMain(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("kassa-load drill-pitr", flag.ExitOnError)
	var c drillConfig
	var at time.Duration
	var sample int
	c.sharedFlags(fs, drillConfig{clients: 16, duration: 40 * time.Second, dropRate: 0.02, subscriptions: 4, settle: time.Minute},
		"how long the load lasts: --at before the moment (or longer, for the backup to end first) and the rest after it")
	fs.DurationVar(&at, "at", 0, "when, from the start of the load, the moment restored to is taken (default: half of --duration; never before the backup has ended)")
	fs.IntVar(&sample, "sample", 100, "how many sales of each side of the moment a client retries against the restored database")
	fs.Parse(args)
	if at == 0 {
		at = c.duration / 2
	}
	if c.clients < 1 || c.duration <= 0 || at <= 0 || at >= c.duration || sample < 1 || c.dropRate < 0 || c.dropRate > 1 {
		fmt.Fprintln(os.Stderr, "kassa-load drill-pitr: --clients >= 1, 0 < --at < --duration, --sample >= 1, 0 <= --drop-rate <= 1")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(out, "drill-pitr: %d clients for %v, the moment restored to at %v; %.0f %% of the acquirer's answers dropped, seed %d\n",
		c.clients, c.duration, at, 100*c.dropRate, c.seed)
	b, err := drillPITR(ctx, c, at, sample, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kassa-load drill-pitr:", err)
		return 1
	}
	b.print(out)
	if !b.balanced() {
		fmt.Fprintln(out, "kassa-load drill-pitr: the restored database is not the one of the moment")
		return 1
	}
	return 0
}

// drillPITR runs the drill and returns its checks.
func drillPITR(ctx context.Context, c drillConfig, at time.Duration, sample int, progress io.Writer) (*books, error) {
	r, err := newRig(ctx, c, "postgres-archived", 2)
	if err != nil {
		return nil, err
	}
	defer r.close()
	backrest := r.env.backrest
	fmt.Fprintf(progress, "pitr: 2 nodes up on PostgreSQL with its WAL archived by pgBackRest, %d subscriptions; load for %v\n", r.subs, c.duration)

	start := time.Now()
	// The load goes on for --duration less --at after the moment, however long the backup took.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	var m moment
	var markErr error
	wg.Go(func() {
		defer stopRun()
		if m, markErr = markMoment(runCtx, r, start, at, progress); markErr == nil {
			select {
			case <-runCtx.Done():
			case <-time.After(c.duration - at):
			}
		}
	})
	wg.Go(func() { r.load(runCtx, c) })
	wg.Wait()
	if markErr != nil {
		return nil, markErr
	}
	// The WAL up to T is archived once the segment holding T is: "pgbackrest check" switches to a new
	// segment and waits for the last one to reach the repository.
	if _, err := backrest.run(ctx, "check"); err != nil {
		return nil, err
	}
	// The original database is lost, as far as the drill goes: its nodes stop (their recovery would
	// otherwise reverse at the acquirer what the restored database recovers on its own), and what it
	// held is read for the comparison.
	for _, n := range r.nodes {
		n.stop()
	}
	original, err := snapshot(ctx, r.db)
	if err != nil {
		return nil, fmt.Errorf("the original database: %w", err)
	}

	t0 := time.Now()
	restored, err := pgcluster.Start(pgcluster.Options{Durable: true, Settings: []string{"archive_mode=off", "track_commit_timestamp=on"},
		Fill: backrest.restoreTo(ctx, m.target())})
	if err != nil {
		return nil, err
	}
	defer restored.Stop()
	url := strings.Replace(restored.URL, "/postgres?", "/kassa_api?", 1)
	if err := waitPromoted(ctx, url, 2*time.Minute); err != nil {
		return nil, err
	}
	took := time.Since(t0)
	rdb, err := store.Open(ctx, store.Config{DatabaseURL: url})
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	got, err := snapshot(ctx, rdb)
	if err != nil {
		return nil, fmt.Errorf("the restored database: %w", err)
	}
	fmt.Fprintf(progress, "pitr: restored to %s (+%.1f s of the load) in %.1f s: %d rows, %d in the original\n",
		m.target(), m.at.Sub(start).Seconds(), took.Seconds(), got.rows(), original.rows())

	b := &books{backend: "drill-pitr", ran: c.duration, calls: r.fleet.calls(), outages: r.out.list()}
	exactly(b, original, got, m.at)
	// The host holds its journal open exclusively: it is read while the host is stopped.
	if err := r.acq.restart(ctx, func() error { return againstJournal(ctx, b, rdb, r.env.dir, m.at) }); err != nil {
		return nil, err
	}
	// A node on the restored database, with the vault key, and an acquirer that answers everything.
	if err := r.acq.a.control(ctx, `{"drop_rate":0}`); err != nil {
		return nil, err
	}
	nd := &node{name: "restored", bin: c.kassa, dbArgs: []string{"--database-url", url, "--vault-key-file", filepath.Join(r.env.dir, "vault.key")},
		outages: r.out}
	if err := nd.start(ctx); err != nil {
		return nil, err
	}
	defer nd.stop()
	f, err := newFleet(ctx, []*node{nd}, r.m, r.fleet.apiKey, c.retryBound, r.out)
	if err != nil {
		return nil, fmt.Errorf("the restored node: %w", err)
	}
	retries(ctx, b, f, b.calls, m, sample, rand.New(rand.NewPCG(c.seed, 3)))
	if err := cardsDecrypt(ctx, b, f, rdb, r.acq.a); err != nil {
		return nil, err
	}
	// What was in flight at the moment (an attempt whose outcome committed after it) is the restored
	// node's recovery's: looked up or reversed at the acquirer, as after any crash.
	p, err := settle(ctx, rdb, c.settle)
	if err != nil {
		return nil, err
	}
	if err := inFlight(ctx, b, rdb, r.db, p, len(got["transactions"])); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "pitr: backup %.1f s under load, restore and recovery to the moment %.1f s\n", m.backup.Seconds(), took.Seconds())
	return b, nil
}

// moment is the time restored to: at, read from the database's clock, and the drill's own clock just
// before and after (a request answered before before was committed before at; one sent after after
// was committed after it).
type moment struct {
	before, at, after time.Time
	backup            time.Duration // how long the full backup took
}

// target is the moment as pgBackRest's --target takes it.
func (m moment) target() string { return m.at.UTC().Format("2006-01-02 15:04:05.000000") + "+00" }

// markMoment takes the full backup as the load starts, then reads the moment from the database at
// start+at, or a second after the backup ended when that is later.
func markMoment(ctx context.Context, r *rig, start time.Time, at time.Duration, progress io.Writer) (moment, error) {
	var m moment
	t0 := time.Now()
	if _, err := r.env.backrest.run(ctx, "backup", "--type=full"); err != nil {
		return m, err
	}
	m.backup = time.Since(t0)
	fmt.Fprintf(progress, "pitr: full backup taken under load in %.1f s\n", m.backup.Seconds())
	select {
	case <-ctx.Done():
		return m, ctx.Err()
	case <-time.After(max(time.Until(start.Add(at)), time.Second)):
	}
	m.before = time.Now()
	if err := r.db.QueryRow(ctx, []any{&m.at}, `SELECT clock_timestamp()`); err != nil {
		return m, err
	}
	m.after = time.Now()
	return m, nil
}

// waitPromoted waits until the restored cluster has replayed to its target and been promoted: it
// takes writes.
func waitPromoted(ctx context.Context, url string, limit time.Duration) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		var recovering bool
		err := db.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&recovering)
		if err == nil && !recovering {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the restored cluster was not promoted within %v (in recovery: %v, %v)", limit, recovering, err)
		}
	}
}

// version is one row as a database holds it: its contents, and when its last change was committed
// (zero when PostgreSQL no longer knows).
type version struct {
	hash      string
	committed time.Time
}

// tables are a database's rows: table, then primary key, then the row.
type tables map[string]map[string]version

func (t tables) rows() int {
	n := 0
	for _, rows := range t {
		n += len(rows)
	}
	return n
}

// snapshot reads every row of every table with a primary key in db, with its commit time.
func snapshot(ctx context.Context, db *store.DB) (tables, error) {
	out := tables{}
	err := db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT c.relname, string_agg(quote_ident(a.attname), ',' ORDER BY a.attnum)
			FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
			WHERE i.indisprimary AND n.nspname = 'public' GROUP BY c.relname`)
		if err != nil {
			return err
		}
		keys := map[string]string{}
		for rows.Next() {
			var table, key string
			if err := rows.Scan(&table, &key); err != nil {
				rows.Close()
				return err
			}
			keys[table] = key
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for table, key := range keys {
			rows, err := q.QueryContext(ctx, `SELECT ROW(`+key+`)::text, md5(t::text), pg_xact_commit_timestamp(t.xmin) FROM `+table+` t`)
			if err != nil {
				return fmt.Errorf("%s: %w", table, err)
			}
			out[table] = map[string]version{}
			for rows.Next() {
				var k, hash string
				var at sql.NullTime
				if err := rows.Scan(&k, &hash, &at); err != nil {
					rows.Close()
					return err
				}
				out[table][k] = version{hash: hash, committed: at.Time}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// exactly checks that got, the restored database, holds what original held at the moment at: every
// row whose last change committed by then, as it was, and nothing committed after it.
func exactly(b *books, original, got tables, at time.Time) {
	var before, missing, after, unknown int
	var detail []string
	note := func(s string) {
		if len(detail) < 3 {
			detail = append(detail, s)
		}
	}
	for table, rows := range original {
		for k, v := range rows {
			if v.committed.IsZero() {
				unknown++
				continue
			}
			if v.committed.After(at) {
				continue
			}
			before++
			if g, ok := got[table][k]; !ok || g.hash != v.hash {
				missing++
				note(fmt.Sprintf("%s %s committed at %s is not there as it was", table, k, v.committed.Format(time.RFC3339Nano)))
			}
		}
	}
	var restored int
	for table, rows := range got {
		for k, v := range rows {
			restored++
			if v.committed.After(at) {
				after++
				note(fmt.Sprintf("%s %s committed at %s, after the moment", table, k, v.committed.Format(time.RFC3339Nano)))
			}
			if v.committed.IsZero() {
				unknown++
			}
		}
	}
	b.add("every row committed by the moment restored, as it was", before, missing, strings.Join(detail, "; "))
	b.add("no row committed after the moment", restored, after, fmt.Sprintf("%d rows of unknown commit time (frozen)", unknown))
}

// againstJournal compares the restored ledger with the acquirer's journal up to the moment at: every
// request the acquirer received before it has its attempt in the ledger, and every operation the
// ledger holds as approved was approved by the acquirer before it.
func againstJournal(ctx context.Context, b *books, rdb *store.DB, dir string, at time.Time) error {
	ledger := map[string]string{}
	err := rdb.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT transaction_id, status FROM transactions`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, status string
			if err := rows.Scan(&id, &status); err != nil {
				return err
			}
			ledger[id] = status
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	journal, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "acquirer", "journal.db"))
	if err != nil {
		return err
	}
	defer journal.Close()
	// Milliseconds, as the journal keeps them: the millisecond of the moment itself is left out.
	cut := at.UnixMilli()
	rows, err := journal.QueryContext(ctx, `SELECT reference, mti, response_code, received_at FROM journal WHERE reference <> '' AND received_at <> ?`, cut)
	if err != nil {
		return err
	}
	defer rows.Close()
	approvedBefore := map[string]bool{}
	var received, lacking int
	var detail []string
	for rows.Next() {
		var ref, mti, code string
		var ms int64
		if err := rows.Scan(&ref, &mti, &code, &ms); err != nil {
			return err
		}
		if ms > cut {
			continue
		}
		received++
		if _, ok := ledger[ref]; !ok {
			lacking++
			if len(detail) < 3 {
				detail = append(detail, fmt.Sprintf("%s %s at %s", mti, ref, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)))
			}
		}
		if code == "00" && mti != "0400" {
			approvedBefore[ref] = true
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	b.add("acquirer request before the moment has its attempt", received, lacking, strings.Join(detail, "; "))
	var approved, unknown int
	detail = nil
	for id, status := range ledger {
		if status != "APPROVED" {
			continue
		}
		approved++
		if !approvedBefore[id] {
			unknown++
			if len(detail) < 3 {
				detail = append(detail, id)
			}
		}
	}
	b.add("ledger approval approved by the acquirer before it", approved, unknown, strings.Join(detail, "; "))
	return nil
}

// retries sends, to the restored node, a sample of the load's sales again with their keys: those
// answered before the moment must get the same answer, those first sent after it a new transaction,
// approved by the acquirer (which answers everything by then): the connector's numbers after the
// restore are new to it.
func retries(ctx context.Context, b *books, f *fleet, calls []call, m moment, sample int, rng *rand.Rand) {
	var before, after []call
	for _, c := range calls {
		if c.op != "sale" || c.status != http.StatusOK {
			continue
		}
		switch {
		case c.end.Before(m.before):
			before = append(before, c)
		case c.end.Add(-c.took).After(m.after):
			after = append(after, c)
		}
	}
	pick := func(list []call) []call {
		rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		return list[:min(sample, len(list))]
	}
	txn := func(body []byte) string {
		var t struct {
			TransactionID string `json:"transaction_id"`
		}
		json.Unmarshal(body, &t)
		return t.TransactionID
	}
	var wrong int
	var detail []string
	for _, c := range pick(before) {
		again := f.call(ctx, "after the restore", "sale answered before the moment", "POST", "/transaction-service/sale", c.req, c.key, authBearer)
		if again.status != c.status || txn(again.body) != txn(c.body) || txn(c.body) == "" {
			wrong++
			if len(detail) < 3 {
				detail = append(detail, fmt.Sprintf("%s: %d %s, then %d %.120s", c.key, c.status, txn(c.body), again.status, again.body))
			}
		}
	}
	b.add("sale answered before the moment: retry, same answer", min(sample, len(before)), wrong, strings.Join(detail, "; "))
	wrong, detail = 0, nil
	for _, c := range pick(after) {
		again := f.call(ctx, "after the restore", "sale sent after the moment", "POST", "/transaction-service/sale", c.req, c.key, authBearer)
		id, ok := approved(again)
		if !ok || id == txn(c.body) {
			wrong++
			if len(detail) < 3 {
				detail = append(detail, fmt.Sprintf("%s: %s, then %d %.120s", c.key, txn(c.body), again.status, again.body))
			}
		}
	}
	b.add("sale sent after the moment: retry, approved anew", min(sample, len(after)), wrong, strings.Join(detail, "; "))
}

// cardsDecrypt pays with each customer's stored card on the restored node, and checks that the
// acquirer received the card's number (its last four digits).
func cardsDecrypt(ctx context.Context, b *books, f *fleet, rdb *store.DB, acq *acquirer) error {
	customers, err := texts(ctx, rdb, `SELECT lookup_id FROM customers ORDER BY id`)
	if err != nil {
		return err
	}
	var wrong int
	var detail []string
	for i, id := range customers {
		c := f.call(ctx, "after the restore", "stored card", "POST", "/customer-service/customer/"+id+"/card/",
			[]byte(`{"amount":"1.00","currency":"CAD"}`), fmt.Sprintf("pitr-card-%d", i), authBearer)
		ref, ok := approved(c)
		last4 := ""
		if ok {
			entries, err := acq.journal(ctx, ref)
			if err != nil {
				return err
			}
			if len(entries) > 0 {
				last4 = entries[0].PANLast4
			}
		}
		if !ok || last4 != drillCard[len(drillCard)-4:] {
			wrong++
			if len(detail) < 3 {
				detail = append(detail, fmt.Sprintf("customer %s: %d %.120s, last four at the acquirer %q", id, c.status, c.body, last4))
			}
		}
	}
	b.add("stored card decrypts with the vault key and pays", len(customers), wrong, strings.Join(detail, "; "))
	return nil
}

// inFlight checks what the restored node's recovery left unsettled, p, after the moment. An attempt
// still pending, or whose reversal the acquirer refuses, is wrong unless the original database shows
// the acquirer moved on after the moment (an approved capture, refund or void of it, which the
// acquirer holds and the restored ledger does not: its reversal is refused, and it is the operator's,
// through reconciliation). An intent's operation under way counts with its attempt.
func inFlight(ctx context.Context, b *books, rdb, original *store.DB, p pending, checked int) error {
	detail := fmt.Sprintf("after %.1f s: %d attempts pending, %d reversals unanswered, %d intents under way",
		p.waited.Seconds(), p.attempts, p.reversals, p.intents)
	if p.total() == 0 {
		b.add("attempt in flight at the moment settled by recovery", checked, 0, detail)
		return nil
	}
	stuck, err := texts(ctx, rdb, `SELECT transaction_id FROM transactions WHERE status = 'PENDING'
		UNION SELECT transaction_id FROM reversals WHERE acknowledged_at IS NULL
		UNION SELECT t.transaction_id FROM payment_intents i JOIN transactions t
			ON t.merchant_id = i.merchant_id AND t.idempotency_key = i.intent_id || ' attempt ' || i.attempts
		WHERE i.pending_op IS NOT NULL`)
	if err != nil {
		return err
	}
	var orphans int
	if err := rdb.QueryRow(ctx, []any{&orphans}, `SELECT COUNT(*) FROM payment_intents i WHERE i.pending_op IS NOT NULL AND NOT EXISTS
		(SELECT 1 FROM transactions t WHERE t.merchant_id = i.merchant_id AND t.idempotency_key = i.intent_id || ' attempt ' || i.attempts)`); err != nil {
		return err
	}
	wrong, moved := orphans, 0
	var unexplained []string
	for _, id := range stuck {
		var later bool
		if err := original.QueryRow(ctx, []any{&later}, `SELECT EXISTS (SELECT 1 FROM transactions c JOIN transactions t ON c.parent_id = t.id
			WHERE t.transaction_id = $1 AND c.status = 'APPROVED')`, id); err != nil {
			return err
		}
		if later {
			moved++
			continue
		}
		wrong++
		if len(unexplained) < 3 {
			unexplained = append(unexplained, id)
		}
	}
	if moved > 0 {
		detail += fmt.Sprintf("; %d captured or refunded at the acquirer after the moment, left to reconciliation", moved)
	}
	if len(unexplained) > 0 {
		detail += "; unsettled: " + strings.Join(unexplained, ", ")
	}
	b.add("attempt in flight at the moment settled by recovery", checked, wrong, detail)
	return nil
}

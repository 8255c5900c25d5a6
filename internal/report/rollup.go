// Package report computes the figures of the merchant dashboard's overview: volume, approvals,
// refunds and decline reasons per day in the merchant's time zone, and billing at a glance, computed
// by indexed queries, not by loading rows into Go.
//
// A month of a busy merchant's ledger is millions of rows, too many to sum on each page view. The
// Roller therefore keeps a rollup of the ledger (overview_buckets): per merchant, 15-minute interval,
// currency, live or test, kind, outcome and decline code, a count and a sum. An interval of 15
// minutes fits every time zone: all offsets in use, :30 and :45 ones included, and all their
// daylight-saving changes, fall on quarter hours, so a merchant's day is a whole number of intervals
// whatever its zone. It keeps the same by the merchant's local day (overview_days), in the zone the
// merchant has, rebuilt from the intervals when the merchant changes zone. The overview (Load) sums
// the days of the last 30 (the intervals, while the days are being rebuilt) and adds, in the same
// statement, the ledger rows the roller has not reached yet, found through the ledger's
// (merchant_id, id) index.
//
// The roller adds nothing to the payment path: it reads the ledger in ranges of id behind the
// payments and writes only its own tables, a few rows per roll.
package report

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
)

// BucketSize is the rollup's interval.
const BucketSize = 15 * time.Minute

// bucketSQL is BucketSize in milliseconds, in SQL.
const bucketSQL = "900000"

// Defaults of RollerConfig.
const (
	DefaultInterval = 2 * time.Second
	DefaultSettle   = 2 * time.Second
	DefaultChunk    = 50_000
	// DefaultBatch is the most rows one statement of a roll adds: a roll over a long stretch of the
	// ledger (a catch-up, a bulk import) is one statement per few hundred facts rather than two per
	// fact.
	DefaultBatch = 500
)

// RollerConfig configures a Roller.
type RollerConfig struct {
	DB     *store.DB
	Logger *slog.Logger
	// Interval is how often Run rolls (default DefaultInterval).
	Interval time.Duration
	// Settle is how long after the roller saw an id it may roll up to it (default DefaultSettle), in
	// real time whatever the server's clock: on
	// PostgreSQL a row is visible only once its transaction commits, which may come after a higher id
	// committed, so the roller waits until every transaction that was running when it looked has
	// ended (the snapshot's xmin) and, for the instant between a row's id and its transaction's xid,
	// this long.
	Settle time.Duration
	// Chunk bounds the ids one roll covers (default DefaultChunk), so that catching up with a long
	// ledger is many short transactions rather than one long one.
	Chunk int64
	// Batch bounds the rows one statement of a roll adds to the buckets or the days (default
	// DefaultBatch).
	Batch int
}

// Roller brings the rollup up to date with the ledger. Any number of rollers may run, on any nodes:
// a roll commits only if nothing else rolled since it read the rollup's state (its version), so no
// transaction is ever counted twice.
//
// What makes the rollup exact: a transaction is rolled only once its outcome is recorded (it is no
// longer PENDING), and the columns it is summed by — merchant_id, created_at, currency, test_mode,
// kind, status, decline_code, amount — never change after that (the ledger updates a final row's
// reserved, closed_by and idempotency_key only; its outcome is recorded once, WHERE status =
// 'PENDING'). A transaction still pending when its range is rolled is held (overview_held) and rolled
// when its outcome is in.
type Roller struct {
	db       *store.DB
	log      *slog.Logger
	interval time.Duration
	settle   time.Duration
	chunk    int64
	batch    int
}

// NewRoller returns a Roller.
func NewRoller(cfg RollerConfig) *Roller {
	r := &Roller{db: cfg.DB, log: cfg.Logger, interval: cfg.Interval, settle: cfg.Settle, chunk: cfg.Chunk, batch: cfg.Batch}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.interval <= 0 {
		r.interval = DefaultInterval
	}
	if r.settle <= 0 {
		r.settle = DefaultSettle
	}
	if r.chunk <= 0 {
		r.chunk = DefaultChunk
	}
	if r.batch <= 0 {
		r.batch = DefaultBatch
	}
	return r
}

// Run rolls every interval until ctx is done.
func (r *Roller) Run(ctx context.Context) {
	clock.Every(ctx, r.interval, r.log, "overview rollup", r.Roll)
}

// Roll rolls what may be rolled now: the settled ranges of ids, a chunk per transaction, and the
// held transactions whose outcome is in.
func (r *Roller) Roll(ctx context.Context) error {
	for {
		more, err := r.step(ctx)
		if err != nil || !more {
			return err
		}
	}
}

// CatchUp rolls until every transaction that is final now is in the rollup, waiting out the
// settling as needed: for a benchmark after a bulk load, and for tests.
func (r *Roller) CatchUp(ctx context.Context) error {
	var target int64
	if err := r.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM transactions`).Scan(&target)
	}); err != nil {
		return err
	}
	for {
		if err := r.Roll(ctx); err != nil {
			return err
		}
		var rolled, open int64
		if err := r.db.Read(ctx, func(q store.Querier) error {
			return q.QueryRowContext(ctx, `SELECT rolled_to, (SELECT COUNT(*) FROM overview_held h JOIN transactions t ON t.id = h.id
				WHERE t.status <> 'PENDING') FROM overview_rollup WHERE id = 1`).Scan(&rolled, &open)
		}); err != nil {
			return err
		}
		if rolled >= target && open == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.settle / 4):
		}
	}
}

// rollState is the rollup's row, and on PostgreSQL the xmin of the snapshot it was read in.
type rollState struct {
	rolledTo, version, seenTo, seenAt int64
	seenXmax, xmin                    sql.NullInt64
}

// observation is the highest id in the ledger at a time, and on PostgreSQL the snapshot's xmax then.
type observation struct {
	to, at int64
	xmax   sql.NullInt64
}

// fact is a count and sum of ledger rows of one merchant, interval, currency, mode, kind, outcome
// and decline code.
type fact struct {
	merchantID, currency, kind, status, code string
	bucket                                   int64
	testMode                                 bool
	n, amount                                int64
}

type factKey struct {
	merchantID, currency, kind, status, code string
	bucket                                   int64
	testMode                                 bool
}

// errRaced: another roller committed since this one read the rollup's state.
var errRaced = errors.New("report: another roller rolled first")

// rollWriteBound bounds a roll's write on PostgreSQL: a chunk of the ledger's ids is read and added in
// one transaction of many statements, longer by design than a payment's write, whose bound would cut
// it on a busy server.
const rollWriteBound = 2 * time.Minute

// step makes one roll and reports whether more is ready at once.
func (r *Roller) step(ctx context.Context) (bool, error) {
	ctx = store.WithWriteBound(ctx, rollWriteBound)
	st, err := r.state(ctx)
	if err != nil {
		return false, err
	}
	now := time.Now()
	upper := st.rolledTo
	settled := st.seenAt <= now.Add(-r.settle).UnixMilli() && (!st.seenXmax.Valid || (st.xmin.Valid && st.xmin.Int64 >= st.seenXmax.Int64))
	if st.seenTo > st.rolledTo && settled {
		upper = min(st.seenTo, st.rolledTo+r.chunk)
	}
	facts, pending, resolved, err := r.read(ctx, st.rolledTo, upper)
	if err != nil {
		return false, err
	}
	zones, rebuilds, err := r.zones(ctx)
	if err != nil {
		return false, err
	}
	// Once the roll reaches what was seen, look again: the next roll goes up to what is seen now.
	obs := observation{to: st.seenTo, at: st.seenAt, xmax: st.seenXmax}
	if upper == st.seenTo {
		if obs, err = r.observe(ctx, now); err != nil {
			return false, err
		}
	}
	if upper == st.rolledTo && len(resolved) == 0 && len(rebuilds) == 0 && obs.to == st.seenTo {
		return false, nil // nothing new
	}
	err = r.db.Write(ctx, func(tx *store.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE overview_rollup SET rolled_to = $2, version = version + 1, seen_to = $3, seen_at = $4,
			seen_xmax = $5 WHERE id = 1 AND version = $1`, st.version, upper, obs.to, obs.at, obs.xmax)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return errRaced
		}
		for _, b := range rebuilds {
			if err := b.write(ctx, tx, r.batch); err != nil {
				return err
			}
		}
		var days sums
		for _, f := range facts {
			d := f
			d.bucket = epochDay(f.bucket, zones[f.merchantID])
			days.add(d)
		}
		if err := addBuckets(ctx, tx, r.batch, facts); err != nil {
			return err
		}
		if err := addDays(ctx, tx, r.batch, zones, days.facts()); err != nil {
			return err
		}
		for _, p := range pending {
			if _, err := tx.ExecContext(ctx, `INSERT INTO overview_held (id, merchant_id) VALUES ($1, $2)`, p.id, p.merchantID); err != nil {
				return fmt.Errorf("report: hold a pending transaction: %w", err)
			}
		}
		for _, id := range resolved {
			if _, err := tx.ExecContext(ctx, `DELETE FROM overview_held WHERE id = $1`, id); err != nil {
				return fmt.Errorf("report: release a held transaction: %w", err)
			}
		}
		return nil
	})
	if errors.Is(err, errRaced) {
		return true, nil // read again what the other roller left
	}
	return err == nil && settled && upper < st.seenTo, err
}

// state reads the rollup's row.
func (r *Roller) state(ctx context.Context) (rollState, error) {
	xmin := "NULL"
	if r.db.Dialect() == store.Postgres {
		xmin = store.XminSQL
	}
	var st rollState
	err := r.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT rolled_to, version, seen_to, seen_at, seen_xmax, `+xmin+` FROM overview_rollup WHERE id = 1`).
			Scan(&st.rolledTo, &st.version, &st.seenTo, &st.seenAt, &st.seenXmax, &st.xmin)
	})
	return st, err
}

// observe reads the highest id in the ledger and, on PostgreSQL, the xmax of the snapshot it was seen
// in: the transactions that may still commit a lower id are older than it. On SQLite, whose one
// writer commits in the order of id, every id below the highest visible is visible.
func (r *Roller) observe(ctx context.Context, now time.Time) (observation, error) {
	xmax := "NULL"
	if r.db.Dialect() == store.Postgres {
		xmax = store.XmaxSQL
	}
	o := observation{at: now.UnixMilli()}
	err := r.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0), `+xmax+` FROM transactions`).Scan(&o.to, &o.xmax)
	})
	return o, err
}

type held struct {
	id         int64
	merchantID string
}

// rollSQL reads, in one statement and so one snapshot: the final transactions with ids in ($1, $2]
// summed by the rollup's key ('r'); the pending ones among them ('p'), to be held; and the held
// transactions whose outcome is now in ('h'), one by one. Which rows are final cannot change between
// the three. The held are looked up by id from overview_held (IN, not a join): SQLite, its ledger
// analyzed and the held table empty (no statistics), joined the other way round and read the whole
// ledger at every roll, every 2 s — a third more CPU per sale with 500,000 rows.
const rollSQL = `SELECT 'r', merchant_id, 0, created_at - created_at % ` + bucketSQL + `, currency, test_mode, kind, status,
		COALESCE(decline_code, ''), COUNT(*), CAST(SUM(amount) AS BIGINT)
	FROM transactions WHERE id > $1 AND id <= $2 AND status <> 'PENDING'
	GROUP BY merchant_id, created_at - created_at % ` + bucketSQL + `, currency, test_mode, kind, status, COALESCE(decline_code, '')
	UNION ALL
	SELECT 'p', merchant_id, id, 0, '', FALSE, '', '', '', 0, 0 FROM transactions WHERE id > $1 AND id <= $2 AND status = 'PENDING'
	UNION ALL
	SELECT 'h', t.merchant_id, t.id, t.created_at - t.created_at % ` + bucketSQL + `, t.currency, t.test_mode, t.kind, t.status,
		COALESCE(t.decline_code, ''), 1, t.amount
	FROM transactions t WHERE t.id IN (SELECT h.id FROM overview_held h) AND t.status <> 'PENDING'`

// read reads what a roll of ids (from, to] adds: the facts to add to the buckets (the range's and the
// resolved held transactions', summed by key), the range's pending transactions, and the ids of the
// held transactions resolved.
func (r *Roller) read(ctx context.Context, from, to int64) ([]fact, []held, []int64, error) {
	var sums sums
	var pending []held
	var resolved []int64
	err := r.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, rollSQL, from, to)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tag string
			var id int64
			var f fact
			if err := rows.Scan(&tag, &f.merchantID, &id, &f.bucket, &f.currency, &f.testMode, &f.kind, &f.status, &f.code, &f.n, &f.amount); err != nil {
				return err
			}
			switch tag {
			case "p":
				pending = append(pending, held{id: id, merchantID: f.merchantID})
				continue
			case "h":
				resolved = append(resolved, id)
			}
			sums.add(f)
		}
		return rows.Err()
	})
	return sums.facts(), pending, resolved, err
}

// sums adds facts up by key, keeping the order in which their keys first came.
type sums struct {
	by    map[factKey]*fact
	order []factKey
}

func (s *sums) add(f fact) {
	k := factKey{f.merchantID, f.currency, f.kind, f.status, f.code, f.bucket, f.testMode}
	if t, ok := s.by[k]; ok {
		t.n, t.amount = t.n+f.n, t.amount+f.amount
		return
	}
	if s.by == nil {
		s.by = map[factKey]*fact{}
	}
	s.by[k] = &f
	s.order = append(s.order, k)
}

func (s *sums) facts() []fact {
	out := make([]fact, len(s.order))
	for i, k := range s.order {
		out[i] = *s.by[k]
	}
	return out
}

// addBuckets adds facts, one per key, to their buckets, batch rows a statement.
func addBuckets(ctx context.Context, tx *store.Tx, batch int, facts []fact) error {
	rows := make([][]any, len(facts))
	for i, f := range facts {
		rows[i] = []any{f.merchantID, f.bucket, f.currency, f.testMode, f.kind, f.status, f.code, f.n, f.amount}
	}
	return addRows(ctx, tx, batch, "overview_buckets", "merchant_id, bucket, currency, test_mode, kind, status, decline_code", rows)
}

// addDays adds facts, one per key, each of whose bucket is its local day (epochDay), to the days
// of their merchants in the merchants' zones, batch rows a statement.
func addDays(ctx context.Context, tx *store.Tx, batch int, zones map[string]*time.Location, days []fact) error {
	rows := make([][]any, len(days))
	for i, f := range days {
		rows[i] = []any{f.merchantID, zones[f.merchantID].String(), f.bucket, f.currency, f.testMode, f.kind, f.status, f.code, f.n, f.amount}
	}
	return addRows(ctx, tx, batch, "overview_days", "merchant_id, zone, day, currency, test_mode, kind, status, decline_code", rows)
}

// addRows adds rows to table, batch a statement, whose key is the columns key: each row is the key's values, then a
// count and a sum, which a row of the same key already there adds to its own. No key may come twice
// in rows: PostgreSQL refuses to update a row twice in one statement.
func addRows(ctx context.Context, tx *store.Tx, batch int, table, key string, rows [][]any) error {
	for len(rows) > 0 {
		n := min(len(rows), batch)
		var b strings.Builder
		b.WriteString("INSERT INTO " + table + " (" + key + ", n, amount) VALUES ")
		args := make([]any, 0, n*len(rows[0]))
		for i, r := range rows[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j, v := range r {
				if j > 0 {
					b.WriteString(", ")
				}
				args = append(args, v)
				// SQLite looks each named parameter ($n) up in a list of the statement's names, which
				// makes a statement of thousands of them quadratic; its plain ? is not looked up.
				if tx.Dialect() == store.SQLite {
					b.WriteByte('?')
				} else {
					b.WriteString("$" + strconv.Itoa(len(args)))
				}
			}
			b.WriteByte(')')
		}
		b.WriteString(" ON CONFLICT (" + key + ") DO UPDATE SET n = " + table + ".n + excluded.n, amount = " + table + ".amount + excluded.amount")
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("report: roll into %s: %w", table, err)
		}
		rows = rows[n:]
	}
	return nil
}

// epochDay is the local date in loc of the instant at (epoch milliseconds), as days since
// 1970-01-01.
func epochDay(at int64, loc *time.Location) int64 {
	y, m, d := time.UnixMilli(at).In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// rebuild is a merchant's days made anew in its zone, from its buckets.
type rebuild struct {
	merchantID string
	loc        *time.Location
	days       []fact // each fact's bucket is its local day (epochDay)
}

// write replaces the merchant's days with b's, and records their zone.
func (b rebuild) write(ctx context.Context, tx *store.Tx, batch int) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM overview_days WHERE merchant_id = $1`, b.merchantID); err != nil {
		return err
	}
	if err := addDays(ctx, tx, batch, map[string]*time.Location{b.merchantID: b.loc}, b.days); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO overview_zones (merchant_id, zone) VALUES ($1, $2)
		ON CONFLICT (merchant_id) DO UPDATE SET zone = excluded.zone`, b.merchantID, b.loc.String())
	return err
}

// zones reads each merchant's zone and, for those whose days are in another zone or none yet, reads
// their buckets to rebuild the days in the new zone (in the snapshot of the roll's version: the roll
// commits only if no other roll came between).
func (r *Roller) zones(ctx context.Context) (map[string]*time.Location, []rebuild, error) {
	zones := map[string]*time.Location{}
	var stale []string
	err := r.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT m.id, m.timezone, COALESCE(z.zone, '') FROM merchants m LEFT JOIN overview_zones z ON z.merchant_id = m.id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, tz, zone string
			if err := rows.Scan(&id, &tz, &zone); err != nil {
				return err
			}
			zones[id] = merchant.Settings{Timezone: tz}.Location()
			if zones[id].String() != zone {
				stale = append(stale, id)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, err
	}
	var rebuilds []rebuild
	for _, id := range stale {
		b := rebuild{merchantID: id, loc: zones[id]}
		var days sums
		err := r.db.Read(ctx, func(q store.Querier) error {
			rows, err := q.QueryContext(ctx, `SELECT bucket, currency, test_mode, kind, status, decline_code, n, amount
				FROM overview_buckets WHERE merchant_id = $1`, id)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				f := fact{merchantID: id}
				if err := rows.Scan(&f.bucket, &f.currency, &f.testMode, &f.kind, &f.status, &f.code, &f.n, &f.amount); err != nil {
					return err
				}
				f.bucket = epochDay(f.bucket, b.loc)
				days.add(f)
			}
			return rows.Err()
		})
		if err != nil {
			return nil, nil, err
		}
		b.days = days.facts()
		rebuilds = append(rebuilds, b)
	}
	return zones, rebuilds, nil
}

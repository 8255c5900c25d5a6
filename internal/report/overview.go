package report

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassapay/kassa/internal/store"
)

// Days is how many days the overview covers, today included.
const Days = 30

// Periods are the overview's periods, in days ending today: today, the last 7 days, the last 30.
var Periods = [3]int{1, 7, Days}

// Query selects an overview: a merchant's live or test transactions, by day in its time zone.
type Query struct {
	MerchantID string
	Location   *time.Location // the merchant's time zone; nil is UTC
	Now        time.Time
	TestMode   bool
}

// Totals are a currency's figures over a day or a period. Amounts are minor units.
type Totals struct {
	Gross       int64 // approved sales and captures
	Refunds     int64 // approved refunds
	RefundCount int64
	Approved    int64 // approved sales and authorizations
	Declined    int64 // declined sales and authorizations
}

// Net is the gross volume less refunds.
func (t Totals) Net() int64 { return t.Gross - t.Refunds }

// Attempts are the sales and authorizations with an outcome.
func (t Totals) Attempts() int64 { return t.Approved + t.Declined }

func (t *Totals) add(o Totals) {
	t.Gross += o.Gross
	t.Refunds += o.Refunds
	t.RefundCount += o.RefundCount
	t.Approved += o.Approved
	t.Declined += o.Declined
}

// Reason is a decline code and how many sales and authorizations it declined in each of Periods.
type Reason struct {
	Code   string
	Counts [len(Periods)]int64
}

// Overview is a merchant's last Days days.
type Overview struct {
	// Dates are the days, oldest first, each as midnight UTC of its date in the merchant's zone.
	Dates []time.Time
	// Currencies are those with any transaction in the days, the largest gross volume first.
	Currencies []string
	// Daily are each currency's figures per day, in the order of Dates.
	Daily map[string][]Totals
	// Reasons are the decline codes of the days, the most frequent over the whole period first.
	Reasons []Reason
}

// Period is a currency's totals over the last days days.
func (o Overview) Period(currency string, days int) Totals {
	var t Totals
	daily := o.Daily[currency]
	for _, d := range daily[max(0, len(daily)-days):] {
		t.add(d)
	}
	return t
}

// Outcomes are the approved and declined sales and authorizations per day, all currencies together.
func (o Overview) Outcomes() []Totals {
	out := make([]Totals, len(o.Dates))
	for _, daily := range o.Daily {
		for i, d := range daily {
			out[i].Approved += d.Approved
			out[i].Declined += d.Declined
		}
	}
	return out
}

const dayMillis = int64(24 * time.Hour / time.Millisecond)

// Load computes the overview of q in one statement: the rollup's intervals of the days, plus the
// ledger's rows the roller has not reached (above its watermark, through the (merchant_id, id) index,
// and those it holds), summed by day, currency, kind, outcome and decline code. Its days are the
// merchant's: the statement turns an instant into a local date with the zone's offsets, which Go
// works out for the days (daylight-saving changes included) and hands to it.
func Load(ctx context.Context, db *store.DB, q Query) (Overview, error) {
	var rolledTo int64
	if err := db.Read(ctx, func(rq store.Querier) error {
		return rq.QueryRowContext(ctx, `SELECT rolled_to FROM overview_rollup WHERE id = 1`).Scan(&rolledTo)
	}); err != nil {
		return Overview{}, err
	}
	query, args, first := statement(q, rolledTo)
	if db.Dialect() == store.Postgres {
		// Planned for its arguments each time: PostgreSQL's generic plan of a prepared statement, which
		// it switches to after five runs, cannot know which of the statement's parts are empty (the
		// quarter hours, once the days are in the merchant's zone) and takes 20 times as long.
		args = append([]any{pgx.QueryExecModeExec}, args...)
	}
	o := Overview{Daily: map[string][]Totals{}}
	for i := range Days {
		o.Dates = append(o.Dates, first.AddDate(0, 0, i))
	}
	firstDay := first.Unix() / 86400
	reasons := map[string]*Reason{}
	err := db.Read(ctx, func(rq store.Querier) error {
		rows, err := rq.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var day, n, amount int64
			var currency, kind, status, code string
			if err := rows.Scan(&day, &currency, &kind, &status, &code, &n, &amount); err != nil {
				return err
			}
			i := int(day - firstDay)
			if i < 0 || i >= Days {
				continue
			}
			daily := o.Daily[currency]
			if daily == nil {
				daily = make([]Totals, Days)
				o.Daily[currency] = daily
				o.Currencies = append(o.Currencies, currency)
			}
			t := &daily[i]
			sale := kind == "SALE" || kind == "AUTHORIZATION"
			switch {
			case status == "APPROVED" && (kind == "SALE" || kind == "CAPTURE"):
				t.Gross += amount
			case status == "APPROVED" && kind == "REFUND":
				t.Refunds += amount
				t.RefundCount += n
			}
			switch {
			case sale && status == "APPROVED":
				t.Approved += n
			case sale && status == "DECLINED":
				t.Declined += n
				r := reasons[code]
				if r == nil {
					r = &Reason{Code: code}
					reasons[code] = r
				}
				for p, days := range Periods {
					if i >= Days-days {
						r.Counts[p] += n
					}
				}
			}
		}
		return rows.Err()
	})
	if err != nil {
		return Overview{}, err
	}
	gross := func(c string) int64 { return o.Period(c, Days).Gross }
	slices.SortFunc(o.Currencies, func(a, b string) int { return cmp.Or(cmp.Compare(gross(b), gross(a)), cmp.Compare(a, b)) })
	for _, r := range reasons {
		o.Reasons = append(o.Reasons, *r)
	}
	last := len(Periods) - 1
	slices.SortFunc(o.Reasons, func(a, b Reason) int {
		return cmp.Or(cmp.Compare(b.Counts[last], a.Counts[last]), cmp.Compare(a.Code, b.Code))
	})
	return o, nil
}

// statement is the overview's statement for q and its arguments, and the first day (a date) it covers;
// rolledTo is the roller's watermark as last read, which only tells the planner how few rows of the
// ledger lie above it (the statement reads the watermark again, in its own snapshot).
func statement(q Query, rolledTo int64) (string, []any, time.Time) {
	loc := q.Location
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := q.Now.In(loc).Date()
	first := time.Date(y, m, d-(Days-1), 0, 0, 0, 0, time.UTC)
	start, end := dayStart(first, loc), EndOfDay(q.Now, loc)
	day := first.Unix() / 86400
	offset, args := localDay(start, end, loc, []any{q.MerchantID, start.UnixMilli(), end.UnixMilli(), q.TestMode, loc.String(), day, day + Days - 1,
		rolledTo})
	return strings.NewReplacer("{bucket}", offset("bucket"), "{created}", offset("created_at"), "{t.created}", offset("t.created_at")).
		Replace(overviewSQL), args, first
}

// overviewSQL sums a merchant's transactions of one mode by local day, currency, kind, outcome and
// decline code, over the days $6 to $7 (from $2 to $3 in epoch milliseconds), from: the rollup's days
// in the merchant's zone ($5); its quarter hours, only while the days are not in that zone (the roller
// rebuilds them after a change of zone), turned into local days with the zone's offsets ({bucket});
// the final transactions above the roller's watermark; and those it holds whose outcome is now in.
// One statement, so one snapshot: a roll that commits meanwhile is seen whole or not at all. The
// tail's time bounds are written +created_at so that no planner reads it by the ledger's time index
// (a month of rows) rather than from the watermark on (merchant_id, id): the few rows not rolled yet.
const overviewSQL = `SELECT f.day, f.currency, f.kind, f.status, f.decline_code, CAST(SUM(f.n) AS BIGINT), CAST(SUM(f.amount) AS BIGINT)
	FROM (
		SELECT day, currency, kind, status, decline_code, n, amount FROM overview_days
			WHERE merchant_id = $1 AND zone = $5 AND day >= $6 AND day <= $7 AND test_mode = $4
		UNION ALL
		SELECT {bucket} AS day, currency, kind, status, decline_code, n, amount FROM overview_buckets
			WHERE merchant_id = $1 AND bucket >= $2 AND bucket < $3 AND test_mode = $4
			AND NOT EXISTS (SELECT 1 FROM overview_zones WHERE merchant_id = $1 AND zone = $5)
		UNION ALL
		SELECT {created}, currency, kind, status, COALESCE(decline_code, ''), 1, amount FROM transactions
			WHERE merchant_id = $1 AND id > $8 AND id > (SELECT rolled_to FROM overview_rollup WHERE id = 1)
			AND status <> 'PENDING' AND +created_at >= $2 AND +created_at < $3 AND test_mode = $4
		UNION ALL
		SELECT {t.created}, t.currency, t.kind, t.status, COALESCE(t.decline_code, ''), 1, t.amount
			FROM overview_held h JOIN transactions t ON t.id = h.id
			WHERE h.merchant_id = $1 AND t.status <> 'PENDING' AND t.created_at >= $2 AND t.created_at < $3 AND t.test_mode = $4
	) f GROUP BY 1, 2, 3, 4, 5`

// dayStart is the first instant of date (a midnight UTC) in loc: its midnight, or where a
// daylight-saving change skips midnight, the change.
func dayStart(date time.Time, loc *time.Location) time.Time {
	y, m, d := date.Date()
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ty, tm, td := t.Date(); time.Date(ty, tm, td, 0, 0, 0, 0, time.UTC).Before(date) {
		_, t = t.ZoneBounds() // a midnight that does not exist, taken in the zone before the change
	}
	return t
}

// localDay returns the SQL expression of the local day (days since 1970-01-01) in loc of a column
// of epoch milliseconds between start and end, with its arguments appended to args: the column plus
// the zone's offset — a constant, or a CASE over the zone's changes between start and end — divided
// by a day.
func localDay(start, end time.Time, loc *time.Location, args []any) (func(column string) string, []any) {
	param := func(v int64) string {
		args = append(args, v)
		return fmt.Sprintf("CAST($%d AS BIGINT)", len(args))
	}
	offset := func(t time.Time) int64 {
		_, off := t.In(loc).Zone()
		return int64(off) * 1000
	}
	type change struct{ at, offset string }
	var changes []change
	at := start
	for {
		_, next := at.In(loc).ZoneBounds()
		if next.IsZero() || !next.Before(end) {
			break
		}
		changes = append(changes, change{param(next.UnixMilli()), param(offset(at))})
		at = next
	}
	last := param(offset(at))
	return func(column string) string {
		if len(changes) == 0 {
			return "(" + column + " + " + last + ") / 86400000"
		}
		var b strings.Builder
		b.WriteString("(" + column + " + CASE")
		for _, c := range changes {
			fmt.Fprintf(&b, " WHEN %s < %s THEN %s", column, c.at, c.offset)
		}
		fmt.Fprintf(&b, " ELSE %s END) / 86400000", last)
		return b.String()
	}, args
}

// Billing is billing at a glance: a merchant's subscriptions due by the end of its day, in RETRY and
// SUSPENDED, and its e-mails (receipts, staff links) waiting in the outbox.
type Billing struct {
	DueToday, Retrying, Suspended int64
	Unsent                        int64
	OldestUnsent                  time.Time // zero when none waits
}

// LoadBilling counts a merchant's billing at a glance, through the subscriptions' (merchant_id,
// status, next_run) index and the outbox's index of unsent e-mails. endOfDay is the start of the
// merchant's tomorrow: a subscription due before it and not charged yet is due today.
func LoadBilling(ctx context.Context, db *store.DB, merchantID string, endOfDay time.Time) (Billing, error) {
	var b Billing
	var oldest *int64
	err := db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, billingSQL, merchantID, endOfDay.UnixMilli()).Scan(&b.DueToday, &b.Retrying, &b.Suspended, &b.Unsent, &oldest)
	})
	if oldest != nil {
		b.OldestUnsent = time.UnixMilli(*oldest)
	}
	return b, err
}

const billingSQL = `SELECT
	(SELECT COUNT(*) FROM subscriptions WHERE merchant_id = $1 AND status IN ('ACTIVE', 'RETRY') AND next_run < $2),
	(SELECT COUNT(*) FROM subscriptions WHERE merchant_id = $1 AND status = 'RETRY'),
	(SELECT COUNT(*) FROM subscriptions WHERE merchant_id = $1 AND status = 'SUSPENDED'),
	(SELECT COUNT(*) FROM outbox WHERE merchant_id = $1 AND sent_at IS NULL),
	(SELECT MIN(created_at) FROM outbox WHERE merchant_id = $1 AND sent_at IS NULL)`

// EndOfDay is the start of the day after now's in loc.
func EndOfDay(now time.Time, loc *time.Location) time.Time {
	y, m, d := now.In(loc).Date()
	return dayStart(time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC), loc)
}

package report_test

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/report"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// ledger writes ledger rows straight into the transactions table, as the ledger records them: a
// PENDING row first, its outcome later.
type ledger struct {
	t    testing.TB
	db   *store.DB
	next int
}

// entry is one ledger row to write.
type entry struct {
	merchantID, kind, status, currency, code string
	amount                                   int64
	test                                     bool
	at                                       time.Time
}

// newMerchant makes a merchant in zone.
func newMerchant(t testing.TB, db *store.DB, zone string) string {
	t.Helper()
	var m merchant.Merchant
	if err := db.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		m, err = merchant.Create(context.Background(), tx, merchant.New{Name: zone, Email: rand.Text()[:12] + "@shop.example"}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	setZone(t, db, m.ID, zone)
	return m.ID
}

// setZone changes the merchant's time zone, as its settings do.
func setZone(t testing.TB, db *store.DB, merchantID, zone string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `UPDATE merchants SET timezone = $2 WHERE id = $1`, merchantID, zone); err != nil {
		t.Fatal(err)
	}
}

// add writes e and returns its id.
func (l *ledger) add(e entry) int64 {
	l.t.Helper()
	l.next++
	var code any
	if e.code != "" {
		code = e.code
	}
	var id int64
	if err := l.db.QueryRow(context.Background(), []any{&id}, `INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount,
		currency, scale, decline_code, test_mode, source, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 2, $7, $8, 'E_COMMERCE', $9, $9)
		RETURNING id`, fmt.Sprintf("TEST%016d", l.next), e.merchantID, e.kind, e.status, e.amount, e.currency, code, e.test, e.at.UnixMilli()); err != nil {
		l.t.Fatal(err)
	}
	return id
}

// finish records the outcome of a pending row, as the ledger does: once, WHERE status = 'PENDING'.
func (l *ledger) finish(id int64, status, code string) {
	l.t.Helper()
	var c any
	if code != "" {
		c = code
	}
	if _, err := l.db.Exec(context.Background(), `UPDATE transactions SET status = $2, decline_code = $3, updated_at = $4
		WHERE id = $1 AND status = 'PENDING'`, id, status, c, time.Now().UnixMilli()); err != nil {
		l.t.Fatal(err)
	}
}

var (
	kinds      = []string{"SALE", "SALE", "SALE", "AUTHORIZATION", "CAPTURE", "REFUND", "VOID"}
	currencies = []string{"USD", "CAD", "JPY"}
	codes      = []string{"insufficient_funds", "card_declined", "expired_card", "processing_error"}
)

// varied writes n rows of the merchant at random times of the 32 days before now, and rows a
// millisecond either side of each local midnight of the period: every kind, three currencies, live and
// test, approvals, declines with several codes, and some left pending. It returns the pending ids.
func (l *ledger) varied(rng *mrand.Rand, merchantID string, loc *time.Location, now time.Time, n int) []int64 {
	var pending []int64
	one := func(at time.Time) {
		e := entry{merchantID: merchantID, kind: kinds[rng.IntN(len(kinds))], status: "APPROVED", currency: currencies[rng.IntN(len(currencies))],
			amount: 1 + rng.Int64N(100_000), test: rng.IntN(3) == 0, at: at}
		switch rng.IntN(10) {
		case 0, 1:
			e.status, e.code = "DECLINED", codes[rng.IntN(len(codes))]
		case 2:
			e.status = "PENDING"
		}
		if id := l.add(e); e.status == "PENDING" {
			pending = append(pending, id)
		}
	}
	for range n {
		one(now.Add(-time.Duration(rng.Int64N(int64(32 * 24 * time.Hour)))))
	}
	y, m, d := now.In(loc).Date()
	for i := -31; i <= 0; i++ {
		midnight := time.Date(y, m, d+i, 0, 0, 0, 0, loc)
		one(midnight.Add(-time.Millisecond))
		one(midnight)
	}
	return pending
}

// expected computes the overview of q by reading every one of the merchant's ledger rows and
// counting each in the day its time falls on in the zone.
func expected(t testing.TB, db *store.DB, q report.Query) (map[string][]report.Totals, map[string][3]int64) {
	t.Helper()
	rows, err := db.Reader().QueryContext(context.Background(), `SELECT kind, status, amount, currency, test_mode, COALESCE(decline_code, ''), created_at
		FROM transactions WHERE merchant_id = $1`, q.MerchantID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	y, m, d := q.Now.In(q.Location).Date()
	first := time.Date(y, m, d-(report.Days-1), 0, 0, 0, 0, time.UTC)
	daily, reasons := map[string][]report.Totals{}, map[string][3]int64{}
	for rows.Next() {
		var kind, status, currency, code string
		var amount, at int64
		var test bool
		if err := rows.Scan(&kind, &status, &amount, &currency, &test, &code, &at); err != nil {
			t.Fatal(err)
		}
		ly, lm, ld := time.UnixMilli(at).In(q.Location).Date()
		day := int(time.Date(ly, lm, ld, 0, 0, 0, 0, time.UTC).Sub(first) / (24 * time.Hour))
		if test != q.TestMode || status == "PENDING" || day < 0 || day >= report.Days {
			continue
		}
		if daily[currency] == nil {
			daily[currency] = make([]report.Totals, report.Days)
		}
		tot := &daily[currency][day]
		sale := kind == "SALE" || kind == "AUTHORIZATION"
		switch {
		case status == "APPROVED" && (kind == "SALE" || kind == "CAPTURE"):
			tot.Gross += amount
		case status == "APPROVED" && kind == "REFUND":
			tot.Refunds += amount
			tot.RefundCount++
		}
		if sale && status == "APPROVED" {
			tot.Approved++
		}
		if sale && status == "DECLINED" {
			tot.Declined++
			c := reasons[code]
			for p, days := range report.Periods {
				if day >= report.Days-days {
					c[p]++
				}
			}
			reasons[code] = c
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return daily, reasons
}

// check compares the overview of q, live and test, with the direct computation over the ledger.
func check(t testing.TB, db *store.DB, q report.Query, when string) {
	t.Helper()
	for _, test := range []bool{false, true} {
		q.TestMode = test
		o, err := report.Load(context.Background(), db, q)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		daily, reasons := expected(t, db, q)
		if !reflect.DeepEqual(o.Daily, daily) {
			for c := range daily {
				for i := range daily[c] {
					if o.Daily[c] == nil || o.Daily[c][i] != daily[c][i] {
						t.Errorf("%s, %s, test %v, %s: %+v, want %+v", when, q.Location, test, c, o.Daily[c], daily[c][i])
						break
					}
				}
			}
			t.Fatalf("%s, %s, test %v: the overview differs from the ledger (currencies %v, want %d)", when, q.Location, test, o.Currencies, len(daily))
		}
		got := map[string][3]int64{}
		for _, r := range o.Reasons {
			got[r.Code] = r.Counts
		}
		if !reflect.DeepEqual(got, reasons) {
			t.Fatalf("%s, %s, test %v: decline reasons %v, want %v", when, q.Location, test, got, reasons)
		}
		if len(o.Dates) != report.Days || o.Dates[report.Days-1].Format("2006-01-02") != q.Now.In(q.Location).Format("2006-01-02") {
			t.Fatalf("%s: the days end %v, not on the local date of %v", when, o.Dates[len(o.Dates)-1], q.Now.In(q.Location))
		}
	}
}

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// The overview's figures — per day, currency, live or test; gross volume, approvals, declines and
// their reasons, refunds — equal a direct computation over the ledger, in zones with a daylight-saving
// change within the 30 days (Toronto; Adelaide, +9:30/+10:30; Santiago, whose change skips midnight)
// and a +5:45 zone: before any roll (all from the ledger), after a roll, with rows added after it,
// with pending rows whose outcome came after their range was rolled, and after rolling those.
func TestOverviewEqualsTheLedger(t *testing.T) {
	t.Parallel()
	zones := []struct {
		zone string
		now  time.Time // the local time of the overview
	}{
		{"America/Toronto", time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)},
		{"Australia/Adelaide", time.Date(2026, 10, 20, 23, 30, 0, 0, time.UTC)},
		{"America/Santiago", time.Date(2026, 9, 20, 0, 10, 0, 0, time.UTC)},
		{"Asia/Kathmandu", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		l := &ledger{t: t, db: db}
		rng := mrand.New(mrand.NewPCG(17, 1))
		// Rolls of 97 ids, whose facts are added 7 rows a statement: a roll spans several
		// statements, each of which must count.
		roller := report.NewRoller(report.RollerConfig{DB: db, Settle: time.Millisecond, Chunk: 97, Batch: 7})
		ctx := context.Background()
		var qs []report.Query
		var pending []int64
		for _, z := range zones {
			loc := mustZone(t, z.zone)
			y, m, d := z.now.Date()
			now := time.Date(y, m, d, z.now.Hour(), z.now.Minute(), 0, 0, loc)
			q := report.Query{MerchantID: newMerchant(t, db, z.zone), Location: loc, Now: now}
			qs = append(qs, q)
			pending = append(pending, l.varied(rng, q.MerchantID, loc, now, 300)...)
		}
		checkAll := func(when string) {
			for _, q := range qs {
				check(t, db, q, when)
			}
		}
		checkAll("before any roll")
		if err := roller.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		checkAll("after a roll")
		for _, q := range qs {
			pending = append(pending, l.varied(rng, q.MerchantID, q.Location, q.Now, 100)...)
		}
		checkAll("with rows added after the roll")
		if err := roller.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		var held int
		if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM overview_held`).Scan(&held); err != nil || held != len(pending) {
			t.Fatalf("%d transactions held, want the %d pending (%v)", held, len(pending), err)
		}
		for i, id := range pending {
			if i%2 == 0 {
				l.finish(id, "APPROVED", "")
			} else {
				l.finish(id, "DECLINED", codes[i%len(codes)])
			}
		}
		checkAll("with held rows settled after their roll")
		if err := roller.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		checkAll("after rolling the held rows")
		if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM overview_held`).Scan(&held); err != nil || held != 0 {
			t.Fatalf("%d transactions still held (%v)", held, err)
		}

		// The merchants move: each takes the next one's zone. Until the roller has rebuilt their days,
		// the overview sums the quarter hours; then the days again.
		for i := range qs {
			qs[i].Location = mustZone(t, zones[(i+1)%len(zones)].zone)
			setZone(t, db, qs[i].MerchantID, qs[i].Location.String())
		}
		checkAll("after a change of zone")
		if err := roller.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		var days int
		if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM overview_days d JOIN merchants m ON m.id = d.merchant_id
			WHERE d.zone <> m.timezone`).Scan(&days); err != nil || days != 0 {
			t.Fatalf("%d days in a zone the merchant left (%v)", days, err)
		}
		checkAll("with the days rebuilt in the new zone")
	})
}

// rolledTotals are the rollup's count and sum of a merchant's transactions, and the ledger's count
// and sum of its final ones.
func rolledTotals(t testing.TB, db *store.DB, merchantID string) (rolled, ledger [2]int64) {
	t.Helper()
	if err := db.Reader().QueryRowContext(context.Background(), `SELECT
		(SELECT COALESCE(SUM(n), 0) FROM overview_buckets WHERE merchant_id = $1),
		(SELECT COALESCE(SUM(amount), 0) FROM overview_buckets WHERE merchant_id = $1),
		(SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND status <> 'PENDING'),
		(SELECT COALESCE(SUM(amount), 0) FROM transactions WHERE merchant_id = $1 AND status <> 'PENDING')`, merchantID).
		Scan(&rolled[0], &rolled[1], &ledger[0], &ledger[1]); err != nil {
		t.Fatal(err)
	}
	return rolled, ledger
}

// The roller never counts a transaction twice: rolled twice in a row, and by four rollers at once
// (as on four nodes) while transactions are written and settled, the rollup holds each final
// transaction exactly once.
func TestRollerCountsEachTransactionOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		l := &ledger{t: t, db: db}
		rng := mrand.New(mrand.NewPCG(17, 2))
		loc := mustZone(t, "Europe/Berlin")
		now := time.Now()
		m := newMerchant(t, db, "Europe/Berlin")
		pending := l.varied(rng, m, loc, now, 200)
		newRoller := func() *report.Roller {
			return report.NewRoller(report.RollerConfig{DB: db, Settle: time.Millisecond, Chunk: 13})
		}
		for range 2 {
			if err := newRoller().CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			if rolled, ledger := rolledTotals(t, db, m); rolled != ledger {
				t.Fatalf("rolled %v, the ledger has %v", rolled, ledger)
			}
		}

		// Four rollers catch up with 2,000 more rows, 13 ids at a time, while pending ones settle.
		pending = append(pending, l.varied(rng, m, loc, now, 2000)...)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := newRoller().CatchUp(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		for _, id := range pending[:len(pending)/2] {
			l.finish(id, "APPROVED", "")
		}
		wg.Wait()
		pending = pending[len(pending)/2:]
		for _, id := range pending {
			l.finish(id, "DECLINED", "card_declined")
		}
		if err := newRoller().CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		if rolled, ledger := rolledTotals(t, db, m); rolled != ledger {
			t.Fatalf("after four rollers at once: rolled %v, the ledger has %v", rolled, ledger)
		}
		check(t, db, report.Query{MerchantID: m, Location: loc, Now: now}, "after four rollers")
	})
}

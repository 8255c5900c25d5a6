package billing_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A year of monthly billing from Jan 31, day by day: each cycle is charged once, on the start's day
// of the month clamped to the month's end (Feb 28 in 2027, Feb 29 in 2028), at the start's time.
func TestYearOfMonthlyBilling(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		start := time.Date(2027, time.January, 31, 9, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{})
		p := f.plan(t, map[string]any{"name": "Monthly box", "amount": "25.00", "currency": "CAD", "frequency": "MOTHLY"})
		c, _ := f.customer(t, cardtest.Visa)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p, "amount": "19.99"})
		for day := 0; day <= 400; day++ {
			f.run(t)
			f.clock.Advance(24 * time.Hour)
		}
		want := []string{"2027-01-31", "2027-02-28", "2027-03-31", "2027-04-30", "2027-05-31", "2027-06-30", "2027-07-31",
			"2027-08-31", "2027-09-30", "2027-10-31", "2027-11-30", "2027-12-31", "2028-01-31", "2028-02-29"}
		got := f.charges(t, time.UTC)
		if len(got) != len(want) {
			t.Fatalf("%d charges:\n%s", len(got), strings.Join(got, "\n"))
		}
		for i := range want {
			if got[i] != want[i]+" APPROVED 19.99" {
				t.Errorf("charge %d: %s, want %s APPROVED 19.99", i, got[i], want[i])
			}
		}
		r := f.sub(t, c, s)
		next := time.Date(2028, time.March, 31, 9, 0, 0, 0, time.UTC)
		if r.Str("status") != "ACTIVE" || num(r, "completed_cycles") != 14 || num(r, "next_run") != next.UnixMilli() ||
			num(r, "last_success") != time.Date(2028, time.February, 29, 9, 0, 0, 0, time.UTC).UnixMilli() ||
			num(r, "failed_attempts") != 0 || num(r, "remaining_cycles") != -1 || r.Str("frequency") != "MONTHLY" {
			t.Fatalf("after 14 cycles: %s", r.Raw)
		}
	})
}

// A declined cycle is retried 1, 3 and 5 days after its first decline, then the subscription is
// SUSPENDED; reactivated on a good card, the unpaid cycle is charged at once.
func TestRetriesThenSuspension(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		start := time.Date(2027, time.March, 1, 12, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{})
		p := f.plan(t, map[string]any{"name": "Weekly", "amount": "5.00", "frequency": "WEEKLY"})
		c, bad := f.customer(t, cardtest.InsufficientFunds)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p, "card_lookup_id": bad})
		f.run(t)
		r := f.sub(t, c, s)
		if r.Str("status") != "RETRY" || num(r, "failed_attempts") != 1 || num(r, "delinquent_since") != start.UnixMilli() ||
			num(r, "next_run") != start.Add(24*time.Hour).UnixMilli() || num(r, "last_run") != start.UnixMilli() || num(r, "completed_cycles") != 0 {
			t.Fatalf("after the first decline: %s", r.Raw)
		}
		f.status(t, db, billing.StatusReport{Retrying: 1})
		for _, day := range []int{1, 3, 5} {
			f.clock.Advance(start.Add(time.Duration(day)*24*time.Hour).Sub(f.clock.Now()) - time.Minute)
			if n := f.run(t); n != 0 {
				t.Fatalf("retried before day %d", day)
			}
			f.clock.Advance(time.Minute)
			f.status(t, db, billing.StatusReport{Due: 1, Retrying: 1})
			if n := f.run(t); n != 1 {
				t.Fatalf("no retry on day %d", day)
			}
		}
		r = f.sub(t, c, s)
		if r.Str("status") != "SUSPENDED" || num(r, "failed_attempts") != 4 || num(r, "delinquent_cycles") != 1 || num(r, "next_run") != -1 {
			t.Fatalf("after the retries: %s", r.Raw)
		}
		f.status(t, db, billing.StatusReport{Suspended: 1})
		f.clock.Advance(30 * 24 * time.Hour)
		if n := f.run(t); n != 0 {
			t.Fatal("a suspended subscription was charged")
		}
		// The merchant moves it to a good card and reactivates it: the unpaid cycle is charged now.
		_, good := f.customerCard(t, c, cardtest.Mastercard)
		r = f.must(t, "PATCH", "/customer-service/customer/"+c+"/subscription/"+s, map[string]any{"card_lookup_id": good, "status": "ACTIVE"})
		if r.Str("status") != "ACTIVE" || num(r, "next_run") != f.clock.Now().UnixMilli() {
			t.Fatalf("reactivate: %s", r.Raw)
		}
		f.run(t)
		r = f.sub(t, c, s)
		// Five weekly cycles passed unpaid (the suspended one and four more): missed, not charged.
		if r.Str("status") != "ACTIVE" || num(r, "completed_cycles") != 1 || num(r, "delinquent_cycles") != 0 || num(r, "delinquent_since") != -1 ||
			num(r, "failed_attempts") != 0 || num(r, "missed_cycles") != 5 || num(r, "next_run") <= f.clock.Now().UnixMilli() {
			t.Fatalf("after reactivation: %s", r.Raw)
		}
		if got := f.charges(t, time.UTC); len(got) != 5 || !strings.HasSuffix(got[4], "APPROVED 5.00") {
			t.Fatalf("charges: %v", got)
		}
	})
}

// customerCard adds another card to a customer.
func (f *fixture) customerCard(t *testing.T, customer, pan string) (string, string) {
	t.Helper()
	r := f.must(t, "POST", "/customer-service/customer/"+customer+"/card", map[string]any{"card_number": pan,
		"card_expiry_month": "12", "card_expiry_year": "2099"})
	cards := r.Body["cards"].([]any)
	return customer, cards[len(cards)-1].(map[string]any)["lookup_id"].(string)
}

// A retry that succeeds returns the subscription to ACTIVE on its schedule.
func TestRetrySucceeds(t *testing.T) {
	t.Parallel()
	start := time.Date(2027, time.May, 10, 8, 0, 0, 0, time.UTC)
	f := newFixture(t, storetest.SQLite(t), start, billing.Config{})
	p := f.plan(t, map[string]any{"name": "Monthly", "amount": "9.00", "frequency": "MONTHLY"})
	c, bad := f.customer(t, cardtest.Declined)
	s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p, "card_lookup_id": bad})
	f.run(t)
	_, good := f.customerCard(t, c, cardtest.Visa)
	f.must(t, "PATCH", "/customer-service/customer/"+c+"/subscription/"+s, map[string]any{"card_lookup_id": good})
	f.clock.Advance(24 * time.Hour)
	f.run(t)
	r := f.sub(t, c, s)
	if r.Str("status") != "ACTIVE" || num(r, "completed_cycles") != 1 || num(r, "failed_attempts") != 0 ||
		num(r, "next_run") != time.Date(2027, time.June, 10, 8, 0, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("after a successful retry: %s", r.Raw)
	}
}

// PAUSED lets cycles pass without charge; resumed, billing continues from the next cycle due.
func TestPauseAndResume(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		start := time.Date(2027, time.January, 15, 10, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{})
		p := f.plan(t, map[string]any{"name": "Monthly", "amount": "10.00", "frequency": "MONTHLY", "number_of_payments": 12})
		c, _ := f.customer(t, cardtest.Visa)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
		f.run(t) // Jan 15
		r := f.must(t, "PATCH", "/customer-service/customer/"+c+"/subscription/"+s, map[string]any{"status": "PAUSED"})
		if r.Str("status") != "PAUSED" || num(r, "next_run") != -1 {
			t.Fatalf("pause: %s", r.Raw)
		}
		for range 70 { // through Feb 15 and Mar 15
			f.clock.Advance(24 * time.Hour)
			f.run(t)
		}
		r = f.must(t, "PATCH", "/customer-service/customer/"+c+"/subscription/"+s, map[string]any{"status": "ACTIVE"})
		if r.Str("status") != "ACTIVE" || num(r, "next_run") != time.Date(2027, time.April, 15, 10, 0, 0, 0, time.UTC).UnixMilli() {
			t.Fatalf("resume: %s", r.Raw)
		}
		for range 31 {
			f.clock.Advance(24 * time.Hour)
			f.run(t)
		}
		got := f.charges(t, time.UTC)
		if strings.Join(got, ",") != "2027-01-15 APPROVED 10.00,2027-04-15 APPROVED 10.00" {
			t.Fatalf("charges: %v", got)
		}
		if r := f.sub(t, c, s); num(r, "completed_cycles") != 2 || num(r, "remaining_cycles") != 10 || num(r, "total_cycles") != 12 {
			t.Fatalf("counts: %s", r.Raw)
		}
	})
}

// number_of_payments successful payments end the subscription: EXPIRED, final.
func TestExpiresAfterItsPayments(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		start := time.Date(2027, time.June, 1, 0, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{})
		p := f.plan(t, map[string]any{"name": "Three days", "amount": "1.00", "frequency": "DAILY", "number_of_payments": "3"})
		c, _ := f.customer(t, cardtest.Visa)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
		for range 10 {
			f.run(t)
			f.clock.Advance(24 * time.Hour)
		}
		r := f.sub(t, c, s)
		if r.Str("status") != "EXPIRED" || num(r, "completed_cycles") != 3 || num(r, "remaining_cycles") != 0 || num(r, "next_run") != -1 {
			t.Fatalf("after three payments: %s", r.Raw)
		}
		if got := f.charges(t, time.UTC); len(got) != 3 {
			t.Fatalf("charges: %v", got)
		}
		for _, body := range []map[string]any{{"status": "ACTIVE"}, {"amount": "2.00"}, {"status": "CANCELED"}} {
			if r := f.do(t, "PATCH", "/customer-service/customer/"+c+"/subscription/"+s, body); r.Status != 409 {
				t.Errorf("PATCH %v of an EXPIRED subscription: %d %s", body, r.Status, r.Raw)
			}
		}
	})
}

// After downtime, the past-due cycles are charged once each up to the backlog limit; older ones are
// recorded as missed.
func TestCatchUpAfterDowntime(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		start := time.Date(2027, time.August, 1, 6, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{BacklogLimit: 3})
		p := f.plan(t, map[string]any{"name": "Daily", "amount": "2.00", "frequency": "DAILY"})
		c, _ := f.customer(t, cardtest.Visa)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
		f.run(t)                                     // Aug 1
		f.clock.Advance(10*24*time.Hour + time.Hour) // down until Aug 11, 07:00
		if n := f.run(t); n != 3 {
			t.Fatalf("caught up %d cycles, want 3", n)
		}
		r := f.sub(t, c, s)
		if num(r, "completed_cycles") != 4 || num(r, "missed_cycles") != 7 ||
			num(r, "next_run") != time.Date(2027, time.August, 12, 6, 0, 0, 0, time.UTC).UnixMilli() {
			t.Fatalf("after catching up: %s", r.Raw)
		}
		if n := f.run(t); n != 0 {
			t.Fatalf("charged %d more", n)
		}
	})
}

// Two workers race over the same subscriptions for two months of daily cycles: each cycle is charged
// exactly once, whichever worker gets it.
func TestTwoWorkersChargeEachCycleOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		start := time.Date(2027, time.September, 1, 0, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{})
		p := f.plan(t, map[string]any{"name": "Daily", "amount": "3.00", "frequency": "DAILY"})
		var customers []string
		for range 5 {
			c, _ := f.customer(t, cardtest.Visa)
			f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
			customers = append(customers, c)
		}
		workers := []*billing.Engine{f.srv.BillingWorker("node-a"), f.srv.BillingWorker("node-b")}
		for range 60 {
			var wg sync.WaitGroup
			for _, w := range workers {
				wg.Go(func() {
					if _, err := w.RunOnce(context.Background()); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			f.clock.Advance(24 * time.Hour)
		}
		// Every cycle 0..59 of every subscription has exactly one approved charge.
		var keys []string
		err := db.Read(context.Background(), func(q store.Querier) error {
			rows, err := q.QueryContext(context.Background(), `SELECT idempotency_key FROM transactions WHERE source = 'RECURRING' AND status = 'APPROVED'`)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k string
				rows.Scan(&k)
				keys = append(keys, k)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		perCycle := map[string]int{}
		for _, k := range keys {
			perCycle[k[:strings.LastIndex(k, "-a")]]++
		}
		if len(keys) != 5*60 || len(perCycle) != 5*60 {
			t.Fatalf("%d approved charges over %d cycles; want 300 and 300", len(keys), len(perCycle))
		}
		for cyc, n := range perCycle {
			if n != 1 {
				t.Errorf("cycle %s charged %d times", cyc, n)
			}
		}
		for _, c := range customers {
			subs := f.must(t, "GET", "/customer-service/customer/"+c, nil).Body["subscriptions"].([]any)
			if n := subs[0].(map[string]any)["completed_cycles"]; n.(interface{ String() string }).String() != "60" {
				t.Errorf("customer %s: completed_cycles %v", c, n)
			}
		}
	})
}

// A try that fails with nothing charged (a processing error) is made again at once under the next key,
// twice at most; only then does the cycle count as declined and wait for the retry schedule.
func TestProcessingErrorIsTriedAgainAtOnce(t *testing.T) {
	t.Parallel()
	start := time.Date(2027, time.June, 1, 8, 0, 0, 0, time.UTC)
	f := newFixture(t, storetest.SQLite(t), start, billing.Config{})
	p := f.plan(t, map[string]any{"name": "Daily", "amount": "1.00", "frequency": "DAILY"})
	c, _ := f.customer(t, cardtest.ProcessingError)
	s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
	f.run(t)
	if got := f.charges(t, time.UTC); len(got) != 3 || got[2] != "2027-06-01 DECLINED 1.00" {
		t.Fatalf("charges: %v; want three declined tries", got)
	}
	r := f.sub(t, c, s)
	if r.Str("status") != "RETRY" || num(r, "failed_attempts") != 1 || num(r, "next_run") != start.Add(24*time.Hour).UnixMilli() {
		t.Fatalf("after three processing errors: %s", r.Raw)
	}
	// Running again before the retry is due repeats nothing.
	if n := f.run(t); n != 0 || len(f.charges(t, time.UTC)) != 3 {
		t.Fatalf("ran %d more", n)
	}
}

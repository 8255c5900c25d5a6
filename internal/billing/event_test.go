package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/event/eventtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// events is the log of the fixture's merchant's events.
func (f *fixture) events(db *store.DB) *eventtest.Log {
	return &eventtest.Log{DB: db, MerchantID: f.m.ID}
}

// customerWithCard makes a customer with a card, and reads its two events.
func (f *fixture) customerWithCard(t *testing.T, log *eventtest.Log, pan string) (customer, card string) {
	t.Helper()
	customer, card = f.customer(t, pan)
	log.Next(t, event.CustomerCreated, event.CardAdded)
	return customer, card
}

// Each change to a plan records its event, with the plan as GET shows it then (a deleted one as GET
// showed it last); a refused change, or one that changes nothing, records none.
func TestPlanEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, time.Date(2027, time.January, 1, 0, 0, 0, 0, time.UTC), billing.Config{})
		log := f.events(db)
		p := f.plan(t, map[string]any{"name": "Gold", "amount": "49.99", "currency": "CAD", "frequency": "MONTHLY"})
		path := "/plan-service/plan/" + p
		eventtest.Shows(t, log.Next(t, event.PlanCreated)[0], f.must(t, "GET", path, nil).Body)
		f.must(t, "PUT", path, map[string]any{"amount": "59.99", "number_of_payments": 12})
		eventtest.Shows(t, log.Next(t, event.PlanUpdated)[0], f.must(t, "GET", path, nil).Body)

		f.must(t, "PUT", path, map[string]any{"amount": "59.99"})                                                  // as it was
		f.do(t, "PUT", path, map[string]any{"frequency": "HOURLY"})                                                // 400
		f.do(t, "POST", "/plan-service/plan", map[string]any{"name": "gold", "amount": "1", "frequency": "DAILY"}) // 409: the name is taken
		f.srv.NewMerchant(t).Do(t, "PUT", path, map[string]any{"name": "Mine"})                                    // 404
		log.Next(t)

		c, _ := f.customerWithCard(t, log, cardtest.Visa)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
		log.Next(t, event.SubscriptionCreated) // the plan's counts change with it: no plan.updated
		if r := f.do(t, "DELETE", path, nil); r.Status != 409 {
			t.Fatalf("delete a plan in use: %d %s", r.Status, r.Raw)
		}
		log.Next(t)
		f.must(t, "PATCH", "/customer-service/customer/"+c+"/subscription/"+s, map[string]any{"status": "CANCELED"})
		log.Next(t, event.SubscriptionCanceled)
		before := f.must(t, "GET", path, nil)
		f.must(t, "DELETE", path, nil)
		eventtest.Shows(t, log.Next(t, event.PlanDeleted)[0], before.Body)
		f.do(t, "DELETE", path, nil) // 404 now
		log.Next(t)
	})
}

// A subscription's life through the API and the billing engine, each step with its event and the
// subscription as GET shows it then: created, charged, updated (amount, card, pause, resume), charged
// again for the last of its payments and expired; a refused change records nothing.
func TestSubscriptionEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, time.Date(2027, time.March, 1, 12, 0, 0, 0, time.UTC), billing.Config{})
		log := f.events(db)
		p := f.plan(t, map[string]any{"name": "Two days", "amount": "3.00", "frequency": "DAILY", "number_of_payments": 2})
		log.Next(t, event.PlanCreated)
		c, _ := f.customerWithCard(t, log, cardtest.Visa)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
		shows := func(e event.Event) {
			t.Helper()
			eventtest.Shows(t, e, f.sub(t, c, s).Body, "customer_lookup_id", c)
		}
		shows(log.Next(t, event.SubscriptionCreated)[0])
		f.run(t)
		shows(log.Next(t, event.TransactionApproved, event.SubscriptionCharged)[1])

		path := "/customer-service/customer/" + c + "/subscription/" + s
		_, mc := f.customerCard(t, c, cardtest.Mastercard)
		log.Next(t, event.CardAdded)
		for _, body := range []map[string]any{{"amount": "4.50"}, {"card_lookup_id": mc}, {"status": "PAUSED"}, {"status": "ACTIVE"}} {
			f.must(t, "PATCH", path, body)
			shows(log.Next(t, event.SubscriptionUpdated)[0])
		}
		f.must(t, "PATCH", path, map[string]any{"amount": "4.50"})                      // as it was
		f.do(t, "PATCH", path, map[string]any{"status": "LATER"})                       // 400
		f.srv.NewMerchant(t).Do(t, "PATCH", path, map[string]any{"status": "CANCELED"}) // 404
		log.Next(t)

		f.clock.Advance(24 * time.Hour)
		f.run(t)
		es := log.Next(t, event.TransactionApproved, event.SubscriptionCharged, event.SubscriptionExpired)
		shows(es[1])
		shows(es[2])
		if r := f.sub(t, c, s); r.Str("status") != "EXPIRED" {
			t.Fatalf("after its last payment: %s", r.Raw)
		}
		f.do(t, "PATCH", path, map[string]any{"status": "CANCELED"}) // 409: final
		log.Next(t)
	})
}

// Declines: each declined charge that will be retried is subscription.payment_failed, the one that
// exhausts the retries subscription.suspended; a "retry now" of the suspended subscription on a good
// card is subscription.charged, and canceling it subscription.canceled.
func TestDeclineEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, time.Date(2027, time.March, 1, 12, 0, 0, 0, time.UTC),
			billing.Config{RetrySchedule: []time.Duration{time.Hour, 2 * time.Hour}})
		log := f.events(db)
		p := f.plan(t, map[string]any{"name": "Weekly", "amount": "5.00", "frequency": "WEEKLY"})
		log.Next(t, event.PlanCreated)
		c, bad := f.customerWithCard(t, log, cardtest.InsufficientFunds)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p, "card_lookup_id": bad})
		log.Next(t, event.SubscriptionCreated)
		shows := func(e event.Event, status string) {
			t.Helper()
			r := f.sub(t, c, s)
			eventtest.Shows(t, e, r.Body, "customer_lookup_id", c)
			if r.Str("status") != status {
				t.Errorf("%s: the subscription is %s, want %s", e.Type, r.Str("status"), status)
			}
		}
		f.run(t)
		shows(log.Next(t, event.TransactionDeclined, event.SubscriptionPaymentFailed)[1], "RETRY")
		f.clock.Advance(time.Hour)
		f.run(t)
		shows(log.Next(t, event.TransactionDeclined, event.SubscriptionPaymentFailed)[1], "RETRY")
		f.clock.Advance(time.Hour)
		f.run(t)
		shows(log.Next(t, event.TransactionDeclined, event.SubscriptionSuspended)[1], "SUSPENDED")
		f.clock.Advance(24 * time.Hour)
		f.run(t)
		log.Next(t) // a suspended subscription is not charged

		path := "/customer-service/customer/" + c + "/subscription/" + s
		_, good := f.customerCard(t, c, cardtest.Visa)
		log.Next(t, event.CardAdded)
		f.must(t, "PATCH", path, map[string]any{"card_lookup_id": good})
		log.Next(t, event.SubscriptionUpdated)
		sub, err := f.srv.Vault().Subscription(context.Background(), db.Reader(), f.m.ID, c, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, charged, err := f.eng.RetryNow(context.Background(), f.m.ID, c, s, billing.RetryOf(sub)); err != nil || !charged {
			t.Fatalf("retry now: %v, %v", charged, err)
		}
		shows(log.Next(t, event.TransactionApproved, event.SubscriptionCharged)[1], "ACTIVE")
		f.must(t, "PATCH", path, map[string]any{"status": "CANCELED"})
		shows(log.Next(t, event.SubscriptionCanceled)[0], "CANCELED")
	})
}

// A charge's outcome and its event are one transaction: while the event cannot be recorded, neither
// is the outcome, and the cycle stays due; once it can, the engine records both, and the customer was
// charged once (the ledger answers the retried charge's key with the charge already made).
func TestChargeEventSharesTheOutcomesTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		start := time.Date(2027, time.March, 1, 12, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{})
		log := f.events(db)
		p := f.plan(t, map[string]any{"name": "Weekly", "amount": "5.00", "frequency": "WEEKLY"})
		c, _ := f.customer(t, cardtest.Visa)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
		log.Next(t, event.PlanCreated, event.CustomerCreated, event.CardAdded, event.SubscriptionCreated)

		allow := eventtest.Refuse(t, db, "subscription.%")
		if n := f.run(t); n != 0 {
			t.Fatalf("%d outcomes recorded while their events are refused", n)
		}
		if r := f.sub(t, c, s); r.Str("status") != "ACTIVE" || num(r, "completed_cycles") != 0 || num(r, "next_run") != start.UnixMilli() {
			t.Fatalf("the outcome was recorded without its event: %s", r.Raw)
		}
		log.Next(t, event.TransactionApproved) // the ledger's, in the charge's own transaction
		allow()
		f.run(t)
		// The retried charge is the ledger's answer to the same idempotency key: no second transaction.
		eventtest.Shows(t, log.Next(t, event.SubscriptionCharged)[0], f.sub(t, c, s).Body, "customer_lookup_id", c)
		if got := f.charges(t, time.UTC); len(got) != 1 {
			t.Fatalf("charges: %v", got)
		}
	})
}

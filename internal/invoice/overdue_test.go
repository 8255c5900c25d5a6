package invoice_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/event/eventtest"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// toronto is the time zone of the clocked fixture's merchant: UTC-5 in December.
var toronto = func() *time.Location {
	loc, err := time.LoadLocation("America/Toronto")
	if err != nil {
		panic(err)
	}
	return loc
}()

// clocked is a server whose clock the test moves and whose billing engine it runs (none runs by
// itself), with a merchant in Toronto.
type clocked struct {
	srv   *servertest.Server
	m     *servertest.Merchant
	db    *store.DB
	clock *clock.Manual
	log   *invoiceLog
}

func newClocked(t *testing.T, db *store.DB, start time.Time) *clocked {
	t.Helper()
	c := &clocked{db: db, clock: clock.NewManual(start)}
	c.srv = servertest.Start(t, db, server.Config{Now: c.clock.Now, NoBillingEngine: true})
	c.m = c.srv.NewMerchant(t)
	tz := toronto.String()
	c.m.Update(t, merchant.Update{Timezone: &tz})
	c.log = &invoiceLog{db: db, merchantID: c.m.ID}
	return c
}

// do calls the API with a fresh token (the clock may have outrun the last one).
func (c *clocked) do(t *testing.T, method, path string, body any) servertest.Response {
	t.Helper()
	c.m.NewToken(t)
	return c.m.Do(t, method, path, body)
}

func (c *clocked) must(t *testing.T, method, path string, body any) servertest.Response {
	t.Helper()
	r := c.do(t, method, path, body)
	want(t, method+" "+path, r, 200)
	return r
}

// at moves the clock to when.
func (c *clocked) at(when time.Time) { c.clock.Advance(when.Sub(c.clock.Now())) }

// run runs the billing engine once.
func (c *clocked) run(t *testing.T) {
	t.Helper()
	if _, err := c.srv.Billing().RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// send creates and sends an invoice of 100.00 CAD due on due to pay@example.com, with the body's
// fields besides, and returns its lookup_id.
func (c *clocked) send(t *testing.T, number, due string, fields map[string]any) string {
	t.Helper()
	body := map[string]any{"invoice_number": number, "currency": "CAD", "due_date": due, "customer_email": "pay@example.com",
		"items": []map[string]any{{"description": "Consulting day", "unit_price": "100.00"}}}
	for k, v := range fields {
		body[k] = v
	}
	id := c.must(t, "POST", base, body).Str("lookup_id")
	c.must(t, "POST", base+"/"+id+"/send", map[string]any{"email": "accounts@example.com"})
	return id
}

func (c *clocked) get(t *testing.T, id string) servertest.Response {
	t.Helper()
	return c.must(t, "GET", base+"/"+id, nil)
}

// reminder is a reminder e-mail in the outbox.
type reminder struct {
	to, subject, text string
	queued            time.Time
}

// reminders are the reminder e-mails in the merchant's outbox, oldest first.
func (c *clocked) reminders(t *testing.T) []reminder {
	t.Helper()
	var out []reminder
	for _, e := range billingtest.Outbox(t, c.db) {
		if e.MerchantID == c.m.ID && strings.HasPrefix(e.Subject, "Reminder:") {
			out = append(out, reminder{to: e.To, subject: e.Subject, text: e.Text, queued: e.CreatedAt})
		}
	}
	return out
}

// invoiceLog reads the merchant's invoice events in the order recorded.
type invoiceLog struct {
	db         *store.DB
	merchantID string
	last       int64
}

// read returns the invoice events recorded since the last read.
func (l *invoiceLog) read(t *testing.T) []event.Event {
	t.Helper()
	rows, err := l.db.Reader().QueryContext(context.Background(), `SELECT id, event_id, type, data, created_at FROM events
		WHERE merchant_id = $1 AND type LIKE 'invoice.%' AND id > $2 ORDER BY id`, l.merchantID, l.last)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []event.Event
	for rows.Next() {
		e := event.Event{MerchantID: l.merchantID}
		var data string
		var at int64
		if err := rows.Scan(&l.last, &e.ID, &e.Type, &data, &at); err != nil {
			t.Fatal(err)
		}
		e.Data, e.CreatedAt = []byte(data), time.UnixMilli(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// next returns the invoice events recorded since the last read, and fails t unless their types are
// want, in that order.
func (l *invoiceLog) next(t *testing.T, want ...string) []event.Event {
	t.Helper()
	out := l.read(t)
	var types []string
	for _, e := range out {
		types = append(types, e.Type)
	}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("invoice events recorded: %v, want %v", types, want)
	}
	return out
}

// A SENT invoice due 2026-12-01 becomes OVERDUE at the start of 2026-12-02 in the merchant's time
// zone (Toronto: 05:00 UTC), not at the end of the day in UTC nor before: once, with one
// invoice.overdue event showing it as GET does, however often the engine runs. It stays payable, and
// paying it makes it PAID (invoice.paid); a paid invoice is left alone by the engine.
func TestOverdueInTheMerchantsTimeZone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := newClocked(t, db, time.Date(2026, time.November, 20, 15, 0, 0, 0, time.UTC))
		cu := c.must(t, "POST", "/customer-service/customer", map[string]any{"email": "vault@example.com", "first_name": "Vault"}).Str("lookup_id")
		card := c.must(t, "POST", "/customer-service/customer/"+cu+"/card", map[string]any{"card_number": cardtest.Visa,
			"card_expiry_month": "12", "card_expiry_year": "40"}).Body["cards"].([]any)[0].(map[string]any)["lookup_id"].(string)
		id := c.send(t, "OD-1", "2026-12-01", map[string]any{"customer_lookup_id": cu, "reminder_days": []int{}})
		c.log.next(t, event.InvoiceCreated, event.InvoiceSent)

		overdue := time.Date(2026, time.December, 2, 0, 0, 0, 0, toronto)
		for _, at := range []time.Time{time.Date(2026, time.December, 1, 0, 0, 0, 0, time.UTC),
			time.Date(2026, time.December, 2, 0, 0, 0, 0, time.UTC), overdue.Add(-time.Millisecond)} {
			c.at(at)
			c.run(t)
			if r := c.get(t, id); r.Str("status") != "SENT" {
				t.Fatalf("at %s, before the due date ended in Toronto: %s", at, r.Raw)
			}
		}
		c.log.next(t)
		c.at(overdue)
		c.run(t)
		r := c.get(t, id)
		fields(t, "overdue", r, "status", "OVERDUE", "updated_at", strconv.FormatInt(overdue.UnixMilli(), 10), "reminders_sent", "0")
		shows(t, c.log.next(t, event.InvoiceOverdue)[0], r.Body)
		for range 3 {
			c.clock.Advance(6 * time.Hour)
			c.run(t)
		}
		c.log.next(t)
		if got := c.reminders(t); len(got) != 0 {
			t.Fatalf("reminders of an invoice without a schedule: %v", got)
		}

		paid := c.must(t, "POST", base+"/"+id+"/pay", map[string]any{"card_lookup_id": card})
		fields(t, "paid after overdue", paid, "status", "PAID")
		shows(t, c.log.next(t, event.InvoicePaid)[0], c.get(t, id).Body)
		c.clock.Advance(30 * 24 * time.Hour)
		c.run(t)
		c.log.next(t)
		fields(t, "paid, a month on", c.get(t, id), "status", "PAID")
	})
}

// The default schedule, with two engines (two nodes of one database) and the server's own running
// at once every six hours for a month: each of three invoices gets its reminder at the start of its
// due date in Toronto and another 7 days later, exactly once each, to the address it was sent to,
// with one invoice.reminder_sent event each showing the invoice as GET does then; and becomes
// OVERDUE once.
func TestDefaultRemindersOnceEach(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := newClocked(t, db, time.Date(2026, time.November, 20, 5, 0, 0, 0, time.UTC))
		var ids []string
		for _, n := range []string{"R-1", "R-2", "R-3"} {
			ids = append(ids, c.send(t, n, "2026-12-01", nil))
			c.log.next(t, event.InvoiceCreated, event.InvoiceSent)
		}
		if r := c.get(t, ids[0]); r.Raw == nil || !strings.Contains(string(r.Raw), `"reminder_days":[0,7]`) {
			t.Fatalf("the default schedule: %s", r.Raw)
		}
		engines := []*billing.Engine{c.srv.Billing(), c.srv.BillingWorker("node-a"), c.srv.BillingWorker("node-b")}
		var reminded, overdue []event.Event
		for range 4 * 30 {
			var wg sync.WaitGroup
			for _, e := range engines {
				wg.Go(func() {
					if _, err := e.RunOnce(context.Background()); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			events := c.log.read(t)
			for _, e := range events {
				switch e.Type {
				case event.InvoiceReminderSent:
					reminded = append(reminded, e)
				case event.InvoiceOverdue:
					overdue = append(overdue, e)
				}
				// Each event shows the invoice as it was right after the run: nothing changes it
				// between two runs but the next run.
				shows(t, e, c.get(t, eventtest.Data(t, e)["lookup_id"].(string)).Body)
			}
			c.clock.Advance(6 * time.Hour)
		}
		first, second := time.Date(2026, time.December, 1, 0, 0, 0, 0, toronto), time.Date(2026, time.December, 8, 0, 0, 0, 0, toronto)
		got := c.reminders(t)
		if len(got) != 6 || len(reminded) != 6 || len(overdue) != 3 {
			t.Fatalf("%d reminder e-mails, %d reminder events and %d overdue events; want 6, 6 and 3: %v", len(got), len(reminded), len(overdue), got)
		}
		// Two engines take different invoices first: the e-mails are in order of time, not of number.
		perNumber := map[string][]reminder{}
		for _, r := range got {
			number := strings.Fields(r.subject)[2]
			perNumber[number] = append(perNumber[number], r)
		}
		for _, number := range []string{"R-1", "R-2", "R-3"} {
			rs := perNumber[number]
			for i, when := range []time.Time{first, second} {
				due := []string{"is due today", "was due on 2026-12-01"}[i]
				if len(rs) != 2 || !rs[i].queued.Equal(when) || rs[i].to != "accounts@example.com" ||
					rs[i].subject != "Reminder: invoice "+number+" from "+c.merchantName(t)+" "+due ||
					!strings.HasPrefix(rs[i].text, "A reminder: invoice "+number+" "+due+".\n") || !strings.Contains(rs[i].text, "/pay") {
					t.Fatalf("reminders of %s: %+v; want reminder %d queued at %s, saying it %s", number, rs, i+1, when, due)
				}
			}
		}
		for _, id := range ids {
			fields(t, "after a month", c.get(t, id), "status", "OVERDUE", "reminders_sent", "2")
		}
	})
}

func (c *clocked) merchantName(t *testing.T) string {
	t.Helper()
	m, err := merchant.Get(context.Background(), c.db.Reader(), c.m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return m.Name
}

// vaultCard makes a vault customer with a card, and returns their lookup_ids.
func (c *clocked) vaultCard(t *testing.T) (customer, card string) {
	t.Helper()
	customer = c.must(t, "POST", "/customer-service/customer", map[string]any{"email": "vault@example.com", "first_name": "Vault"}).Str("lookup_id")
	r := c.must(t, "POST", "/customer-service/customer/"+customer+"/card", map[string]any{"card_number": cardtest.Visa,
		"card_expiry_month": "12", "card_expiry_year": "40"})
	return customer, r.Body["cards"].([]any)[0].(map[string]any)["lookup_id"].(string)
}

// days runs the engine at one in the morning in Toronto of each day from one to last.
func (c *clocked) days(t *testing.T, from, last time.Time) {
	t.Helper()
	for d := from; !d.After(last); d = d.AddDate(0, 0, 1) {
		c.at(time.Date(d.Year(), d.Month(), d.Day(), 1, 0, 0, 0, toronto))
		c.run(t)
	}
}

// queuedOn lists the Toronto dates on which the reminders of the invoice number were queued.
func (c *clocked) queuedOn(t *testing.T, number string) []string {
	t.Helper()
	var out []string
	for _, r := range c.reminders(t) {
		if strings.Fields(r.subject)[2] == number {
			out = append(out, r.queued.In(toronto).Format(time.DateOnly))
		}
	}
	return out
}

func dec(day int) time.Time { return time.Date(2026, time.December, day, 0, 0, 0, 0, toronto) }

// A schedule of the merchant's: reminder_days in any order (kept ascending), before the due date too;
// [] for none; changed by PUT while SENT, when a day already begun is passed over. A schedule that is
// not one is a 400 naming reminder_days, on create and on PUT.
func TestCustomReminderSchedule(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := newClocked(t, db, time.Date(2026, time.November, 20, 12, 0, 0, 0, time.UTC))
		custom := c.send(t, "C-1", "2026-12-10", map[string]any{"reminder_days": []any{2, -3, "0"}})
		if r := c.get(t, custom); !strings.Contains(string(r.Raw), `"reminder_days":[-3,0,2]`) {
			t.Fatalf("the schedule as GET shows it: %s", r.Raw)
		}
		none := c.send(t, "C-2", "2026-12-10", map[string]any{"reminder_days": []int{}})
		changed := c.send(t, "C-3", "2026-12-10", nil)
		c.days(t, dec(1), dec(10))
		// C-3 had its due date's reminder; its schedule changes at noon: day -1 has begun (passed
		// over), days 1 and 3 have not.
		c.at(time.Date(2026, time.December, 10, 12, 0, 0, 0, toronto))
		r := c.must(t, "PUT", base+"/"+changed, map[string]any{"reminder_days": []int{3, -1, 1}})
		if !strings.Contains(string(r.Raw), `"reminder_days":[-1,1,3]`) || r.Str("status") != "SENT" {
			t.Fatalf("PUT reminder_days: %s", r.Raw)
		}
		c.days(t, dec(11), dec(31))
		for number, want := range map[string]string{"C-1": "2026-12-07 2026-12-10 2026-12-12", "C-2": "",
			"C-3": "2026-12-10 2026-12-11 2026-12-13"} {
			if got := strings.Join(c.queuedOn(t, number), " "); got != want {
				t.Errorf("reminders of %s on %q, want %q", number, got, want)
			}
		}
		fields(t, "no schedule", c.get(t, none), "status", "OVERDUE", "reminders_sent", "0")
		fields(t, "custom", c.get(t, custom), "status", "OVERDUE", "reminders_sent", "3")

		eleven := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
		draft := c.must(t, "POST", base, map[string]any{"items": []map[string]any{{"description": "x", "unit_price": 1}}}).Str("lookup_id")
		for _, bad := range []any{[]int{1, 1}, []int{366}, []int{-366}, []string{"x"}, []any{1.5}, []any{true}, []any{nil},
			[]any{[]int{1}}, map[string]int{"a": 1}, "7", 7, eleven} {
			body := map[string]any{"reminder_days": bad, "items": []map[string]any{{"description": "x", "unit_price": 1}}}
			want(t, "create with reminder_days "+fmtAny(bad), c.do(t, "POST", base, body),
				400, "invalid_request", "reminder_days")
			want(t, "PUT reminder_days", c.do(t, "PUT", base+"/"+draft, map[string]any{"reminder_days": bad}), 400, "invalid_request", "reminder_days")
		}
	})
}

func fmtAny(v any) string { b, _ := json.Marshal(v); return string(b) }

// No reminder for a PAID or CANCELLED invoice, nor after its payment: one paid before its due date,
// one cancelled, one paid after its first reminder (OVERDUE by then) are left alone for the rest of
// the month.
func TestNoReminderAfterPaymentOrCancel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := newClocked(t, db, time.Date(2026, time.November, 20, 12, 0, 0, 0, time.UTC))
		cu, card := c.vaultCard(t)
		early := c.send(t, "P-1", "2026-12-01", map[string]any{"customer_lookup_id": cu})
		cancelled := c.send(t, "P-2", "2026-12-01", nil)
		late := c.send(t, "P-3", "2026-12-01", map[string]any{"customer_lookup_id": cu})
		c.log.next(t, event.InvoiceCreated, event.InvoiceSent, event.InvoiceCreated, event.InvoiceSent, event.InvoiceCreated, event.InvoiceSent)
		c.at(time.Date(2026, time.November, 25, 12, 0, 0, 0, toronto))
		fields(t, "paid early", c.must(t, "POST", base+"/"+early+"/pay", map[string]any{"card_lookup_id": card}), "status", "PAID")
		fields(t, "cancelled", c.must(t, "PUT", base+"/"+cancelled, map[string]any{"status": "CANCELLED"}), "status", "CANCELLED")
		c.log.next(t, event.InvoicePaid, event.InvoiceCanceled)
		c.days(t, dec(1), dec(3))
		c.log.next(t, event.InvoiceReminderSent, event.InvoiceOverdue)
		fields(t, "paid late", c.must(t, "POST", base+"/"+late+"/pay", map[string]any{"card_lookup_id": card}), "status", "PAID")
		c.log.next(t, event.InvoicePaid)
		c.days(t, dec(4), dec(31))
		c.log.next(t)
		for number, want := range map[string]string{"P-1": "", "P-2": "", "P-3": "2026-12-01"} {
			if got := strings.Join(c.queuedOn(t, number), " "); got != want {
				t.Errorf("reminders of %s on %q, want %q", number, got, want)
			}
		}
		fields(t, "paid early", c.get(t, early), "status", "PAID", "reminders_sent", "0")
		fields(t, "cancelled", c.get(t, cancelled), "status", "CANCELLED", "reminders_sent", "0")
		fields(t, "paid late", c.get(t, late), "status", "PAID", "reminders_sent", "1")
	})
}

// Reminders whose days began while no engine ran go out as one when it runs again, which says the
// invoice was due; an invoice sent after a reminder's day began does not get that reminder.
func TestDowntimeCatchesUpWithOneReminder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := newClocked(t, db, time.Date(2026, time.November, 20, 12, 0, 0, 0, time.UTC))
		down := c.send(t, "D-1", "2026-12-01", map[string]any{"reminder_days": []int{0, 3, 7}})
		late := c.must(t, "POST", base, map[string]any{"invoice_number": "D-2", "due_date": "2026-12-01", "customer_email": "late@example.com",
			"items": []map[string]any{{"description": "x", "unit_price": 1}}}).Str("lookup_id")
		c.log.next(t, event.InvoiceCreated, event.InvoiceSent, event.InvoiceCreated)
		c.at(time.Date(2026, time.December, 3, 9, 0, 0, 0, toronto)) // down since before D-1's first reminder
		fields(t, "sent after its due date", c.must(t, "POST", base+"/"+late+"/send", map[string]any{}), "status", "SENT")
		c.log.next(t, event.InvoiceSent)
		c.at(time.Date(2026, time.December, 9, 10, 0, 0, 0, toronto)) // back up, after all three of D-1's days
		c.run(t)
		es := c.log.next(t, event.InvoiceOverdue, event.InvoiceReminderSent, event.InvoiceOverdue, event.InvoiceReminderSent)
		if eventtest.Data(t, es[1])["lookup_id"] != down || eventtest.Data(t, es[3])["lookup_id"] != late {
			t.Fatalf("reminders of %v and %v", eventtest.Data(t, es[1])["lookup_id"], eventtest.Data(t, es[3])["lookup_id"])
		}
		c.days(t, dec(10), dec(31))
		c.log.next(t)
		// D-2's day 0 began before it was sent: only its day 7 (passed while down too) is sent.
		for number, want := range map[string]string{"D-1": "2026-12-09", "D-2": "2026-12-09"} {
			if got := strings.Join(c.queuedOn(t, number), " "); got != want {
				t.Errorf("reminders of %s on %q, want %q", number, got, want)
			}
		}
		if rs := c.reminders(t); len(rs) != 2 || !strings.HasSuffix(rs[0].subject, " was due on 2026-12-01") || rs[1].to != "late@example.com" {
			t.Fatalf("reminders: %+v", rs)
		}
		fields(t, "after downtime", c.get(t, down), "status", "OVERDUE", "reminders_sent", "1")
	})
}

// An invoice's new status and its reminder are recorded with their events, in one transaction: while
// the events cannot be written, the invoice stays SENT and no reminder is queued; once they can, the
// next run records both, once, the overdue first.
func TestOverdueAndReminderShareTheirEventsTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := newClocked(t, db, time.Date(2026, time.November, 20, 12, 0, 0, 0, time.UTC))
		id := c.send(t, "T-1", "2026-12-01", map[string]any{"reminder_days": []int{1}})
		c.log.next(t, event.InvoiceCreated, event.InvoiceSent)
		allow := eventtest.Refuse(t, db, "invoice.%")
		c.at(dec(2))
		c.run(t) // the invoice's failure is logged and left to the next run
		if r := c.get(t, id); r.Str("status") != "SENT" || r.Num("reminders_sent") != "0" || len(c.reminders(t)) != 0 {
			t.Fatalf("recorded without its events: %s, %d reminders", r.Raw, len(c.reminders(t)))
		}
		allow()
		c.run(t)
		c.run(t)
		es := c.log.next(t, event.InvoiceOverdue, event.InvoiceReminderSent)
		r := c.get(t, id)
		fields(t, "after", r, "status", "OVERDUE", "reminders_sent", "1")
		shows(t, es[1], r.Body)
		if d := eventtest.Data(t, es[0]); d["status"] != "OVERDUE" || d["reminders_sent"].(json.Number).String() != "0" {
			t.Fatalf("the overdue event shows the invoice before its reminder: %v", d)
		}
		if n := len(c.reminders(t)); n != 1 {
			t.Fatalf("%d reminders", n)
		}
	})
}

package invoice

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
)

// Overdue invoices and reminders: a sent invoice past its due date becomes OVERDUE, by the billing
// engine's leased scheduler, once across nodes; reminders go out on a schedule the merchant sets
// (by default on the due date and 7 days after), each once.
//
// Days are the merchant's: a due date is a day of the merchant's time zone (merchant.Settings's
// Location, the zone its subscriptions bill by), so an invoice due 2026-12-01 is overdue from the
// start of 2026-12-02 there, and the reminder of day d goes out from the start of the day d days
// after the due date there (before it, for a negative d).
//
// Each invoice keeps when the billing engine next has something to do for it (next_check, written by
// every save from its status, due date and schedule); the engine's run reads the invoices whose time
// has come through the index of that column (RunDue). A reminder is recorded in the transaction that
// queues its e-mail in the outbox: the invoice's reminded_until moves to now, and a reminder whose
// day began at or before it is never sent again. Several days that began while no engine ran (the
// server down) are therefore one reminder, and an invoice sent (or a schedule changed) after a
// reminder's day began does not get that reminder: the e-mail just sent says what it would.

// DefaultReminderDays is the reminder schedule of an invoice created without reminder_days: on its due
// date and 7 days after.
var DefaultReminderDays = []int{0, 7}

// Limits of reminder_days.
const (
	maxReminders   = 10
	maxReminderDay = 365
)

// parseReminderDays reads reminder_days: an array of at most maxReminders whole numbers of days (JSON
// numbers or numeric strings) from -maxReminderDay to maxReminderDay, each once. It is kept in
// ascending order. Every error is a 400 naming reminder_days.
func parseReminderDays(raw json.RawMessage) ([]int, error) {
	var vs []field.Value
	if err := json.Unmarshal(raw, &vs); err != nil {
		return nil, fault.Invalid("reminder_days", "reminder_days must be an array of days relative to due_date, such as [0, 7]")
	}
	if len(vs) > maxReminders {
		return nil, fault.Invalid("reminder_days", "reminder_days holds at most %d days", maxReminders)
	}
	days := make([]int, 0, len(vs))
	for _, v := range vs {
		s, err := v.Str("reminder_days")
		if err != nil {
			return nil, err
		}
		d, err := strconv.Atoi(s)
		if err != nil || d < -maxReminderDay || d > maxReminderDay {
			return nil, fault.Invalid("reminder_days", "reminder_days are whole numbers of days from -%d (before due_date) to %d (after it)",
				maxReminderDay, maxReminderDay)
		}
		if slices.Contains(days, d) {
			return nil, fault.Invalid("reminder_days", "reminder_days names day %d twice", d)
		}
		days = append(days, d)
	}
	slices.Sort(days)
	return days, nil
}

// dayStart is the start of the day d days after date (YYYY-MM-DD) in loc; false when there is no date.
func dayStart(date string, d int, loc *time.Location) (time.Time, bool) {
	t, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return time.Time{}, false
	}
	return time.Date(t.Year(), t.Month(), t.Day()+d, 0, 0, 0, 0, loc), true
}

// overdueAt is when inv, SENT and unpaid, becomes OVERDUE: the start of the day after its due date in
// loc, its merchant's time zone. False when it has no due date: it is never overdue.
func (inv Invoice) overdueAt(loc *time.Location) (time.Time, bool) {
	return dayStart(inv.DueDate, 1, loc)
}

// reminderDue reports whether a reminder of inv is due at now: a day of its schedule began after its
// reminders were last taken care of, and at or before now.
func (inv Invoice) reminderDue(loc *time.Location, now time.Time) bool {
	for _, d := range inv.ReminderDays {
		if at, ok := dayStart(inv.DueDate, d, loc); ok && at.After(inv.RemindedUntil) && !at.After(now) {
			return true
		}
	}
	return false
}

// nextCheck is when the billing engine next has something to do for inv: the earlier of its becoming
// overdue and its next reminder's day, in loc; zero for nothing (a DRAFT, PAID or CANCELLED invoice,
// no due date, no reminder left).
func (inv Invoice) nextCheck(loc *time.Location) time.Time {
	if inv.Status != Sent && inv.Status != Overdue {
		return time.Time{}
	}
	var next time.Time
	if at, ok := inv.overdueAt(loc); ok && inv.Status == Sent {
		next = at
	}
	for _, d := range inv.ReminderDays { // ascending: the first not taken care of is the next
		if at, ok := dayStart(inv.DueDate, d, loc); ok && at.After(inv.RemindedUntil) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			break
		}
	}
	return next
}

// passedOver is inv's reminded_until once every reminder whose day began by now is passed over.
func passedOver(inv Invoice, now time.Time) time.Time {
	if now.After(inv.RemindedUntil) {
		return now
	}
	return inv.RemindedUntil
}

// dueBatch is how many due invoices RunDue reads at a time.
const dueBatch = 100

// RunDue does what has come due at now for the invoices of every merchant: a SENT invoice past its due
// date becomes OVERDUE (invoice.overdue), and a reminder whose day has begun is e-mailed through the
// outbox, to the address the invoice was last sent to (invoice.reminder_sent). It is a task of the
// billing engine (billing.Config.Tasks), run by every run of the engine on every node that runs one.
// Each invoice is taken care of in one transaction, which on PostgreSQL holds its row (FOR UPDATE
// SKIP LOCKED: another node running at once passes it by, and finds it done afterwards), so it is done
// once across nodes and restarts; one that fails is logged and looked at again by the next run.
func (s *Service) RunDue(ctx context.Context, now time.Time) error {
	now = now.Truncate(time.Millisecond)
	var afterCheck, afterID int64 = -1, 0
	for {
		var ids, checks []int64
		err := s.db.Read(ctx, func(q store.Querier) error {
			rows, err := q.QueryContext(ctx, dueSQL, now.UnixMilli(), afterCheck, afterID, dueBatch)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, check int64
				if err := rows.Scan(&id, &check); err != nil {
					return err
				}
				ids, checks = append(ids, id), append(checks, check)
			}
			return rows.Err()
		})
		if err != nil {
			return err
		}
		for i, id := range ids {
			if err := s.handleDue(ctx, id, now); err != nil {
				s.log.WarnContext(ctx, "invoice: overdue or reminder not recorded, will retry", "invoice_id", id, "err", err)
			}
			afterCheck, afterID = checks[i], id
		}
		if len(ids) < dueBatch {
			return nil
		}
	}
}

// dueSQL lists the invoices whose next check has come ($1), after the cursor ($2, $3: one that failed
// is not read again in the same run), through invoices_next_check (migration 00046).
const dueSQL = `SELECT id, next_check FROM invoices WHERE next_check <= $1 AND (next_check, id) > ($2, $3)
	ORDER BY next_check, id LIMIT $4`

// handleDue does what has come due at now for one invoice, in one transaction: the status, the
// reminder's e-mail, their events and the next check.
func (s *Service) handleDue(ctx context.Context, id int64, now time.Time) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		q := `SELECT ` + columns + ` FROM invoices WHERE id = $1 AND next_check <= $2`
		if tx.Dialect() == store.Postgres {
			q += ` FOR UPDATE SKIP LOCKED` // another node's transaction holds it: that one does the work
		}
		inv, err := scan(tx.QueryRowContext(ctx, q, id, now.UnixMilli()))
		if errors.Is(err, sql.ErrNoRows) {
			return nil // done meanwhile by another node, or rescheduled by a change
		}
		if err != nil {
			return err
		}
		// Through the transaction, not the merchant cache, whose miss would wait for the read pool
		// inside this write (docs/design/store.md, "Writes inside writes").
		m, err := merchant.Get(ctx, tx, inv.MerchantID)
		if err != nil {
			return err
		}
		loc := m.Location()
		if at, ok := inv.overdueAt(loc); ok && inv.Status == Sent && !now.Before(at) {
			inv.Status, inv.UpdatedAt = Overdue, now
			if err := s.record(ctx, tx, event.InvoiceOverdue, inv, now); err != nil {
				return err
			}
		}
		if (inv.Status == Sent || inv.Status == Overdue) && inv.reminderDue(loc, now) {
			// One reminder, however many of its days began since the last: they were missed
			// while no engine ran, and one e-mail says what each would.
			inv.RemindedUntil = now
			if inv.SentTo != "" {
				if err := s.open(&inv); err != nil {
					return err
				}
				brand, err := branding.Get(ctx, tx, m.ID)
				if err != nil {
					return err
				}
				if err := billing.Queue(ctx, tx, m.ID, s.reminder(m, brand, inv, now), now); err != nil {
					return err
				}
				inv.RemindersSent++
				inv.UpdatedAt = now
				if err := s.record(ctx, tx, event.InvoiceReminderSent, inv, now); err != nil {
					return err
				}
			}
		}
		return save(ctx, tx, inv, loc)
	})
}

// reminder is the e-mail of a reminder of inv at now: the invoice's own e-mail, whose subject and
// first line say when it is, or was, due.
func (s *Service) reminder(m merchant.Merchant, brand branding.Branding, inv Invoice, now time.Time) billing.Message {
	when := "was due on " + inv.DueDate
	switch today := now.In(m.Location()).Format(time.DateOnly); {
	case today < inv.DueDate:
		when = "is due on " + inv.DueDate
	case today == inv.DueDate:
		when = "is due today"
	}
	msg := s.message(m, brand, inv, SendRequest{To: inv.SentTo,
		Subject: fmt.Sprintf("Reminder: invoice %s from %s %s", inv.Number, m.Name, when),
		Message: fmt.Sprintf("A reminder: invoice %s %s.", inv.Number, when)})
	msg.Kind = billing.KindReminder
	return msg
}

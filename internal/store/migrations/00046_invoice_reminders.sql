-- +goose Up
-- Overdue invoices and their reminders (internal/invoice, overdue.go).
-- reminder_days is the invoice's reminder schedule, a JSON array of days relative to its due date
-- (0 the due date, negative before it), in ascending order. reminded_until is when reminders were
-- last taken care of: a reminder whose day began at or before it was sent or passed over (the last
-- sending of the invoice, or the last reminder), so each goes out once. sent_to is the address the
-- invoice was last sent to, where reminders go. next_check is when the billing engine next has
-- something to do for the invoice (its due date passing, a reminder's day beginning), NULL when
-- nothing: the engine finds its work through invoices_next_check, which holds only those rows.
ALTER TABLE invoices ADD COLUMN reminder_days TEXT NOT NULL DEFAULT '[0,7]';
ALTER TABLE invoices ADD COLUMN reminders_sent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE invoices ADD COLUMN reminded_until BIGINT;
ALTER TABLE invoices ADD COLUMN sent_to TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN next_check BIGINT;
-- Invoices sent before: reminded at their customer's address from their last sending on; the engine
-- looks at each once, and schedules it.
UPDATE invoices SET sent_to = customer_email, reminded_until = sent_at WHERE sent_at IS NOT NULL;
UPDATE invoices SET next_check = 0 WHERE status IN ('SENT', 'OVERDUE') AND due_date <> '';
CREATE INDEX invoices_next_check ON invoices (next_check, id) WHERE next_check IS NOT NULL;

-- +goose Down
DROP INDEX invoices_next_check;
ALTER TABLE invoices DROP COLUMN next_check;
ALTER TABLE invoices DROP COLUMN sent_to;
ALTER TABLE invoices DROP COLUMN reminded_until;
ALTER TABLE invoices DROP COLUMN reminders_sent;
ALTER TABLE invoices DROP COLUMN reminder_days;

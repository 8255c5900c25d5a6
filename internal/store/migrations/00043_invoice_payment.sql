-- +goose Up
-- Paying an invoice. intent_id is the payment intent the invoice is paid through
-- now: at most one live intent per invoice, whichever page or API call pays it (internal/invoice,
-- pay.go). It changes only by a compare-and-set from the one before, and an intent is replaced only
-- once canceled, so two charges of one invoice cannot both run. payment_info is the JSON object the
-- API shows once the invoice is PAID: transaction id, method, date and amount, set in the transaction
-- that settles the intent's charge.
ALTER TABLE invoices ADD COLUMN intent_id TEXT;
ALTER TABLE invoices ADD COLUMN payment_info TEXT;
CREATE INDEX invoices_intent ON invoices (intent_id);

-- +goose Down
DROP INDEX invoices_intent;
ALTER TABLE invoices DROP COLUMN payment_info;
ALTER TABLE invoices DROP COLUMN intent_id;

-- +goose Up
-- The locale (BCP 47 tag) a merchant's amounts are shown in to people: dashboard, hosted pages,
-- invoices and receipts (money.Display). Merchants made before read amounts as en-US shows them.
ALTER TABLE merchants ADD COLUMN locale TEXT NOT NULL DEFAULT 'en-US';

-- +goose Down
ALTER TABLE merchants DROP COLUMN locale;

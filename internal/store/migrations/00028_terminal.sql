-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- The virtual terminal: a payment taken over the telephone or by mail, which the
-- processor is told is a mail/telephone order (ISO 8583 field 25 = 08, Stripe's MOTO flag) and which
-- is never sent to 3-D Secure (the cardholder is not there to be challenged).
ALTER TABLE transactions ADD COLUMN mail_order BOOLEAN NOT NULL DEFAULT FALSE;

-- Hosted-page sessions the dashboard creates for the merchant's staff, rather than a shop's server
-- through the v1 API: purpose is NULL for the API's, 'terminal' for a virtual-terminal payment, and
-- 'save_card' for the card form that stores a card on a customer without a payment (intent_id '').
-- dashboard is what the dashboard asked (JSON: the order id, the customer to store the card on) and
-- what became of storing the card.
ALTER TABLE checkout_sessions ADD COLUMN purpose TEXT;
ALTER TABLE checkout_sessions ADD COLUMN dashboard TEXT;

-- +goose Down
ALTER TABLE checkout_sessions DROP COLUMN dashboard;
ALTER TABLE checkout_sessions DROP COLUMN purpose;
ALTER TABLE transactions DROP COLUMN mail_order;

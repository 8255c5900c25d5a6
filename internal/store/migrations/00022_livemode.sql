-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Whether a payment intent or payment method was created while its merchant's payments went to a live
-- processor account, so that the v1 API's livemode tells the truth. Existing rows were all taken
-- by the simulator.
ALTER TABLE payment_intents ADD COLUMN livemode BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE payment_methods ADD COLUMN livemode BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE payment_methods DROP COLUMN livemode;
ALTER TABLE payment_intents DROP COLUMN livemode;

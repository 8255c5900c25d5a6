-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Every charge the billing engine makes of a subscription's cycle, written in the transaction that
-- records its outcome: the history of billed cycles on the dashboard's subscription page, every
-- billed cycle with its transaction. Charges made before this table
-- existed are in the ledger only (source RECURRING).
CREATE TABLE subscription_charges (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription_id BIGINT NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
    cycle           INTEGER NOT NULL,              -- the cycle charged (0 is the start)
    attempt         INTEGER NOT NULL,              -- 1 for the cycle's first charge, one more after each decline
    transaction_id  TEXT,                          -- the ledger's; NULL when nothing reached it (the card was deleted)
    status          TEXT NOT NULL,                 -- APPROVED | DECLINED
    amount          BIGINT NOT NULL,
    currency        TEXT NOT NULL,
    scale           INTEGER NOT NULL,
    message         TEXT NOT NULL DEFAULT '',      -- the processor's answer, or why nothing was charged
    created_at      BIGINT NOT NULL
);
CREATE INDEX subscription_charges_subscription ON subscription_charges (subscription_id, id);

-- The dashboard lists a merchant's subscriptions newest first, all of them or those in one status.
CREATE INDEX subscriptions_merchant ON subscriptions (merchant_id, id);
CREATE INDEX subscriptions_merchant_status ON subscriptions (merchant_id, status, id);
-- and its payment intents in one status.
CREATE INDEX payment_intents_merchant_status ON payment_intents (merchant_id, status, id);

-- +goose Down
DROP INDEX payment_intents_merchant_status;
DROP INDEX subscriptions_merchant_status;
DROP INDEX subscriptions_merchant;
DROP TABLE subscription_charges;

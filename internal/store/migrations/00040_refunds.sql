-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Refunds of the v1 payments API. A refund is a money operation on its payment
-- intent like a capture: claimed on the intent under the next attempt number, carried out by the
-- ledger as a REFUND of the transaction that captured the money under that attempt's idempotency key,
-- and settled on the intent and here in one transaction. The ledger's row holds the money; this one
-- holds what the v1 API shows of it.
CREATE TABLE refunds (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    refund_id       TEXT NOT NULL UNIQUE,          -- "re_" + 24 characters [A-Z2-7]
    merchant_id     TEXT NOT NULL REFERENCES merchants (id),
    intent_id       BIGINT NOT NULL REFERENCES payment_intents (id),
    attempt         INTEGER NOT NULL,              -- the intent's attempt that carries it out: its ledger key
    amount          BIGINT NOT NULL,               -- minor units of currency
    currency        TEXT NOT NULL,                 -- ISO 4217, upper case (shown lower case)
    reason          TEXT,                          -- duplicate | fraudulent | requested_by_customer
    metadata        TEXT NOT NULL,                 -- JSON object of strings
    status          TEXT NOT NULL,                 -- pending | succeeded | failed | canceled
    charge          TEXT NOT NULL,                 -- transaction_id of the sale or capture refunded
    transaction_id  TEXT,                          -- the ledger's REFUND, once it has an outcome
    failure_reason  TEXT,                          -- the ledger's decline code of a failed refund
    idempotency_key TEXT,                          -- the request's, scoped to its API key: a retry finds this refund
    client_id       TEXT,                          -- the API key that asked
    livemode        BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE UNIQUE INDEX refunds_attempt ON refunds (intent_id, attempt);
CREATE INDEX refunds_merchant ON refunds (merchant_id, id);
CREATE INDEX refunds_key ON refunds (merchant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- latest_charge of a payment intent is the transaction that captured the money: for manual capture,
-- the capture, no longer the authorization (whose row charge_id named). Intents captured before this
-- migration are pointed at their capture, which refunds act on.
UPDATE payment_intents SET
    latest_charge = (SELECT c.transaction_id FROM transactions c WHERE c.parent_id = payment_intents.charge_id
        AND c.kind = 'CAPTURE' AND c.status = 'APPROVED'),
    charge_id = (SELECT c.id FROM transactions c WHERE c.parent_id = payment_intents.charge_id
        AND c.kind = 'CAPTURE' AND c.status = 'APPROVED')
    WHERE capture_method = 'manual' AND status = 'succeeded' AND charge_id IS NOT NULL;

-- +goose Down
UPDATE payment_intents SET
    latest_charge = (SELECT c.parent_transaction_id FROM transactions c WHERE c.id = payment_intents.charge_id),
    charge_id = (SELECT c.parent_id FROM transactions c WHERE c.id = payment_intents.charge_id)
    WHERE capture_method = 'manual' AND status = 'succeeded' AND charge_id IS NOT NULL;
DROP TABLE refunds;

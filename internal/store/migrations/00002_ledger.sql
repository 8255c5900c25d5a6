-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Payment settings of a merchant.
ALTER TABLE merchants ADD COLUMN currencies TEXT NOT NULL DEFAULT 'CAD USD';    -- accepted, space-separated
ALTER TABLE merchants ADD COLUMN max_amount_cents BIGINT NOT NULL DEFAULT 99999999; -- largest amount, in hundredths of a major unit
ALTER TABLE merchants ADD COLUMN simulator_profile TEXT NOT NULL DEFAULT 'standard';

-- The ledger: one row per card operation. A capture, refund or void is a row of its own whose
-- parent_id names the transaction it acts on.
CREATE TABLE transactions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    transaction_id  TEXT NOT NULL UNIQUE,            -- 20 characters [A-Z2-7]
    merchant_id     TEXT NOT NULL REFERENCES merchants (id),
    kind            TEXT NOT NULL,                   -- SALE | AUTHORIZATION | CAPTURE | REFUND | VOID
    parent_id       BIGINT REFERENCES transactions (id),
    status          TEXT NOT NULL,                   -- PENDING | APPROVED | DECLINED
    amount          BIGINT NOT NULL,                 -- minor units of currency
    currency        TEXT NOT NULL,
    scale           INTEGER NOT NULL,                -- the currency's minor-unit digits
    -- SALE, CAPTURE: the sum of refunds approved or pending. AUTHORIZATION: the capture approved or
    -- pending. Reserved before the processor is called, released when it declines.
    reserved        BIGINT NOT NULL DEFAULT 0,
    -- AUTHORIZATION: CAPTURE or VOID once one is approved or pending; NULL while the hold is open.
    closed_by       TEXT,
    message         TEXT NOT NULL DEFAULT '',
    decline_code    TEXT,
    processor_ref   TEXT,
    card_type       TEXT NOT NULL DEFAULT '',
    card_prefix     TEXT NOT NULL DEFAULT '',        -- first six digits at most (PCI DSS 3.4.1)
    card_suffix     TEXT NOT NULL DEFAULT '',
    test_mode       BOOLEAN NOT NULL DEFAULT FALSE,
    source          TEXT NOT NULL,                   -- E_COMMERCE | RECURRING | HPP
    email           TEXT,
    first_name      TEXT,
    last_name       TEXT,
    company         TEXT,
    telephone       TEXT,
    address1        TEXT,
    address2        TEXT,
    city            TEXT,
    province        TEXT,
    country         TEXT,
    postal_code     TEXT,
    custom_id       TEXT,
    invoice_id      TEXT,
    order_id        TEXT,
    description     TEXT,
    client_id       TEXT,
    request_id      TEXT,
    idempotency_key TEXT,
    lease_until     BIGINT,                          -- PENDING: when recovery may take the attempt over
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX transactions_merchant ON transactions (merchant_id, id);
CREATE UNIQUE INDEX transactions_idempotency ON transactions (merchant_id, idempotency_key);
CREATE INDEX transactions_parent ON transactions (parent_id);
CREATE INDEX transactions_pending ON transactions (lease_until) WHERE status = 'PENDING';

-- Who did what to which money, when: one row per money operation and per decline. No card data.
CREATE TABLE audit_log (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id    TEXT NOT NULL,
    client_id      TEXT,
    operation      TEXT NOT NULL,                    -- sale | authorize | capture | refund | void | recover
    transaction_id TEXT,
    amount         BIGINT,
    currency       TEXT,
    outcome        TEXT NOT NULL,                    -- APPROVED | DECLINED | FAILED | REJECTED
    detail         TEXT NOT NULL DEFAULT '',
    request_id     TEXT,
    created_at     BIGINT NOT NULL
);
CREATE INDEX audit_log_merchant ON audit_log (merchant_id, id);

-- Idempotency-Key records of POST requests, per merchant, kept 24 hours.
CREATE TABLE idempotency_keys (
    merchant_id  TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    request_hash BLOB NOT NULL,
    status       INTEGER,                            -- the response's status; NULL while the first request runs
    body         BLOB,
    locked_until BIGINT NOT NULL,                    -- a running request that is this old died: take it over
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (merchant_id, idem_key)
);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE audit_log;
DROP TABLE transactions;
ALTER TABLE merchants DROP COLUMN simulator_profile;
ALTER TABLE merchants DROP COLUMN max_amount_cents;
ALTER TABLE merchants DROP COLUMN currencies;

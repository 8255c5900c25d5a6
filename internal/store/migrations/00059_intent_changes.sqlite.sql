-- +goose Up
-- A change of a payment intent is recorded once: its row here is the intent's history, the record of
-- the operation for the activity history (when no staff user asked: a staff user's is in audit_log,
-- and operation is NULL here) and the source of its payment_intent.* event (type, with data, the
-- intent as the API showed it after the change; NULL for a change with no event). Nothing else is
-- written for it: the events API and the webhook engine read the events from here, in commit order,
-- as they read the transaction.* events from the ledger (migration 00057).
--
-- event_seq is the change's place in its merchant's commit order, as an event's: on PostgreSQL its
-- transaction's (store.XidSQL), on SQLite the merchant's ledger head, the single writer's order.
CREATE TABLE payment_intent_changes (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id    TEXT NOT NULL,
    intent_id      TEXT NOT NULL,
    event_seq      BIGINT NOT NULL,
    type           TEXT,
    data           TEXT,
    operation      TEXT,
    client_id      TEXT,
    transaction_id TEXT,
    amount         BIGINT NOT NULL,
    currency       TEXT NOT NULL,
    status         TEXT NOT NULL,
    request_id     TEXT,
    created_at     BIGINT NOT NULL
);
-- The events, in the merchant's order of events; the records, newest first; a transaction's trail.
CREATE INDEX payment_intent_changes_seq ON payment_intent_changes (merchant_id, event_seq, id) WHERE type IS NOT NULL;
CREATE INDEX payment_intent_changes_record ON payment_intent_changes (merchant_id, id) WHERE operation IS NOT NULL;
CREATE INDEX payment_intent_changes_transaction ON payment_intent_changes (merchant_id, transaction_id)
    WHERE transaction_id IS NOT NULL AND operation IS NOT NULL;

-- Each endpoint's cursor in its merchant's changes: (event_seq, id) of the last it has made a delivery
-- of or passed over. The table is new: every endpoint starts before its first row.
ALTER TABLE webhook_endpoints ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN change_id BIGINT NOT NULL DEFAULT 0;

-- A delivery delivers a row of events (event_id), a transaction's outcome (transaction_ref) or a
-- change of a payment intent (change_ref): exactly one of the three. SQLite cannot change a CHECK
-- constraint: the table is rebuilt, with webhook_attempts, as migration 00057 did, keeping the
-- AUTOINCREMENT counters.
CREATE TABLE webhook_deliveries_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id     BIGINT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id        BIGINT REFERENCES events (id) ON DELETE CASCADE,
    transaction_ref BIGINT,                          -- transactions.id of a derived event
    change_ref      BIGINT,                          -- payment_intent_changes.id of a derived event
    merchant_id     TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'PENDING', -- PENDING | SUCCEEDED | FAILED
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt    BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    CHECK ((event_id IS NOT NULL) + (transaction_ref IS NOT NULL) + (change_ref IS NOT NULL) = 1)
);
INSERT INTO webhook_deliveries_new (id, endpoint_id, event_id, transaction_ref, merchant_id, status, attempts, next_attempt, created_at, updated_at)
    SELECT id, endpoint_id, event_id, transaction_ref, merchant_id, status, attempts, next_attempt, created_at, updated_at FROM webhook_deliveries;
CREATE TABLE webhook_attempts_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id  BIGINT NOT NULL REFERENCES webhook_deliveries_new (id) ON DELETE CASCADE,
    status_code  INTEGER NOT NULL,
    latency_ms   INTEGER NOT NULL,
    response     TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL
);
INSERT INTO webhook_attempts_new SELECT id, delivery_id, status_code, latency_ms, response, error, created_at FROM webhook_attempts;
DELETE FROM sqlite_sequence WHERE name IN ('webhook_deliveries_new', 'webhook_attempts_new');
UPDATE sqlite_sequence SET name = name || '_new' WHERE name IN ('webhook_deliveries', 'webhook_attempts');
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_new RENAME TO webhook_deliveries;
ALTER TABLE webhook_attempts_new RENAME TO webhook_attempts;
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt, id) WHERE status = 'PENDING';
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);

-- +goose Down
DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE change_ref IS NOT NULL);
DELETE FROM webhook_deliveries WHERE change_ref IS NOT NULL;
CREATE TABLE webhook_deliveries_old (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id     BIGINT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id        BIGINT REFERENCES events (id) ON DELETE CASCADE,
    transaction_ref BIGINT,                          -- transactions.id of a derived event
    merchant_id     TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'PENDING', -- PENDING | SUCCEEDED | FAILED
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt    BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    CHECK ((event_id IS NULL) <> (transaction_ref IS NULL))
);
INSERT INTO webhook_deliveries_old (id, endpoint_id, event_id, transaction_ref, merchant_id, status, attempts, next_attempt, created_at, updated_at)
    SELECT id, endpoint_id, event_id, transaction_ref, merchant_id, status, attempts, next_attempt, created_at, updated_at FROM webhook_deliveries;
CREATE TABLE webhook_attempts_old (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id  BIGINT NOT NULL REFERENCES webhook_deliveries_old (id) ON DELETE CASCADE,
    status_code  INTEGER NOT NULL,
    latency_ms   INTEGER NOT NULL,
    response     TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL
);
INSERT INTO webhook_attempts_old SELECT id, delivery_id, status_code, latency_ms, response, error, created_at FROM webhook_attempts;
DELETE FROM sqlite_sequence WHERE name IN ('webhook_deliveries_old', 'webhook_attempts_old');
UPDATE sqlite_sequence SET name = name || '_old' WHERE name IN ('webhook_deliveries', 'webhook_attempts');
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_old RENAME TO webhook_deliveries;
ALTER TABLE webhook_attempts_old RENAME TO webhook_attempts;
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt, id) WHERE status = 'PENDING';
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
ALTER TABLE webhook_endpoints DROP COLUMN change_id;
ALTER TABLE webhook_endpoints DROP COLUMN change_seq;
DROP TABLE payment_intent_changes;

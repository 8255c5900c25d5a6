-- +goose Up
-- Transaction events are derived from the ledger: a transaction's outcome (transactions.event_seq,
-- finished_at) is its event, written nowhere else. The delivery engine reads each endpoint's
-- merchant's outcomes past the endpoint's cursor, in commit order, and makes them deliveries.

-- Every event, of the events table or derived, has a place in its merchant's commit order: the events
-- API lists both sources merged by it (newest first). A row of events written from now on takes the
-- merchant's ledger head (the highest transactions.event_seq) and sorts after the outcomes up to it;
-- the rows written before take 0 and sort before every derived event, in id order as before.
ALTER TABLE events ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;
DROP INDEX events_merchant;
DROP INDEX events_merchant_type;
CREATE INDEX events_merchant ON events (merchant_id, event_seq, id);
CREATE INDEX events_merchant_type ON events (merchant_id, type, event_seq, id);

-- Each endpoint's cursor: the (event_seq, id) of the last outcome of its merchant it has made a
-- delivery of, or passed over. An endpoint starts at its merchant's head: it is sent the events from
-- its creation on.
ALTER TABLE webhook_endpoints ADD COLUMN ledger_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN ledger_id BIGINT NOT NULL DEFAULT 0;
UPDATE webhook_endpoints SET ledger_id = 9223372036854775807, ledger_seq = COALESCE((SELECT MAX(t.event_seq) FROM transactions t
    WHERE t.merchant_id = webhook_endpoints.merchant_id AND t.event_seq IS NOT NULL), 0);

-- A delivery delivers a row of events (event_id) or a derived event, named by its transaction's row id
-- (transaction_ref); exactly one of the two. SQLite cannot drop a NOT NULL constraint: the table is
-- rebuilt, and webhook_attempts with it, whose foreign key would otherwise follow the renamed table
-- (and whose rows a DROP TABLE of their parent would delete). The AUTOINCREMENT counter is kept, so
-- that no purged delivery's id is given again.
CREATE TABLE webhook_deliveries_new (
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
INSERT INTO webhook_deliveries_new (id, endpoint_id, event_id, merchant_id, status, attempts, next_attempt, created_at, updated_at)
    SELECT id, endpoint_id, event_id, merchant_id, status, attempts, next_attempt, created_at, updated_at FROM webhook_deliveries;
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
DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE transaction_ref IS NOT NULL);
DELETE FROM webhook_deliveries WHERE transaction_ref IS NOT NULL;
CREATE TABLE webhook_deliveries_old (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id   BIGINT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      BIGINT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    merchant_id   TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'PENDING',
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_attempt  BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
INSERT INTO webhook_deliveries_old SELECT id, endpoint_id, event_id, merchant_id, status, attempts, next_attempt, created_at, updated_at
    FROM webhook_deliveries;
CREATE TABLE webhook_attempts_old (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id  BIGINT NOT NULL REFERENCES webhook_deliveries_old (id) ON DELETE CASCADE,
    status_code  INTEGER NOT NULL,
    latency_ms   INTEGER NOT NULL,
    response     TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL
);
INSERT INTO webhook_attempts_old SELECT * FROM webhook_attempts;
DELETE FROM sqlite_sequence WHERE name IN ('webhook_deliveries_old', 'webhook_attempts_old');
UPDATE sqlite_sequence SET name = name || '_old' WHERE name IN ('webhook_deliveries', 'webhook_attempts');
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_old RENAME TO webhook_deliveries;
ALTER TABLE webhook_attempts_old RENAME TO webhook_attempts;
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt, id) WHERE status = 'PENDING';
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
ALTER TABLE webhook_endpoints DROP COLUMN ledger_id;
ALTER TABLE webhook_endpoints DROP COLUMN ledger_seq;
DROP INDEX events_merchant_type;
DROP INDEX events_merchant;
ALTER TABLE events DROP COLUMN event_seq;
CREATE INDEX events_merchant ON events (merchant_id, id);
CREATE INDEX events_merchant_type ON events (merchant_id, type, id);

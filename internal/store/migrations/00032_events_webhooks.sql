-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Events: facts about a merchant's records, each written in the transaction of the change it reports
-- (no event without its change, no change without its event). data is the object
-- as the API showed it at that moment, as JSON. Kept 30 days, purged oldest id first (ids follow time
-- closely enough for that: event.Purge).
CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT NOT NULL UNIQUE,              -- evt_…, time-ordered (event.New)
    merchant_id TEXT NOT NULL,
    type        TEXT NOT NULL,                     -- transaction.approved, customer.created, …
    data        TEXT NOT NULL,                     -- the object, JSON
    created_at  BIGINT NOT NULL                    -- Unix milliseconds
);
CREATE INDEX events_merchant ON events (merchant_id, id);
CREATE INDEX events_merchant_type ON events (merchant_id, type, id);

-- A merchant's webhook endpoints. The signing secret is sealed under the keyring (envelope), bound to
-- the endpoint's id; a rotated-out secret keeps signing beside the new one until previous_until.
CREATE TABLE webhook_endpoints (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id      TEXT NOT NULL UNIQUE,         -- we_…
    merchant_id      TEXT NOT NULL,
    url              TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    enabled_events   TEXT NOT NULL,                -- space-separated types, or '*'
    disabled         BOOLEAN NOT NULL DEFAULT FALSE,
    disabled_reason  TEXT NOT NULL DEFAULT '',     -- '' when disabled by the merchant; why, when by Kassa
    secret           BLOB NOT NULL,                -- sealed whsec_ secret
    previous_secret  BLOB,                         -- sealed, signing beside secret until previous_until
    previous_until   BIGINT,
    failing_since    BIGINT,                       -- the first failed delivery since the last success
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints (merchant_id, id);

-- One event to send to one endpoint: written with the event, in its transaction, for every enabled
-- endpoint subscribed to its type; taken by lease (lease_until), like billing cycles and receipts.
CREATE TABLE webhook_deliveries (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id   BIGINT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      BIGINT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    merchant_id   TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'PENDING', -- PENDING | SUCCEEDED | FAILED
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_attempt  BIGINT NOT NULL,
    lease_until   BIGINT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt) WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- Each attempt of a delivery: when, the HTTP status (0 when no answer), how long, the first 1 KiB of
-- the answer or the error.
CREATE TABLE webhook_attempts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id  BIGINT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    status_code  INTEGER NOT NULL,
    latency_ms   INTEGER NOT NULL,
    response     TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
DROP TABLE events;

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
-- change of a payment intent (change_ref): exactly one of the three.
ALTER TABLE webhook_deliveries ADD COLUMN change_ref BIGINT;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_source;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_source CHECK ((event_id IS NOT NULL)::int
    + (transaction_ref IS NOT NULL)::int + (change_ref IS NOT NULL)::int = 1);

-- +goose Down
DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE change_ref IS NOT NULL);
DELETE FROM webhook_deliveries WHERE change_ref IS NOT NULL;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_source;
ALTER TABLE webhook_deliveries DROP COLUMN change_ref;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_source CHECK ((event_id IS NULL) <> (transaction_ref IS NULL));
ALTER TABLE webhook_endpoints DROP COLUMN change_id;
ALTER TABLE webhook_endpoints DROP COLUMN change_seq;
DROP TABLE payment_intent_changes;

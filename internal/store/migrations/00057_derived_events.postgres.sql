-- +goose Up
-- Transaction events are derived from the ledger: a transaction's outcome (transactions.event_seq,
-- finished_at) is its event, written nowhere else. The delivery engine reads each endpoint's
-- merchant's outcomes past the endpoint's cursor, in commit order, and makes them deliveries.

-- Every event, of the events table or derived, has a place in its merchant's order: the events API
-- lists both sources merged by it (newest first). A row of events written from now on takes the id of
-- its transaction, as an outcome does (transactions.event_seq); the rows written before take 0 and
-- sort before every derived event, in id order as before.
ALTER TABLE events ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;
DROP INDEX events_merchant;
DROP INDEX events_merchant_type;
CREATE INDEX events_merchant ON events (merchant_id, event_seq, id);
CREATE INDEX events_merchant_type ON events (merchant_id, type, event_seq, id);

-- Each endpoint's cursor: the (event_seq, id) of the last outcome of its merchant it has made a
-- delivery of, or passed over. The endpoints there are start here: every outcome recorded after this
-- migration has a higher transaction id than this migration's own.
ALTER TABLE webhook_endpoints ADD COLUMN ledger_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN ledger_id BIGINT NOT NULL DEFAULT 0;
UPDATE webhook_endpoints SET ledger_seq = pg_current_xact_id()::text::bigint, ledger_id = 9223372036854775807;

-- A delivery delivers a row of events (event_id) or a derived event, named by its transaction's row id
-- (transaction_ref); exactly one of the two.
ALTER TABLE webhook_deliveries ALTER COLUMN event_id DROP NOT NULL;
ALTER TABLE webhook_deliveries ADD COLUMN transaction_ref BIGINT;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_source CHECK ((event_id IS NULL) <> (transaction_ref IS NULL));

-- +goose Down
DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE transaction_ref IS NOT NULL);
DELETE FROM webhook_deliveries WHERE transaction_ref IS NOT NULL;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_source;
ALTER TABLE webhook_deliveries DROP COLUMN transaction_ref;
ALTER TABLE webhook_deliveries ALTER COLUMN event_id SET NOT NULL;
ALTER TABLE webhook_endpoints DROP COLUMN ledger_id;
ALTER TABLE webhook_endpoints DROP COLUMN ledger_seq;
DROP INDEX events_merchant_type;
DROP INDEX events_merchant;
ALTER TABLE events DROP COLUMN event_seq;
CREATE INDEX events_merchant ON events (merchant_id, id);
CREATE INDEX events_merchant_type ON events (merchant_id, type, id);

-- +goose Up
-- PostgreSQL only. A delivery's foreign keys to its endpoint and its event made every sale that
-- queued one lock the endpoint's row FOR KEY SHARE while it inserted: with one endpoint per merchant
-- and every sale of the merchant at once, many sharers of one row, which PostgreSQL records in a
-- MultiXact per change of sharers — 27 % of the sale benchmark's throughput with an endpoint
-- subscribed to every event, 13 % without those keys. The code deletes an
-- endpoint's deliveries and a purged event's itself (webhook.Endpoints.Delete, event.Purge), on both
-- backends; SQLite, which takes no row locks, keeps the keys.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;

-- +goose Down
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id) ON DELETE CASCADE;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE;

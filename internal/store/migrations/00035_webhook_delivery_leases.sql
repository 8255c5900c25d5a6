-- +goose Up
-- The delivery engine (internal/webhook/deliver.go) counts the live leases of an endpoint — at most 4
-- deliveries in flight per endpoint, across every node — and a worker that has sent one delivery takes
-- the next one due for the same endpoint. A lease is cleared (NULL) when its attempt is recorded, so the
-- first index holds only the deliveries being sent (or left leased by a crashed node).
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (endpoint_id) WHERE status = 'PENDING' AND lease_until IS NOT NULL;
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt, id) WHERE status = 'PENDING';

-- +goose Down
DROP INDEX webhook_deliveries_endpoint_due;
DROP INDEX webhook_deliveries_leased;

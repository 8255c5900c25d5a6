-- +goose Up
-- Webhook deliveries are taken endpoint by endpoint: a node leases an endpoint,
-- sends its due deliveries, at most 4 at once, and records their outcomes in batches, renewing the
-- endpoint's lease with each. A delivery is no longer leased by a write of its own row: on PostgreSQL
-- that update moved the row in every index, and with the record of its end it was two of the three
-- writes a delivery cost.
ALTER TABLE webhook_endpoints ADD COLUMN lease_owner TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN lease_until BIGINT;
DROP INDEX webhook_deliveries_leased;
ALTER TABLE webhook_deliveries DROP COLUMN lease_until;

-- +goose Down
ALTER TABLE webhook_deliveries ADD COLUMN lease_until BIGINT;
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (endpoint_id) WHERE status = 'PENDING' AND lease_until IS NOT NULL;
ALTER TABLE webhook_endpoints DROP COLUMN lease_until;
ALTER TABLE webhook_endpoints DROP COLUMN lease_owner;

-- +goose Up
-- SQLite only (PostgreSQL's went in 00036). The delivery engine now finds due deliveries endpoint by
-- endpoint on both backends, through webhook_deliveries_endpoint_due; nothing reads the pending
-- deliveries by time alone, and the index only cost each delivery's writes.
DROP INDEX webhook_deliveries_due;

-- +goose Down
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt) WHERE status = 'PENDING';

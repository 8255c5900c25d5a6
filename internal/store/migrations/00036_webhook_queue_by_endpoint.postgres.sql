-- +goose Up
-- PostgreSQL only. The delivery engine finds due deliveries endpoint by endpoint, through
-- webhook_deliveries_endpoint_due (endpoint_id, next_attempt, id), and no longer by time alone. With
-- a second index of the pending deliveries (by next_attempt) beside it, the planner — whose
-- statistics of a queue are those of the last ANALYZE, which usually saw it empty — took that one for
-- the lookup of an endpoint's next delivery and sorted thousands of rows for each delivery recorded.
-- SQLite, which plans without those statistics, keeps it.
DROP INDEX webhook_deliveries_due;

-- +goose Down
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt) WHERE status = 'PENDING';

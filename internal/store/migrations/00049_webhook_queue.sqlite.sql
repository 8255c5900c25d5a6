-- +goose Up
-- SQLite. The events queued for an endpoint and not yet made deliveries. A sale
-- with an endpoint subscribed to its event wrote a delivery row in its own transaction: the row and
-- its three indexes, which cost the sale benchmark 8–13 % of its throughput. It now writes one
-- entry here — a table without rowid, its primary key its only B-tree — and the endpoint's runner
-- makes the entries deliveries a batch at a time, as it sends them (internal/webhook/queue.go): while
-- the node is busy with payments, a hundred a second. No foreign key: the endpoint's delete and the
-- event purge delete the entries themselves, as on PostgreSQL (migration 00047).
CREATE TABLE webhook_queue (
    endpoint_id BIGINT NOT NULL,
    event_id    BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, event_id)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE webhook_queue;

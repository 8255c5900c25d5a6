-- +goose Up
-- PostgreSQL. The events queued for an endpoint and not yet made deliveries. A
-- sale with an endpoint subscribed to its event wrote a delivery row in its own transaction, with its
-- four indexes; it now writes one entry here, the primary key its only index, and the endpoint's
-- runner makes the entries deliveries a batch at a time, as it sends them (internal/webhook/queue.go):
-- while the node is busy with payments, a hundred a second. No foreign keys, for the reason of
-- migration 00047: the endpoint's delete and the event purge delete the entries themselves.
CREATE TABLE webhook_queue (
    endpoint_id BIGINT NOT NULL,
    event_id    BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, event_id)
);

-- +goose Down
DROP TABLE webhook_queue;

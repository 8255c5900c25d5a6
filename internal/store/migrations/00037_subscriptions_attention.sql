-- +goose Up
-- The subscriptions that need attention, RETRY and SUSPENDED, counted across every merchant by
-- `kassa billing status` and at every metrics scrape (kassa_billing_subscriptions): without this
-- index each count read the whole table.
CREATE INDEX subscriptions_attention ON subscriptions (status) WHERE status IN ('RETRY', 'SUSPENDED');

-- +goose Down
DROP INDEX subscriptions_attention;

-- +goose Up
-- PostgreSQL only. An attempt's foreign key to its delivery was checked, at each attempt recorded, by
-- a query PostgreSQL plans once per connection and keeps: planned while the deliveries were few (a
-- fresh database, or one whose deliveries are made as they are sent, migration 00049), it read the
-- deliveries whole, and went on doing so as they grew — a batch of successes took a second or more,
-- and a backlog of 37,000 deliveries took 73 s to catch up instead of 7. The
-- attempt is written by the one runner of its delivery; the endpoint's delete and the event purge
-- delete the attempts themselves, on both backends (SQLite keeps the key: it looks the parent up by
-- its primary key whatever it holds).
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;

-- +goose Down
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES webhook_deliveries (id) ON DELETE CASCADE;

-- +goose Up
-- The timeline of the PostgreSQL cluster that last reserved a block of the series (its WAL files'
-- first eight digits; 0 on SQLite, and for a series not yet reserved since this migration). A block
-- reserved on another timeline than the last one's follows a promotion: a failover, or a restore to a
-- point in time, after which the numbers reserved since that point are gone from the row but not from
-- the acquirer's memory. The connector then moves the series on past them (internal/processor/iso8583).
ALTER TABLE iso8583_series ADD COLUMN timeline BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE iso8583_series DROP COLUMN timeline;

-- +goose Up
-- On PostgreSQL a place in a merchant's commit order (transactions.event_seq, events.event_seq, the
-- webhook endpoints' cursors, the rollup's seen_xmax) is a transaction id plus this base. Transaction
-- ids start afresh in a cluster made by restoring a dump, below the places stored; the store then
-- raises the base, once, before any node serves (store.DB.Migrate), so that places keep rising. The
-- cluster is the one whose ids the base was last set for.
CREATE TABLE xid_base (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	cluster TEXT NOT NULL,
	base BIGINT NOT NULL
);
INSERT INTO xid_base (id, cluster, base) VALUES (1, (SELECT system_identifier::text FROM pg_control_system()), 0);

-- +goose Down
DROP TABLE xid_base;

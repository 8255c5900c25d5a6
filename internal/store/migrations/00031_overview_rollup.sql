-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- The dashboard's overview, computed by indexed queries rather than by loading rows into Go, sums
-- these instead of a month of ledger rows. One row per merchant, 15-minute interval (UTC;
-- every time zone's offset is a multiple of 15 minutes, so a merchant's days are whole intervals),
-- currency, live or test, kind, outcome and decline code: how many transactions and their amounts.
-- The roller (internal/report) adds the final rows of the ledger to it in order of id; a rolled row's
-- columns summed here never change again. Not written on the payment path.
CREATE TABLE overview_buckets (
    merchant_id  TEXT NOT NULL,
    bucket       BIGINT NOT NULL,                  -- the interval's start, epoch milliseconds
    currency     TEXT NOT NULL,
    test_mode    BOOLEAN NOT NULL,
    kind         TEXT NOT NULL,                    -- SALE | AUTHORIZATION | CAPTURE | REFUND | VOID
    status       TEXT NOT NULL,                    -- APPROVED | DECLINED
    decline_code TEXT NOT NULL,                    -- '' unless declined
    n            BIGINT NOT NULL,
    amount       BIGINT NOT NULL,                  -- minor units of currency
    PRIMARY KEY (merchant_id, bucket, currency, test_mode, kind, status, decline_code)
);

-- The same by the merchant's local day (days since 1970-01-01 in zone), so that a month is 30 rows
-- per key rather than 2,880: kept for the zone the merchant has (overview_zones), and rebuilt from
-- overview_buckets when it changes zone.
CREATE TABLE overview_days (
    merchant_id  TEXT NOT NULL,
    zone         TEXT NOT NULL,
    day          BIGINT NOT NULL,
    currency     TEXT NOT NULL,
    test_mode    BOOLEAN NOT NULL,
    kind         TEXT NOT NULL,
    status       TEXT NOT NULL,
    decline_code TEXT NOT NULL,
    n            BIGINT NOT NULL,
    amount       BIGINT NOT NULL,
    PRIMARY KEY (merchant_id, zone, day, currency, test_mode, kind, status, decline_code)
);

-- The zone a merchant's overview_days are in: they hold every rolled transaction of the merchant.
CREATE TABLE overview_zones (
    merchant_id TEXT PRIMARY KEY,
    zone        TEXT NOT NULL
);

-- How far the roller got, in one row: every transaction with id <= rolled_to is in overview_buckets,
-- or in overview_held while it is pending. version changes with every roll, so that of two rollers
-- that read the same state only one commits. seen_to is the highest id seen at seen_at (and, on
-- PostgreSQL, seen_xmax the snapshot's xmax then): the next roll goes up to it once no transaction
-- that was running then can still commit a lower id.
CREATE TABLE overview_rollup (
    id        INTEGER PRIMARY KEY,
    rolled_to BIGINT NOT NULL,
    version   BIGINT NOT NULL,
    seen_to   BIGINT NOT NULL,
    seen_at   BIGINT NOT NULL,
    seen_xmax BIGINT
);
INSERT INTO overview_rollup (id, rolled_to, version, seen_to, seen_at) VALUES (1, 0, 0, 0, 0);

-- Transactions at or below rolled_to that were still pending when their range was rolled: each is
-- added to overview_buckets, and removed from here, once its outcome is recorded.
CREATE TABLE overview_held (
    id          BIGINT PRIMARY KEY,                -- transactions.id
    merchant_id TEXT NOT NULL
);
CREATE INDEX overview_held_merchant ON overview_held (merchant_id, id);

-- Billing at a glance: a merchant's subscriptions by status and next run, and its unsent e-mails.
CREATE INDEX subscriptions_merchant_due ON subscriptions (merchant_id, status, next_run);
CREATE INDEX outbox_unsent_merchant ON outbox (merchant_id, created_at) WHERE sent_at IS NULL;

-- +goose Down
DROP INDEX outbox_unsent_merchant;
DROP INDEX subscriptions_merchant_due;
DROP TABLE overview_held;
DROP TABLE overview_rollup;
DROP TABLE overview_zones;
DROP TABLE overview_days;
DROP TABLE overview_buckets;

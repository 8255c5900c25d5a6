-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Billing dates fall in the merchant's time zone (IANA name), UTC by default.
ALTER TABLE merchants ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC';

-- Plans: payment templates that customers subscribe to.
CREATE TABLE plans (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    lookup_id          TEXT NOT NULL UNIQUE,
    merchant_id        TEXT NOT NULL REFERENCES merchants (id),
    name               TEXT NOT NULL,
    name_key           TEXT NOT NULL,              -- lower-cased name: unique per merchant among live plans
    amount             BIGINT NOT NULL,
    currency           TEXT NOT NULL,
    scale              INTEGER NOT NULL,
    frequency          TEXT NOT NULL,              -- DAILY | WEEKLY | MONTHLY | QUARTERLY | ANNUALLY
    number_of_payments INTEGER NOT NULL DEFAULT 0, -- 0: until canceled
    send_receipt       BOOLEAN NOT NULL DEFAULT FALSE,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    deleted_at         BIGINT                      -- kept for the subscriptions that name it
);
CREATE INDEX plans_merchant ON plans (merchant_id, id);
CREATE UNIQUE INDEX plans_name ON plans (merchant_id, name_key) WHERE deleted_at IS NULL;

-- Subscriptions: a customer billed for a plan on a stored card. Terms are copied from the plan at
-- subscription (a subscription need not follow later changes of its plan).
CREATE TABLE subscriptions (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    lookup_id          TEXT NOT NULL UNIQUE,
    merchant_id        TEXT NOT NULL REFERENCES merchants (id),
    customer_id        BIGINT NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    plan_id            BIGINT NOT NULL REFERENCES plans (id),
    card_id            BIGINT REFERENCES stored_cards (id) ON DELETE SET NULL, -- NULL: the card was deleted
    status             TEXT NOT NULL,              -- ACTIVE | RETRY | SUSPENDED | PAUSED | CANCELED | EXPIRED
    amount             BIGINT NOT NULL,
    currency           TEXT NOT NULL,
    scale              INTEGER NOT NULL,
    frequency          TEXT NOT NULL,
    number_of_payments INTEGER NOT NULL,
    email              TEXT NOT NULL,
    description        TEXT NOT NULL DEFAULT '',
    start_date         BIGINT NOT NULL,            -- cycle 0 is due then; cycle k one k periods later
    timezone           TEXT NOT NULL,
    cycle              INTEGER NOT NULL DEFAULT 0, -- the cycle to charge next
    next_run           BIGINT,                     -- when the engine charges next; NULL when it will not
    last_run           BIGINT,
    last_success       BIGINT,
    completed_cycles   INTEGER NOT NULL DEFAULT 0,
    failed_attempts    INTEGER NOT NULL DEFAULT 0, -- declined attempts of the current cycle
    delinquent_cycles  INTEGER NOT NULL DEFAULT 0, -- cycles left unpaid since the last success
    delinquent_since   BIGINT,                     -- the first decline of the unpaid streak
    missed_cycles      INTEGER NOT NULL DEFAULT 0, -- cycles not charged after downtime (beyond the backlog limit)
    lease_until        BIGINT,                     -- a billing worker holds it until then
    lease_owner        TEXT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);
CREATE INDEX subscriptions_customer ON subscriptions (customer_id);
CREATE INDEX subscriptions_plan ON subscriptions (plan_id, status);
CREATE INDEX subscriptions_due ON subscriptions (next_run) WHERE next_run IS NOT NULL;

-- Messages to send (receipts), kept until sent: an SMTP outage delays them and loses none.
CREATE TABLE outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id  TEXT NOT NULL,
    to_addr      TEXT NOT NULL,
    bcc          TEXT NOT NULL DEFAULT '',
    subject      TEXT NOT NULL,
    text_body    TEXT NOT NULL,
    html_body    TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_attempt BIGINT NOT NULL,
    last_error   TEXT NOT NULL DEFAULT '',
    lease_until  BIGINT,
    sent_at      BIGINT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX outbox_due ON outbox (next_attempt) WHERE sent_at IS NULL;

-- +goose Down
DROP TABLE outbox;
DROP TABLE subscriptions;
DROP TABLE plans;
ALTER TABLE merchants DROP COLUMN timezone;

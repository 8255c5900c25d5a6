-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- API keys of the v1 payments API. A key belongs to a merchant's account or to a partner's; a partner's
-- key may also act for the merchants that authorized the partner. Only a hash of the key is stored.
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,                  -- "key_" + 24 characters [A-Z2-7]
    key_hash    BLOB NOT NULL UNIQUE,              -- SHA-256 of the secret key (130 random bits)
    key_hint    TEXT NOT NULL,                     -- the key's last four characters, to tell keys apart
    merchant_id TEXT REFERENCES merchants (id),
    partner_id  TEXT REFERENCES partners (id),
    permissions TEXT NOT NULL,                     -- space-separated permission names
    created_at  BIGINT NOT NULL,
    deleted_at  BIGINT,                            -- a deleted key authenticates nothing
    CHECK ((merchant_id IS NULL) <> (partner_id IS NULL))
);
CREATE INDEX api_keys_merchant ON api_keys (merchant_id, created_at);
CREATE INDEX api_keys_partner ON api_keys (partner_id, created_at);

-- Payment methods: a card to pay one payment intent with. The number is sealed like a stored card's;
-- the CVC is never stored. A method not used by a confirmation within 15 minutes expires, and the
-- sweep then deletes its sealed number; so does the outcome of the confirmation that used it.
CREATE TABLE payment_methods (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    pm_id           TEXT NOT NULL UNIQUE,          -- "pm_" + 24 characters [A-Z2-7]
    merchant_id     TEXT NOT NULL REFERENCES merchants (id),
    pan             BLOB,                          -- sealed (envelope); NULL once used or expired
    card_type       TEXT NOT NULL,
    card_prefix     TEXT NOT NULL,                 -- first six digits at most (PCI DSS 3.4.1)
    card_suffix     TEXT NOT NULL,
    expiry_month    INTEGER NOT NULL,
    expiry_year     INTEGER NOT NULL,
    billing_details TEXT NOT NULL,                 -- JSON object
    attached_to     TEXT,                          -- the payment intent whose confirmation used it
    expires_at      BIGINT NOT NULL,               -- unusable from then on unless attached
    created_at      BIGINT NOT NULL
);
CREATE INDEX payment_methods_expiry ON payment_methods (expires_at) WHERE pan IS NOT NULL AND attached_to IS NULL;

-- Payment intents: one payment from creation to its end. Each money operation on an intent (confirm,
-- capture, the void of a cancel) is a ledger transaction whose idempotency key is derived from the
-- intent and its attempt number, so that repeating an operation cannot repeat the charge.
CREATE TABLE payment_intents (
    id                          INTEGER PRIMARY KEY AUTOINCREMENT,
    intent_id                   TEXT NOT NULL UNIQUE, -- "pi_" + 24 characters [A-Z2-7]
    merchant_id                 TEXT NOT NULL REFERENCES merchants (id),
    status                      TEXT NOT NULL,
    amount                      BIGINT NOT NULL,      -- minor units of currency
    currency                    TEXT NOT NULL,        -- ISO 4217, upper case (shown lower case)
    capture_method              TEXT NOT NULL,        -- automatic | manual
    amount_capturable           BIGINT NOT NULL DEFAULT 0,
    amount_received             BIGINT NOT NULL DEFAULT 0,
    description                 TEXT,
    receipt_email               TEXT,
    statement_descriptor_suffix TEXT,
    metadata                    TEXT NOT NULL,        -- JSON object of strings
    payment_method              TEXT,                 -- pm_ id
    last_error_code             TEXT,
    last_error_decline_code     TEXT,
    last_error_message          TEXT,
    charge_id                   BIGINT,               -- the ledger row of the latest sale or authorization
    latest_charge               TEXT,                 -- its transaction_id
    canceled_at                 BIGINT,
    cancellation_reason         TEXT,
    attempts                    INTEGER NOT NULL DEFAULT 0, -- money operations begun, numbering their ledger keys
    pending_op                  TEXT,                 -- confirm | capture | cancel while one runs
    lease_until                 BIGINT,               -- when a pending operation is presumed dead
    client_id                   TEXT,                 -- the API key that created it
    created_at                  BIGINT NOT NULL,
    updated_at                  BIGINT NOT NULL
);
CREATE INDEX payment_intents_merchant ON payment_intents (merchant_id, id);
CREATE INDEX payment_intents_pending ON payment_intents (lease_until) WHERE pending_op IS NOT NULL;

-- +goose Down
DROP TABLE payment_intents;
DROP TABLE payment_methods;
DROP TABLE api_keys;

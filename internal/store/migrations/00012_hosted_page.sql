-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- The origins whose pages may embed the merchant's hosted payment page (the frame-ancestors of its
-- Content-Security-Policy), space-separated; '' for the default: any https origin, and http on
-- localhost and 127.0.0.1 for development.
ALTER TABLE merchants ADD COLUMN allowed_origins TEXT NOT NULL DEFAULT '';

-- Hosted payment page sessions (hosted-payment-page-api.md): a payment intent and the secret URL of
-- the page that pays it, valid for an hour. Only a hash of the URL's secret is stored.
CREATE TABLE checkout_sessions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT NOT NULL UNIQUE,          -- "cs_" + 24 characters [A-Z2-7]
    url_hash        BLOB NOT NULL UNIQUE,          -- SHA-256 of the secret in the page's URL
    merchant_id     TEXT NOT NULL REFERENCES merchants (id),
    intent_id       TEXT NOT NULL,                 -- the payment intent it pays
    billing_details TEXT NOT NULL,                 -- JSON: what prefills the form
    client_id       TEXT,                          -- the API key that created it
    outcome         TEXT,                          -- completed | canceled once the page has ended
    attempts        TEXT NOT NULL,                 -- JSON list of {created_at, status, error}
    expires_at      BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX checkout_sessions_merchant ON checkout_sessions (merchant_id, id);

-- +goose Down
DROP TABLE checkout_sessions;
ALTER TABLE merchants DROP COLUMN allowed_origins;

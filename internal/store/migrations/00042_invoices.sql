-- +goose Up
-- Invoices of the invoice service. Amounts are minor units of currency, computed
-- by Kassa from the lines (internal/invoice, "Totals"); the lines are kept as a JSON array in the
-- row, as the invoice shows them, since they are only ever read and written with it.
CREATE TABLE invoices (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    lookup_id            TEXT NOT NULL UNIQUE,          -- 10 characters [A-Z2-7]
    merchant_id          TEXT NOT NULL REFERENCES merchants (id),
    invoice_number       TEXT NOT NULL,                 -- unique per merchant
    status               TEXT NOT NULL,                 -- DRAFT | SENT | PAID | OVERDUE | CANCELLED
    pay_key              TEXT NOT NULL UNIQUE,          -- the secret of the public pay page's URL: 26 characters [A-Z2-7]
    currency             TEXT NOT NULL,
    scale                INTEGER NOT NULL,              -- the currency's decimals
    due_date             TEXT NOT NULL DEFAULT '',      -- YYYY-MM-DD, or '' for none
    tax_rate             BIGINT NOT NULL DEFAULT 0,     -- percent, in units of 1/10000 of a percent
    items                TEXT NOT NULL,                 -- JSON array of the lines
    discount_amount      BIGINT NOT NULL DEFAULT 0,
    shipping_amount      BIGINT NOT NULL DEFAULT 0,
    subtotal_amount      BIGINT NOT NULL,
    tax_amount           BIGINT NOT NULL,
    total_amount         BIGINT NOT NULL,
    customer_lookup_id   TEXT NOT NULL DEFAULT '',
    customer_email       TEXT NOT NULL DEFAULT '',
    customer_first_name  TEXT NOT NULL DEFAULT '',
    customer_last_name   TEXT NOT NULL DEFAULT '',
    customer_company     TEXT NOT NULL DEFAULT '',
    customer_telephone   TEXT NOT NULL DEFAULT '',
    customer_address1    TEXT NOT NULL DEFAULT '',
    customer_address2    TEXT NOT NULL DEFAULT '',
    customer_city        TEXT NOT NULL DEFAULT '',
    customer_province    TEXT NOT NULL DEFAULT '',
    customer_country     TEXT NOT NULL DEFAULT '',
    customer_postal_code TEXT NOT NULL DEFAULT '',
    notes                TEXT NOT NULL DEFAULT '',
    terms                TEXT NOT NULL DEFAULT '',
    custom_fields        TEXT NOT NULL DEFAULT '{}',    -- JSON object of strings
    version              INTEGER NOT NULL DEFAULT 0,    -- bumped by every change: a change read before another is refused
    sent_at              BIGINT,
    paid_at              BIGINT,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL
);
CREATE UNIQUE INDEX invoices_number ON invoices (merchant_id, invoice_number);
CREATE INDEX invoices_merchant ON invoices (merchant_id, id);
CREATE INDEX invoices_status ON invoices (merchant_id, status, id);
CREATE INDEX invoices_email ON invoices (merchant_id, customer_email, id);

-- +goose Down
DROP TABLE invoices;

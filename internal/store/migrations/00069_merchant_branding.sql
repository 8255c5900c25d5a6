-- +goose Up
-- A merchant's branding, shown to its customers on the hosted page, an invoice's page and PDF, and
-- the e-mails Kassa sends for it. The logo is stored as Kassa re-encoded it (a PNG of at most 400×120
-- pixels, never the bytes uploaded) with the hash its URL carries; the accent is a #rrggbb colour
-- that passed the contrast check, or '' for Kassa's own.
CREATE TABLE merchant_branding (
    merchant_id TEXT PRIMARY KEY REFERENCES merchants (id),
    logo        BLOB,
    logo_hash   TEXT NOT NULL DEFAULT '',
    accent      TEXT NOT NULL DEFAULT '',
    updated_at  BIGINT NOT NULL
);
CREATE INDEX merchant_branding_logo ON merchant_branding (logo_hash);

-- +goose Down
DROP TABLE merchant_branding;

-- +goose Up
-- The audit log records changes to the vault too: a customer, card or subscription is named here.
ALTER TABLE audit_log ADD COLUMN resource TEXT;

-- +goose Down
ALTER TABLE audit_log DROP COLUMN resource;

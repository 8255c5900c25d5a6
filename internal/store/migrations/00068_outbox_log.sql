-- +goose Up
-- The outbox is also the merchant's log of its e-mails (dashboard Settings → E-mails, billing.Mails):
-- kind says what each is about (a receipt, an invoice, a reminder, an invitation; a person's own
-- password reset or account notice, which the merchant's log leaves out); preview keeps, sealed under
-- the envelope keyring like sealed, what it says with every link removed, and stays once the message
-- is sent, when sealed and the clear columns are emptied; demo marks a message that a server in demo
-- mode (kassa serve --demo, without SMTP) recorded as not sent instead of sending it. last_error now
-- holds a short phrase (billing's failure reason), the raw error going to the log only.
--
-- The messages queued before have no kind and no preview: the log lists them as e-mails of unknown
-- kind, without a preview. Their last_error is the raw error, which may name the mail server's host or
-- quote what it said; it is cleared, and the log says the mail server failed.
ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN preview BLOB;
ALTER TABLE outbox ADD COLUMN demo BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX outbox_merchant ON outbox (merchant_id, id);
UPDATE outbox SET last_error = '' WHERE last_error <> '';

-- +goose Down
DROP INDEX outbox_merchant;
ALTER TABLE outbox DROP COLUMN demo;
ALTER TABLE outbox DROP COLUMN preview;
ALTER TABLE outbox DROP COLUMN kind;

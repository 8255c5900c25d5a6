-- +goose Up
-- The outbox keeps what each e-mail says sealed under the envelope keyring (billing.Queue): its
-- subject and bodies, which carry password links, invoices' payment links and webhook URLs. A message
-- queued from now on keeps them in sealed alone, with subject, text_body and html_body empty; a sent
-- one keeps none of them (billing's Deliver empties it).
--
-- The messages queued before say it in clear. The first server to start with this schema seals those
-- that wait and empties those sent (billing.SealOutbox): it has the key-encryption key, which SQL does
-- not. outbox_in_clear finds them; it is empty from then on, as nothing is written in clear any more.
ALTER TABLE outbox ADD COLUMN sealed BLOB;
CREATE INDEX outbox_in_clear ON outbox (id) WHERE sealed IS NULL AND (subject <> '' OR text_body <> '' OR html_body <> '');

-- +goose Down
-- Messages still waiting lose what they say, which only sealed kept.
DROP INDEX outbox_in_clear;
ALTER TABLE outbox DROP COLUMN sealed;

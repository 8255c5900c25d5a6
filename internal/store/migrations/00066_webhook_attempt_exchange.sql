-- +goose Up
-- What the endpoint's page shows of an attempt beside the first 1 KiB of its answer: the
-- webhook-signature header it was sent with, and the answer's headers ("Name: value" lines, the
-- first 1 KiB). The rest of the request is rebuilt from the event, which every attempt sends byte
-- for byte (internal/webhook), so it is not stored again. Attempts recorded before have ''. The rows
-- go with their events, as before.
ALTER TABLE webhook_attempts ADD COLUMN signature TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_attempts ADD COLUMN response_headers TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE webhook_attempts DROP COLUMN response_headers;
ALTER TABLE webhook_attempts DROP COLUMN signature;

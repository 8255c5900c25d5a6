-- +goose Up
-- The operation last claimed on a payment intent and the Idempotency-Key of the request that claimed
-- it ("confirm <credential>/<key>"), kept after the operation settles: a retry of that request whose
-- first answer was lost with its node finds the intent it settled instead of a 409 (checkout.claim).
ALTER TABLE payment_intents ADD COLUMN op_request TEXT;

-- +goose Down
ALTER TABLE payment_intents DROP COLUMN op_request;

-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Idempotency-Key records are kept per principal: the account a request acts for and the credential
-- that sent it. The request is known by a keyed MAC and the response is sealed; the old
-- records (per merchant, a plain hash, a body in clear) do not survive: a retry of a request made before
-- the upgrade runs as a new request, which for money is safe because the ledger still binds its key to
-- the transaction it created (below).
DROP TABLE idempotency_keys;
CREATE TABLE idempotency_keys (
    scope        TEXT NOT NULL,                      -- the principal: "acct_… client:…" (a bearer token's client), "acct_… key:…"
    idem_key     TEXT NOT NULL,
    request_mac  BLOB NOT NULL,                      -- HMAC-SHA256 of the request under a sealed server secret
    status       INTEGER,                            -- the response's status; NULL while the first request runs
    body         BLOB,                               -- the response's body, sealed under the envelope keyring
    locked_until BIGINT NOT NULL,                    -- a running request that is this old died: take it over
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (scope, idem_key)
);

-- The ledger binds a client's key qualified by the credential ("client:<client id>/<key>"), so that
-- two credentials of a merchant never meet. A key bound by a gateway API request before the upgrade is
-- qualified with the client that sent it (every such transaction records its client), so that the
-- client's retry finds its transaction. Keys that checkout derives (with spaces) and billing derives
-- (no client) stay as they are.
UPDATE transactions SET idempotency_key = 'client:' || client_id || '/' || idempotency_key
WHERE idempotency_key IS NOT NULL AND client_id IS NOT NULL AND idempotency_key NOT LIKE '% %';

-- Card tokens are single-use. A used token is known by the SHA-256 of its RSA-OAEP
-- ciphertext, and kept until it would be too old to open anyway.
CREATE TABLE used_card_tokens (
    token_hash  BLOB PRIMARY KEY,
    merchant_id TEXT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX used_card_tokens_expiry ON used_card_tokens (expires_at);

-- +goose Down
DROP TABLE used_card_tokens;
DROP TABLE idempotency_keys;
CREATE TABLE idempotency_keys (
    merchant_id  TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    request_hash BLOB NOT NULL,
    status       INTEGER,
    body         BLOB,
    locked_until BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (merchant_id, idem_key)
);
-- The ledger's keys stay qualified: an earlier version does not find them, as it did not find the
-- records dropped above.

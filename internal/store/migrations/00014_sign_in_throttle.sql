-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Sign-in throttling counts an attempt before its password is checked, in one conditional upsert per
-- subject, shared by every node (docs/design/auth.md, "Sign-in throttling"). A subject is a keyed MAC of
-- what it counts — an account or a client address for untrusted clients, a device cookie, a
-- merchant's usual address, the client of a password grant — so that no e-mail or address is stored.
CREATE TABLE sign_in_attempts (
    subject      BLOB PRIMARY KEY,
    attempts     INTEGER NOT NULL,                 -- of this window: failures, and attempts being checked
    window_start BIGINT NOT NULL
);

-- The addresses from which each merchant signed in to the sign-in page lately, as keyed MACs of the
-- merchant and the address.
CREATE TABLE sign_in_places (
    place        BLOB PRIMARY KEY,
    last_success BIGINT NOT NULL
);

-- Failures counted after the check, read before it: replaced by sign_in_attempts.
DROP TABLE sign_in_failures;

-- +goose Down
CREATE TABLE sign_in_failures (
    subject      TEXT PRIMARY KEY,
    failures     INTEGER NOT NULL,
    window_start BIGINT NOT NULL,
    locked_until BIGINT
);
DROP TABLE sign_in_places;
DROP TABLE sign_in_attempts;

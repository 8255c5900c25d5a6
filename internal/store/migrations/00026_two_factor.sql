-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Two-factor authentication. A user's TOTP secret and last step are columns of
-- users; its ten single-use recovery codes are rows here, only their SHA-256 stored (a code has 80
-- random bits: no slow hash is needed against guessing it back from the hash).
CREATE TABLE user_recovery_codes (
    user_id   TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash BLOB NOT NULL,
    used_at   BIGINT,
    PRIMARY KEY (user_id, code_hash)
);

-- Wrong codes in a row, and until when a user's codes are refused after MaxCodeFailures of them: six
-- digits are a million guesses, which a password that leaked must not buy.
ALTER TABLE users ADD COLUMN totp_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN totp_locked_until BIGINT;

-- "A merchant-wide setting 'require 2FA for all staff'".
ALTER TABLE merchants ADD COLUMN require_two_factor BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE merchants DROP COLUMN require_two_factor;
ALTER TABLE users DROP COLUMN totp_locked_until;
ALTER TABLE users DROP COLUMN totp_failures;
DROP TABLE user_recovery_codes;

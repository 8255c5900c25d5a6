-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Two-factor authentication (issue 16, point 2). A user's TOTP secret and last step are columns of
-- users; its ten single-use recovery codes are rows here, only their SHA-256 stored (a code has 80
-- random bits: no slow hash is needed against guessing it back from the hash).
CREATE TABLE user_recovery_codes (
    user_id   TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash BLOB NOT NULL,
    used_at   BIGINT,
    PRIMARY KEY (user_id, code_hash)
);

-- "A merchant-wide setting 'require 2FA for all staff'".
ALTER TABLE merchants ADD COLUMN require_two_factor BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE merchants DROP COLUMN require_two_factor;
DROP TABLE user_recovery_codes;

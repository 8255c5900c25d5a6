-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Staff users of the merchant dashboard: each signs in with an e-mail and a
-- password to one merchant, in one role. Until now a merchant had one sign-in, its own e-mail and
-- password in merchants; each merchant becomes a user, its first owner, under the merchant's own id,
-- so that device cookies and usual places of sign-in throttling, which name that id, keep counting.
CREATE TABLE users (
    id                  TEXT PRIMARY KEY,          -- 10 lowercase hex characters
    merchant_id         TEXT NOT NULL REFERENCES merchants (id),
    email               TEXT NOT NULL,
    email_key           TEXT NOT NULL UNIQUE,      -- lower-cased email: one e-mail signs in to one merchant
    password_hash       TEXT,                      -- argon2id PHC string; NULL until the user sets one
    role                TEXT NOT NULL,             -- owner | admin | reporting | sales
    created_at          BIGINT NOT NULL,
    password_changed_at BIGINT,
    -- Two-factor authentication, filled by a later change: the TOTP secret sealed
    -- under the key-encryption key, and the last time step a code was accepted for (each code once).
    totp_secret         BLOB,
    totp_last_step      BIGINT
);
CREATE INDEX users_merchant ON users (merchant_id);

INSERT INTO users (id, merchant_id, email, email_key, password_hash, role, created_at, password_changed_at)
    SELECT id, id, email, email_key, password_hash, 'owner', created_at, created_at FROM merchants;

ALTER TABLE merchants DROP COLUMN password_hash;

-- Links that let a user set a password: a reset (30 minutes) or an invitation (72 hours). Only the
-- SHA-256 of the link's secret is stored; a link is used once.
CREATE TABLE user_links (
    token_hash BLOB PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,                      -- reset | invite
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX user_links_user ON user_links (user_id);

-- Dashboard sessions, stored on the server; the cookie carries a random id whose SHA-256 is the key.
-- Nodes keep the sessions they serve in memory and learn of changes (a sign-out, an ended session, a
-- change of its user's role) by polling changed_at. user_id has no foreign key: a removed user's
-- sessions stay, ended, until they are purged, so that every node learns that they ended.
CREATE TABLE dashboard_sessions (
    id_hash     BLOB PRIMARY KEY,
    user_id     TEXT NOT NULL,
    merchant_id TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    last_seen   BIGINT NOT NULL,                   -- written at most once a minute
    addr        TEXT NOT NULL,
    user_agent  TEXT NOT NULL,
    ended_at    BIGINT,
    changed_at  BIGINT NOT NULL
);
CREATE INDEX dashboard_sessions_user ON dashboard_sessions (user_id);
CREATE INDEX dashboard_sessions_changed ON dashboard_sessions (changed_at);

-- +goose Down
DROP TABLE dashboard_sessions;
DROP TABLE user_links;
ALTER TABLE merchants ADD COLUMN password_hash TEXT;
UPDATE merchants SET password_hash = (SELECT password_hash FROM users WHERE users.id = merchants.id);
DROP TABLE users;

-- +goose Up
-- One person, one sign-in, many merchants: a user is a person (an e-mail, a password, a second
-- factor), and what it may do at a merchant is a membership of that merchant's staff, in one role. A
-- membership made by an invitation waits for the person to accept it through the invitation's link
-- (accepted_at NULL until then), so that no merchant can put itself into another person's dashboard
-- unasked. Every user until now belonged to one merchant: that is its one membership, accepted.
CREATE TABLE memberships (
    user_id     TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    role        TEXT NOT NULL,                     -- owner | admin | reporting | sales
    created_at  BIGINT NOT NULL,
    accepted_at BIGINT,                            -- NULL while the invitation waits
    PRIMARY KEY (user_id, merchant_id)
);
CREATE INDEX memberships_merchant ON memberships (merchant_id);
INSERT INTO memberships (user_id, merchant_id, role, created_at, accepted_at)
    SELECT id, merchant_id, role, created_at, created_at FROM users;

-- The merchant a person signs in to: the one it last chose, or whose invitation it last accepted.
ALTER TABLE users ADD COLUMN last_merchant_id TEXT;
UPDATE users SET last_merchant_id = merchant_id;

-- An invitation's link names the merchant whose membership it accepts.
ALTER TABLE user_links ADD COLUMN merchant_id TEXT;
UPDATE user_links SET merchant_id = (SELECT merchant_id FROM users WHERE users.id = user_links.user_id) WHERE kind = 'invite';

DROP INDEX users_merchant;
ALTER TABLE users DROP COLUMN role;
ALTER TABLE users DROP COLUMN merchant_id;

-- +goose Down
ALTER TABLE users ADD COLUMN merchant_id TEXT;
ALTER TABLE users ADD COLUMN role TEXT;
UPDATE users SET merchant_id = COALESCE(last_merchant_id, (SELECT MIN(merchant_id) FROM memberships WHERE memberships.user_id = users.id)),
    role = 'sales';
UPDATE users SET role = (SELECT role FROM memberships WHERE memberships.user_id = users.id AND memberships.merchant_id = users.merchant_id)
    WHERE EXISTS (SELECT 1 FROM memberships WHERE memberships.user_id = users.id AND memberships.merchant_id = users.merchant_id);
CREATE INDEX users_merchant ON users (merchant_id);
ALTER TABLE user_links DROP COLUMN merchant_id;
ALTER TABLE users DROP COLUMN last_merchant_id;
DROP TABLE memberships;

-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.
-- (Numbered 18: the numbers between are other changes written alongside.)

-- The grants of one client: revoking a client revokes every grant it holds, in the same transaction
-- (so that its refresh tokens stop at once), without reading every grant of every merchant.
CREATE INDEX oauth_grants_client ON oauth_grants (client_id) WHERE revoked_at IS NULL;

-- +goose Down
DROP INDEX oauth_grants_client;

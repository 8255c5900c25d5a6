-- +goose Up
-- Performance near the limit: audit_log_user (migration 00024) serves the activity page's
-- filter by staff user, but every record went into it, and most name no user: every payment through
-- the API, every subscription's charge. Each of them wrote one more B-tree in its outcome's
-- transaction, a fifth of what its audit record writes, for entries no filter reads. Only the records
-- that name a user are in it now; the filter (audit.List: "user_id = $n") implies that the user is not
-- NULL, so both planners still read it.
DROP INDEX audit_log_user;
CREATE INDEX audit_log_user ON audit_log (merchant_id, user_id, id) WHERE user_id IS NOT NULL;

-- +goose Down
DROP INDEX audit_log_user;
CREATE INDEX audit_log_user ON audit_log (merchant_id, user_id, id);

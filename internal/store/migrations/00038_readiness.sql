-- +goose Up
-- One row that readiness writes to after a write failed for want of storage (store.DB.Writable), to
-- learn whether writes work again.
CREATE TABLE readiness (
    id         INTEGER PRIMARY KEY,
    checked_at BIGINT NOT NULL
);
INSERT INTO readiness (id, checked_at) VALUES (1, 0);

-- +goose Down
DROP TABLE readiness;

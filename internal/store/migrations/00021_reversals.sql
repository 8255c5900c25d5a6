-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.
-- (Numbered 21: 20 is the ISO 8583 connector's trace numbers, written alongside.)

-- Reversals of operations that got no answer: a reversal is recorded in the same database transaction
-- that marks the attempt as timed out, then sent, and retransmitted until answered, by whichever node
-- holds the work, across crashes. One row per unanswered attempt; reversal is the
-- processor's own description of what to send (trace numbers and the original's references, no card
-- data). next_attempt is both when it is due and, while a node sends it, that node's lease.
CREATE TABLE reversals (
	transaction_id    TEXT PRIMARY KEY,
	processor_account TEXT,
	reversal          TEXT NOT NULL,
	-- The reversal carries the operation through rather than undoing it (a void repeated until answered):
	-- acknowledged, the operation is approved (processor.Unanswered.Completes).
	completes         BOOLEAN NOT NULL DEFAULT FALSE,
	attempts          INTEGER NOT NULL DEFAULT 0,
	next_attempt      BIGINT NOT NULL,
	last_error        TEXT,
	created_at        BIGINT NOT NULL,
	acknowledged_at   BIGINT
);
CREATE INDEX reversals_due ON reversals (next_attempt) WHERE acknowledged_at IS NULL;

-- +goose Down
DROP TABLE reversals;

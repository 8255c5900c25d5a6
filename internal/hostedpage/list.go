package hostedpage

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store"
)

// The statuses of a session as the dashboard shows them: open while its page may still be paid, then
// completed or canceled as the page ended, or expired when its hour passed first.
const (
	StatusOpen      = "open"
	StatusCompleted = "completed"
	StatusCanceled  = "canceled"
	StatusExpired   = "expired"
)

// Statuses are the statuses of a session, for a filter.
var Statuses = []string{StatusOpen, StatusCompleted, StatusCanceled, StatusExpired}

// Status is the session's status at now.
func (ss Session) Status(now time.Time) string {
	switch {
	case ss.Outcome != "":
		return ss.Outcome
	case ss.expired(now):
		return StatusExpired
	}
	return StatusOpen
}

// statusSQL is the condition of each status; the open and expired ones compare with now, bound to $2.
var statusSQL = map[string]string{
	StatusOpen:      "outcome IS NULL AND expires_at > $2",
	StatusCompleted: "outcome = 'completed'",
	StatusCanceled:  "outcome = 'canceled'",
	StatusExpired:   "outcome IS NULL AND expires_at <= $2",
}

// ListFilter selects a merchant's sessions: those in Status ("" for all), a page of at most Limit,
// newest first, older than the row id After or newer than the row id Before.
type ListFilter struct {
	Status        string
	After, Before int64
	Limit         int
}

// List returns the merchant's sessions that f selects, newest first. A status not of Statuses is a
// 400 naming the field status.
func (s *Service) List(ctx context.Context, merchantID string, f ListFilter) ([]Session, error) {
	where := "merchant_id = $1"
	args := []any{merchantID}
	if f.Status != "" {
		cond, ok := statusSQL[f.Status]
		if !ok {
			return nil, fault.Invalid("status", "status must be open, completed, canceled or expired")
		}
		where += " AND " + cond
		if f.Status == StatusOpen || f.Status == StatusExpired {
			args = append(args, s.now().UnixMilli())
		}
	}
	order := "DESC"
	switch {
	case f.After > 0:
		args = append(args, f.After)
		where += " AND id < $" + strconv.Itoa(len(args))
	case f.Before > 0:
		args = append(args, f.Before)
		where += " AND id > $" + strconv.Itoa(len(args))
		order = "ASC"
	}
	args = append(args, f.Limit)
	var out []Session
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		out, err = querySessions(ctx, q, `SELECT `+sessionColumns+` FROM checkout_sessions WHERE `+where+
			` ORDER BY id `+order+` LIMIT $`+strconv.Itoa(len(args)), args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if order == "ASC" {
		slices.Reverse(out)
	}
	return out, nil
}

// Get returns one of the merchant's sessions; another merchant's is not found.
func (s *Service) Get(ctx context.Context, merchantID, sessionID string) (Session, error) {
	var ss Session
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		ss, err = scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM checkout_sessions
			WHERE merchant_id = $1 AND session_id = $2`, merchantID, sessionID))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fault.NotFound("No hosted-page session %s.", sessionID)
	}
	return ss, err
}

// querySessions runs query, which selects sessionColumns, and reads every session it returns.
func querySessions(ctx context.Context, q store.Querier, query string, args ...any) ([]Session, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		ss, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ss)
	}
	return out, rows.Err()
}

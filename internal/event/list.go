package event

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// Filter selects a page of a merchant's events for List: newest first, at most Limit, older than
// the event StartingAfter or newer than the event EndingBefore (ids evt_…, at most one of the two).
type Filter struct {
	// Types keeps the events of these types; none keeps every type.
	Types []string
	// From and Until keep the events created at or after From, and before Until; zero for no bound.
	From, Until                 time.Time
	Limit                       int
	StartingAfter, EndingBefore string
}

// ErrNotFound is the answer for an event id that names none of the merchant's events: another
// merchant's event is not found either.
var ErrNotFound = errors.New("event: no such event")

// columns are an Event's columns, after the row id, in scan order.
const columns = `id, event_id, merchant_id, type, data, created_at`

// scan reads the row id and the event of a row of columns.
func scan(s interface{ Scan(...any) error }) (int64, Event, error) {
	var id, at int64
	var e Event
	var data string
	err := s.Scan(&id, &e.ID, &e.MerchantID, &e.Type, &data, &at)
	e.Data, e.CreatedAt = []byte(data), time.UnixMilli(at)
	return id, e, err
}

// Get returns the merchant's event id (evt_…), or ErrNotFound.
func Get(ctx context.Context, q store.Querier, merchantID, id string) (Event, error) {
	_, e, err := scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM events WHERE merchant_id = $1 AND event_id = $2`, merchantID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, ErrNotFound
	}
	return e, err
}

// List returns a page of the merchant's events that f selects, newest first, and whether there are
// more beyond it (older ones after a page read with StartingAfter or neither, newer ones before a page
// read with EndingBefore). A cursor that names none of the merchant's events is ErrNotFound. The
// search follows the index events_merchant, or events_merchant_type for a type filter (see
// TestListUsesIndexes).
func List(ctx context.Context, q store.Querier, merchantID string, f Filter) ([]Event, bool, error) {
	var after, before int64
	for _, c := range []struct {
		id  string
		pos *int64
	}{{f.StartingAfter, &after}, {f.EndingBefore, &before}} {
		if c.id == "" {
			continue
		}
		err := q.QueryRowContext(ctx, `SELECT id FROM events WHERE merchant_id = $1 AND event_id = $2`, merchantID, c.id).Scan(c.pos)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, ErrNotFound
		}
		if err != nil {
			return nil, false, err
		}
	}
	query, args := listQuery(merchantID, f, after, before)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		_, e, err := scan(rows)
		if err != nil {
			return nil, false, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	if before != 0 {
		slices.Reverse(out)
	}
	return out, more, nil
}

// listQuery is List's query of f's page, with its arguments: the events older than the row id after,
// or newer than the row id before (0 for no bound), one more than f.Limit to tell whether there are
// more. Newer ones are read oldest first, from the cursor on.
func listQuery(merchantID string, f Filter, after, before int64) (string, []any) {
	args := []any{merchantID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := `WHERE merchant_id = $1`
	if len(f.Types) > 0 {
		in := make([]string, len(f.Types))
		for i, t := range f.Types {
			in[i] = arg(t)
		}
		where += ` AND type IN (` + strings.Join(in, ", ") + `)`
	}
	if !f.From.IsZero() {
		where += ` AND created_at >= ` + arg(f.From.UnixMilli())
	}
	if !f.Until.IsZero() {
		where += ` AND created_at < ` + arg(f.Until.UnixMilli())
	}
	order := "DESC"
	if after != 0 {
		where += ` AND id < ` + arg(after)
	}
	if before != 0 {
		where += ` AND id > ` + arg(before)
		order = "ASC"
	}
	query := `SELECT ` + columns + ` FROM events ` + where + ` ORDER BY id ` + order + ` LIMIT ` + arg(f.Limit+1)
	return query, args
}

// purgeBatch is how many events one statement of Purge deletes: a short transaction each, so that
// the purge never holds the database's writer for long.
const purgeBatch = 1000

// Purge deletes the events older than Retention at now, a batch at a time, with their webhook
// deliveries, the deliveries' attempts and the entries of the webhook queue not yet made deliveries,
// and returns how many it deleted. All are deleted here: on PostgreSQL none has a foreign key to what
// it belongs to (migrations 00047, 00049, 00051).
func Purge(ctx context.Context, db *store.DB, now time.Time) (int, error) {
	cutoff := now.Add(-Retention).UnixMilli()
	total := 0
	for {
		// The oldest rows by id, of which those past retention: ids follow time (give or take the
		// transactions in flight together), and reading the oldest batch needs no index on time, which
		// every event would pay for.
		var n int64
		err := db.Write(ctx, func(tx *store.Tx) error {
			var last sql.NullInt64
			if err := tx.QueryRowContext(ctx, `SELECT MAX(id) FROM (SELECT id FROM events ORDER BY id LIMIT $1) oldest`, purgeBatch).Scan(&last); err != nil {
				return err
			}
			for _, stmt := range []string{
				`DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT d.id FROM webhook_deliveries d
					WHERE d.event_id IN (SELECT id FROM events WHERE id <= $1 AND created_at < $2))`,
				`DELETE FROM webhook_deliveries WHERE event_id IN (SELECT id FROM events WHERE id <= $1 AND created_at < $2)`,
				`DELETE FROM webhook_queue WHERE event_id IN (SELECT id FROM events WHERE id <= $1 AND created_at < $2)`,
			} {
				if _, err := tx.ExecContext(ctx, stmt, last, cutoff); err != nil {
					return err
				}
			}
			r, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id <= $1 AND created_at < $2`, last, cutoff)
			if err != nil {
				return err
			}
			n, _ = r.RowsAffected()
			return nil
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		if n == 0 {
			return total, nil
		}
	}
}

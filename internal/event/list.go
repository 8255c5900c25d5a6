package event

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
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

// Key is an event's place in its merchant's order of events, the order the events API lists them in
// (newest first): by Seq, the event's place in the merchant's commit order (transactions.event_seq
// of a transaction's event, payment_intent_changes.event_seq of a payment intent's, events.event_seq
// of a row of events), then by Source (Ledger, Intent, Table), then by ID, the row id in its table.
// Each source is read in this order through an index — transactions_merchant_seq,
// payment_intent_changes_seq, events_merchant or events_merchant_type — so that a page of the three
// merged is exact: no event is left out of a page or shown on two, whatever their times.
type Key struct {
	Seq    int64
	Source int // Ledger, Intent or Table; 0 in the zero Key, which is no place
	ID     int64
}

// The sources of events, in the order Key sorts them at the same Seq (Place): on PostgreSQL the rows
// of one transaction share its Seq, and a transaction writes them in this order; on SQLite no two
// rows of a merchant written since migration 00059 share one, and a row of events written before it
// took the Seq of the outcome committed before it, after which it sorts.
const (
	Ledger = 1 // derived from an outcome of the ledger (package payment)
	Intent = 2 // derived from a change of a payment intent (package checkout)
	Table  = 3 // a row of the events table
)

// IsZero reports whether k is no place.
func (k Key) IsZero() bool { return k.Source == 0 }

// Tie is, for a reader of source whose rows are read by (Seq, ID) beyond k, the ID that k stands at
// among the rows of its Seq: k's own ID when it is of source, before every row (0) when its source
// sorts before source, after every row when it sorts after.
func (k Key) Tie(source int) int64 {
	switch {
	case k.Source == source:
		return k.ID
	case k.Source < source:
		return 0
	}
	return 1<<63 - 1
}

// Compare orders keys: negative when k comes before o, positive after, 0 when equal.
func (k Key) Compare(o Key) int {
	switch {
	case k.Seq != o.Seq:
		return cmp.Compare(k.Seq, o.Seq)
	case k.Source != o.Source:
		return cmp.Compare(k.Source, o.Source)
	}
	return cmp.Compare(k.ID, o.ID)
}

// Placed is an event with its place.
type Placed struct {
	Event
	Key Key
}

// placedColumns are the columns scan reads.
const placedColumns = `id, event_seq, event_id, merchant_id, type, data, created_at`

// scan reads a row of placedColumns.
func scan(s interface{ Scan(...any) error }) (Placed, error) {
	var at int64
	var data string
	p := Placed{Key: Key{Source: Table}}
	e := &p.Event
	err := s.Scan(&p.Key.ID, &p.Key.Seq, &e.ID, &e.MerchantID, &e.Type, &data, &at)
	e.Data, e.CreatedAt = []byte(data), time.UnixMilli(at)
	return p, err
}

// Get returns the merchant's event id (evt_…) of the events table with its place, or ErrNotFound.
func Get(ctx context.Context, q store.Querier, merchantID, id string) (Placed, error) {
	p, err := scan(q.QueryRowContext(ctx, `SELECT `+placedColumns+` FROM events WHERE merchant_id = $1 AND event_id = $2`, merchantID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Placed{}, ErrNotFound
	}
	return p, err
}

// List returns up to n of the merchant's events of the events table that f selects (Types, From,
// Until; its cursors and limit are the caller's), beyond bound in the merchant's order of events:
// older ones, newest first, or with newer, newer ones, oldest first (the zero bound for no bound).
// The search follows the index events_merchant, or events_merchant_type for a type filter, in order
// from bound on (see TestListUsesIndexes).
func List(ctx context.Context, q store.Querier, merchantID string, f Filter, bound Key, newer bool, n int) ([]Placed, error) {
	query, args := listQuery(merchantID, f, bound, newer, n)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Placed
	for rows.Next() {
		p, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// tableSource is how the events table is read in the merchant's order of events: a row's place is
// (event_seq, Table, id), after a derived event's of the same event_seq.
var tableSource = SourceQuery{From: `events t`, Where: `TRUE`, Type: `t.type`, Time: `t.created_at`,
	Columns: placedColumns, Source: Table}

// listQuery is List's query, with its arguments.
func listQuery(merchantID string, f Filter, bound Key, newer bool, n int) (string, []any) {
	return tableSource.Query(merchantID, f, bound, newer, n)
}

// SourceQuery says how one source of a merchant's events is read in the merchant's order of events:
// the events table, or rows an event is derived from (the ledger's outcomes, intents' changes). Each
// row has merchant_id, event_seq (its place) and id, under the alias t.
type SourceQuery struct {
	From    string // the table, aliased t ("transactions t")
	Where   string // the condition on a row of From that it is an event
	Type    string // SQL of a row's event type
	Prefix  string // the prefix of every type the source has ("transaction."); "" for any type
	Time    string // SQL of a row's event time, in epoch milliseconds
	Columns string // the columns read
	Source  int    // the source (Ledger, Intent, Table), which orders its rows among the others' of the same place (Key.Tie)
}

// Query is the statement, with its arguments, that reads up to n of the merchant's events of the
// source that f selects (Types, From, Until), beyond bound: older ones, newest first, or with newer,
// newer ones, oldest first; "" when f's types are none of the source's. A row is beyond bound when
// its (event_seq, id) is beyond (bound.Seq, bound.Tie(Source)), so that the statement reads the
// source's index by merchant and place in order, from bound on.
func (s SourceQuery) Query(merchantID string, f Filter, bound Key, newer bool, n int) (string, []any) {
	args := []any{merchantID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := `WHERE t.merchant_id = $1 AND ` + s.Where
	if len(f.Types) > 0 {
		var in []string
		for _, typ := range f.Types {
			if strings.HasPrefix(typ, s.Prefix) {
				in = append(in, arg(typ))
			}
		}
		if len(in) == 0 {
			return "", nil
		}
		where += ` AND ` + s.Type + ` IN (` + strings.Join(in, ", ") + `)`
	}
	if !f.From.IsZero() {
		where += ` AND ` + s.Time + ` >= ` + arg(f.From.UnixMilli())
	}
	if !f.Until.IsZero() {
		where += ` AND ` + s.Time + ` < ` + arg(f.Until.UnixMilli())
	}
	order, cmp := "DESC", "<"
	if newer {
		order, cmp = "ASC", ">"
	}
	if !bound.IsZero() {
		where += ` AND (t.event_seq ` + cmp + ` ` + arg(bound.Seq) + ` OR (t.event_seq = ` + arg(bound.Seq) + ` AND t.id ` + cmp + ` ` +
			arg(bound.Tie(s.Source)) + `))`
	}
	query := `SELECT ` + s.Columns + ` FROM ` + s.From + ` ` + where + ` ORDER BY t.event_seq ` + order + `, t.id ` + order +
		` LIMIT ` + arg(n)
	return query, args
}

// ByRows is the statement, with its arguments, that reads the source's events whose rows have the
// ids ids (at least one); a row that is no event (Where) is left out.
func (s SourceQuery) ByRows(ids []int64) (string, []any) {
	in := make([]string, len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		in[i], args[i] = "$"+strconv.Itoa(i+1), id
	}
	return `SELECT ` + s.Columns + ` FROM ` + s.From + ` WHERE t.id IN (` + strings.Join(in, ", ") + `) AND ` + s.Where, args
}

// purgeBatch is how many events one statement of Purge deletes: a short transaction each, so that
// the purge never holds the database's writer for long.
const purgeBatch = 1000

// Purge deletes the events older than Retention at now, a batch at a time, with their webhook
// deliveries, the deliveries' attempts and the entries of the webhook queue not yet made deliveries,
// and returns how many it deleted; then the deliveries of derived events older than Retention, with
// their attempts. All are deleted here: on PostgreSQL none has a foreign key to what
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
			break
		}
	}
	return total, purgeDerived(ctx, db, cutoff)
}

// purgeDerived deletes the deliveries of derived events (those without a row of events) older than
// cutoff, by their own time (created_at, the event's), with their attempts, a batch at a time: of the
// oldest deliveries by id, as Purge reads the oldest events. The derived events themselves are their
// sources' rows (the ledger's, the payment intents' history), and stay.
func purgeDerived(ctx context.Context, db *store.DB, cutoff int64) error {
	for {
		var n int64
		err := db.Write(ctx, func(tx *store.Tx) error {
			var last sql.NullInt64
			if err := tx.QueryRowContext(ctx, `SELECT MAX(id) FROM (SELECT id FROM webhook_deliveries ORDER BY id LIMIT $1) oldest`, purgeBatch).Scan(&last); err != nil {
				return err
			}
			const old = `SELECT id FROM webhook_deliveries WHERE id <= $1 AND event_id IS NULL AND created_at < $2`
			if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_attempts WHERE delivery_id IN (`+old+`)`, last, cutoff); err != nil {
				return err
			}
			r, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE id IN (`+old+`)`, last, cutoff)
			if err != nil {
				return err
			}
			n, _ = r.RowsAffected()
			return nil
		})
		if err != nil || n == 0 {
			return err
		}
	}
}

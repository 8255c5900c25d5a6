package checkout

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// A change of a payment intent is recorded once, in the transaction that makes it: a row of
// payment_intent_changes beside the intent's own UPDATE. The row is the intent's history; the record
// of the operation in the merchant's activity history (Records), unless a staff user asked, whose
// operations the audit log records by name; and, when the change has an event (intentEvent, or the
// refund's and the creation's), that payment_intent.* event, whose data is the intent as the API
// showed it after the change, marshalled then. Nothing else is written for the event: the events API
// and the webhook engine derive it from the row (ListEvents, GetEvent, Changes), read in the
// merchant's commit order by the row's place (event_seq, event.Place), as the transaction.* events
// are derived from the ledger (package payment). A change that rolls back leaves no row, and so no
// event.

// change is what a change of an intent records beside the intent: its event type ("" for none,
// intentEvent decides) and, for an operation that is a record, the audit operation with who asked,
// the request, the ledger transaction and the amount.
type change struct {
	typ                       string
	op                        string // "payment_intent.confirm", …; "" for a step that is no record (a claim for the ledger)
	clientID, requestID, txID string
	amount                    int64
	amountSet                 bool // amount is given (a refund's); otherwise the intent's
}

// insertChangeSQL writes a change's row, by dialect; its place comes from event.Place of merchant $1.
var insertChangeSQL = map[store.Dialect]string{
	store.SQLite:   insertChange(store.SQLite),
	store.Postgres: insertChange(store.Postgres),
}

func insertChange(d store.Dialect) string {
	return `INSERT INTO payment_intent_changes (merchant_id, intent_id, event_seq, type, data, operation, client_id, transaction_id,
		amount, currency, status, request_id, created_at) VALUES ($1, $2, ` + event.Place(d, "$1") + `, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
}

// recordChange records in tx the change of an intent from before to after, made at after.UpdatedAt:
// its row of payment_intent_changes, or nothing when the change has neither an event nor a record. A
// staff user's operation (audit.ActorFrom) is recorded in the audit log, naming the user, as before.
func recordChange(ctx context.Context, tx *store.Tx, before, after Intent, c change) error {
	if c.typ == "" {
		c.typ = intentEvent(before, after)
	}
	if !c.amountSet {
		c.amount = after.Amount
	}
	if c.op != "" && audit.ActorFrom(ctx).UserID != "" {
		if err := audit.Write(ctx, tx, audit.Record{MerchantID: after.MerchantID, ClientID: c.clientID, Operation: c.op,
			TransactionID: c.txID, Resource: "payment_intent/" + after.IntentID, Amount: c.amount, Currency: after.Currency.Code,
			Outcome: audit.Done, Detail: after.Status, RequestID: c.requestID, At: after.UpdatedAt}); err != nil {
			return err
		}
		c.op = ""
	}
	if c.typ == "" && c.op == "" {
		return nil
	}
	var data any
	if c.typ != "" {
		b, err := json.Marshal(after.Wire())
		if err != nil {
			return err
		}
		data = string(b)
	}
	_, err := tx.ExecContext(ctx, insertChangeSQL[tx.Dialect()], after.MerchantID, after.IntentID, nullable(c.typ), data, nullable(c.op),
		nullable(c.clientID), nullable(c.txID), c.amount, after.Currency.Code, after.Status, nullable(c.requestID), after.UpdatedAt.UnixMilli())
	return err
}

// changeEventColumns are a change's columns as its event: row id, place, merchant, type, data, time.
const changeEventColumns = `t.id, t.event_seq, t.merchant_id, t.type, t.data, t.created_at`

// scanChangeEvent reads a row of changeEventColumns into its event, whose id is event.DerivedID's.
func scanChangeEvent(s interface{ Scan(...any) error }) (event.Placed, error) {
	p := event.Placed{Key: event.Key{Source: event.Intent}}
	var data string
	var at int64
	e := &p.Event
	if err := s.Scan(&p.Key.ID, &p.Key.Seq, &e.MerchantID, &e.Type, &data, &at); err != nil {
		return event.Placed{}, err
	}
	e.Data, e.CreatedAt = []byte(data), time.UnixMilli(at)
	e.ID = event.DerivedID(event.Intent, p.Key.ID, e.CreatedAt)
	return p, nil
}

// GetEvent returns the merchant's event id derived from a change of an intent, with its place, or
// event.ErrNotFound: for a string that is no such id, another merchant's change, and an id whose time
// is not the change's.
func GetEvent(ctx context.Context, q store.Querier, merchantID, id string) (event.Placed, error) {
	source, row, at, ok := event.ParseDerivedID(id)
	if !ok || source != event.Intent {
		return event.Placed{}, event.ErrNotFound
	}
	p, err := scanChangeEvent(q.QueryRowContext(ctx, `SELECT `+changeEventColumns+` FROM payment_intent_changes t
		WHERE t.id = $1 AND t.merchant_id = $2 AND t.type IS NOT NULL AND t.created_at = $3`, row, merchantID, at.UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return event.Placed{}, event.ErrNotFound
	}
	return p, err
}

// ListEvents returns up to n of the merchant's events derived from changes of intents that f selects
// (Types, From, Until; its cursors and limit are the caller's), beyond bound in the merchant's order
// of events: older ones, newest first, or with newer, newer ones, oldest first. It reads the
// merchant's part of payment_intent_changes_seq in order, from bound on.
func ListEvents(ctx context.Context, q store.Querier, merchantID string, f event.Filter, bound event.Key, newer bool, n int) ([]event.Placed, error) {
	query, args := changeEvents.Query(merchantID, f, bound, newer, n)
	if query == "" {
		return nil, nil
	}
	return queryAll(ctx, q, scanChangeEvent, query, args...)
}

// changeEvents is how intents' changes are read as events: a change's place is (event_seq, Intent,
// row id).
var changeEvents = event.SourceQuery{From: `payment_intent_changes t`, Where: `t.type IS NOT NULL`, Type: `t.type`,
	Prefix: "payment_intent.", Time: `t.created_at`, Columns: changeEventColumns, Source: event.Intent}

// EventsByRow returns the events of the changes whose row ids are ids, by row id; a change without
// an event is left out.
func EventsByRow(ctx context.Context, q store.Querier, ids []int64) (map[int64]event.Event, error) {
	out := make(map[int64]event.Event, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	query, args := changeEvents.ByRows(ids)
	ps, err := queryAll(ctx, q, scanChangeEvent, query, args...)
	for _, p := range ps {
		out[p.Key.ID] = p.Event
	}
	return out, err
}

// ChangesPending is the condition, in dialect, of an endpoint w with events of changes of its
// merchant's intents after its cursor (change_seq, change_id) that are committed in order
// (payment.Committed): found through payment_intent_changes_seq.
func ChangesPending(dialect store.Dialect) string {
	return `EXISTS (SELECT 1 FROM payment_intent_changes t WHERE t.merchant_id = w.merchant_id AND t.type IS NOT NULL
		AND t.event_seq >= w.change_seq AND (t.event_seq > w.change_seq OR t.id > w.change_id) AND ` + payment.Committed[dialect] + `)`
}

// Changes returns up to n of the merchant's changes with events after the place (seq, id), in commit
// order, those committed in order (payment.Committed) only.
func Changes(ctx context.Context, tx *store.Tx, merchantID string, seq, id int64, n int) ([]event.Row, error) {
	return queryAll(ctx, tx, func(s interface{ Scan(...any) error }) (event.Row, error) {
		var r event.Row
		return r, s.Scan(&r.ID, &r.Seq, &r.Type)
	}, `SELECT t.id, t.event_seq, t.type FROM payment_intent_changes t
		WHERE t.merchant_id = $1 AND t.type IS NOT NULL AND t.event_seq >= $2 AND (t.event_seq > $2 OR t.id > $3) AND `+
		payment.Committed[tx.Dialect()]+` ORDER BY t.event_seq, t.id LIMIT $4`, merchantID, seq, id, n)
}

// recordColumns are a change's columns as its record, in the order of scanRecord.
const recordColumns = `id, merchant_id, intent_id, operation, COALESCE(client_id, ''), COALESCE(transaction_id, ''), amount, currency,
	status, COALESCE(request_id, ''), created_at`

// scanRecord reads a row of recordColumns as the audit record the change stands for: the operation
// on "payment_intent/<id>", done, its detail the intent's status after it.
func scanRecord(s interface{ Scan(...any) error }) (audit.Entry, error) {
	var e audit.Entry
	var intentID string
	var at int64
	err := s.Scan(&e.ID, &e.MerchantID, &intentID, &e.Operation, &e.ClientID, &e.TransactionID, &e.Amount, &e.Currency, &e.Detail,
		&e.RequestID, &at)
	e.Resource, e.Outcome, e.At = "payment_intent/"+intentID, audit.Done, time.UnixMilli(at).UTC()
	return e, err
}

// Records returns the merchant's changes of intents that are records of their operation (op, or any
// for ""), newest first, with ids below before (0 for none), at most limit: a walk of
// payment_intent_changes_record from its end for the merchant.
func Records(ctx context.Context, q store.Querier, merchantID, op string, before int64, limit int) ([]audit.Entry, error) {
	where, args := `merchant_id = $1 AND operation IS NOT NULL`, []any{merchantID}
	if op != "" {
		args = append(args, op)
		where += ` AND operation = $` + strconv.Itoa(len(args))
	}
	if before > 0 {
		args = append(args, before)
		where += ` AND id < $` + strconv.Itoa(len(args))
	}
	args = append(args, limit)
	return queryAll(ctx, q, scanRecord, `SELECT `+recordColumns+` FROM payment_intent_changes WHERE `+where+
		` ORDER BY id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
}

// RecordsOf returns the merchant's changes of intents that are records of operations on the
// transactions named (their transaction ids), oldest first: their part of those transactions' audit
// trail, read by payment_intent_changes_transaction.
func RecordsOf(ctx context.Context, q store.Querier, merchantID string, transactionIDs []string) ([]audit.Entry, error) {
	if len(transactionIDs) == 0 {
		return nil, nil
	}
	ph := make([]string, len(transactionIDs))
	args := []any{merchantID}
	for i, id := range transactionIDs {
		ph[i], args = "$"+strconv.Itoa(i+2), append(args, id)
	}
	return queryAll(ctx, q, scanRecord, `SELECT `+recordColumns+` FROM payment_intent_changes WHERE merchant_id = $1
		AND transaction_id IS NOT NULL AND operation IS NOT NULL AND transaction_id IN (`+strings.Join(ph, ", ")+`) ORDER BY id`, args...)
}

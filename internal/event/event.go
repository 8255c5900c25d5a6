// Package event records events: facts about a merchant's records (a customer deleted, a subscription
// suspended), each written in the database transaction of the change it reports, so that there is no
// event without its change and no change without its event. Recording an event also queues its
// webhook deliveries, in the same transaction, to every enabled endpoint of the merchant subscribed
// to its type; package webhook sends them. The transaction.* events are not recorded here: they are
// derived from the ledger's outcomes (package payment), and share the merchant's order of events
// (Key) with the events recorded here.
package event

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kassapay/kassa/internal/sortid"
	"github.com/kassapay/kassa/internal/store"
)

// The event types. Each names the object (its data) and what happened to it.
const (
	TransactionApproved = "transaction.approved"
	TransactionDeclined = "transaction.declined"
	TransactionCaptured = "transaction.captured"
	TransactionRefunded = "transaction.refunded"
	TransactionVoided   = "transaction.voided"

	PaymentIntentCreated                 = "payment_intent.created"
	PaymentIntentSucceeded               = "payment_intent.succeeded"
	PaymentIntentPaymentFailed           = "payment_intent.payment_failed"
	PaymentIntentRequiresAction          = "payment_intent.requires_action"
	PaymentIntentAmountCapturableUpdated = "payment_intent.amount_capturable_updated"
	PaymentIntentCanceled                = "payment_intent.canceled"
	// PaymentIntentRefunded: a refund of the intent through the v1 API succeeded; amount_refunded
	// has grown.
	PaymentIntentRefunded = "payment_intent.refunded"

	HostedPageSessionCompleted = "hosted_page.session.completed"
	HostedPageSessionExpired   = "hosted_page.session.expired"

	CustomerCreated = "customer.created"
	CustomerUpdated = "customer.updated"
	CustomerDeleted = "customer.deleted"

	CardAdded   = "card.added"
	CardUpdated = "card.updated"
	CardDeleted = "card.deleted"

	SubscriptionCreated       = "subscription.created"
	SubscriptionUpdated       = "subscription.updated"
	SubscriptionCharged       = "subscription.charged"
	SubscriptionPaymentFailed = "subscription.payment_failed"
	SubscriptionSuspended     = "subscription.suspended"
	SubscriptionCanceled      = "subscription.canceled"
	SubscriptionExpired       = "subscription.expired"

	PlanCreated = "plan.created"
	PlanUpdated = "plan.updated"
	PlanDeleted = "plan.deleted"

	// Invoices: the invoice as GET /invoice-service/invoice/{id} shows it. Sent is each
	// e-mail of it through the API (the first makes it SENT); ReminderSent each reminder the billing
	// engine sends on its schedule; Overdue when the engine finds it past its due date.
	InvoiceCreated      = "invoice.created"
	InvoiceUpdated      = "invoice.updated"
	InvoiceSent         = "invoice.sent"
	InvoiceReminderSent = "invoice.reminder_sent"
	InvoiceOverdue      = "invoice.overdue"
	InvoicePaid         = "invoice.paid"
	InvoiceCanceled     = "invoice.canceled"
	InvoiceDeleted      = "invoice.deleted"
)

// WebhookEndpointPing is the test event a merchant sends to one of its endpoints ("Send test event" on
// the endpoint's page), its data the endpoint as the API shows it. It is not among Types: no endpoint
// subscribes to it, and it is delivered to the endpoint it was sent to only (Insert, not Write).
const WebhookEndpointPing = "webhook_endpoint.ping"

// Types lists every event type, in the order the documentation lists them.
var Types = []string{
	TransactionApproved, TransactionDeclined, TransactionCaptured, TransactionRefunded, TransactionVoided,
	PaymentIntentCreated, PaymentIntentSucceeded, PaymentIntentPaymentFailed, PaymentIntentRequiresAction,
	PaymentIntentAmountCapturableUpdated, PaymentIntentCanceled, PaymentIntentRefunded,
	HostedPageSessionCompleted, HostedPageSessionExpired,
	CustomerCreated, CustomerUpdated, CustomerDeleted,
	CardAdded, CardUpdated, CardDeleted,
	SubscriptionCreated, SubscriptionUpdated, SubscriptionCharged, SubscriptionPaymentFailed,
	SubscriptionSuspended, SubscriptionCanceled, SubscriptionExpired,
	PlanCreated, PlanUpdated, PlanDeleted,
	InvoiceCreated, InvoiceUpdated, InvoiceSent, InvoiceReminderSent, InvoiceOverdue, InvoicePaid, InvoiceCanceled, InvoiceDeleted,
}

// Known reports whether t is an event type.
func Known(t string) bool {
	for _, k := range Types {
		if k == t {
			return true
		}
	}
	return false
}

// Retention is how long events are kept.
const Retention = 30 * 24 * time.Hour

// Event is one recorded event.
type Event struct {
	ID         string // evt_…
	MerchantID string
	Type       string
	Data       json.RawMessage // the object as the API showed it
	CreatedAt  time.Time
}

// New returns an event of type typ about object (marshalled as JSON: pass the API's own wire form of
// the object), for the merchant, at the time at, with a fresh id.
func New(merchantID, typ string, object any, at time.Time) (Event, error) {
	data, err := json.Marshal(object)
	if err != nil {
		return Event{}, fmt.Errorf("event: marshal %s: %w", typ, err)
	}
	return Event{ID: newID(at), MerchantID: merchantID, Type: typ, Data: data, CreatedAt: at}, nil
}

// newID returns an event id for the time at: "evt_", then 24 characters in time order (sortid): the
// time in milliseconds and 15 random digits (75 bits). Ids in time order append to the
// events_event_id index instead of landing on a random page of it, as 24 random digits did: on SQLite
// that was a tenth of a sale's throughput once every sale recorded an event.
func newID(at time.Time) string { return "evt_" + sortid.New(at, 24) }

// Record writes the event of type typ about object in tx, the transaction of the change it reports,
// with its webhook deliveries.
func Record(ctx context.Context, tx *store.Tx, merchantID, typ string, object any, at time.Time) error {
	e, err := New(merchantID, typ, object, at)
	if err != nil {
		return err
	}
	return e.Write(ctx, tx)
}

// Write inserts e and its deliveries in tx: on PostgreSQL in one statement, one round trip, since
// events are written on the paths of the changes they report (a billing charge's outcome, say).
func (e Event) Write(ctx context.Context, tx *store.Tx) error {
	if tx.Dialect() == store.Postgres {
		if _, err := tx.ExecContext(ctx, writePostgres, e.Args()...); err != nil {
			return fmt.Errorf("event: record %s: %w", e.Type, err)
		}
		return nil
	}
	r, err := tx.ExecContext(ctx, insertSQLite, e.Args()...)
	if err != nil {
		return fmt.Errorf("event: record %s: %w", e.Type, err)
	}
	id, err := r.LastInsertId()
	if err != nil {
		return fmt.Errorf("event: record %s: %w", e.Type, err)
	}
	if _, err := tx.ExecContext(ctx, fanOutSQLite, id, e.MerchantID, e.Type, e.CreatedAt.UnixMilli()); err != nil {
		return fmt.Errorf("event: queue deliveries of %s: %w", e.Type, err)
	}
	return nil
}

// Insert writes e's row alone in tx, queueing no delivery, and returns the row's id: for an event the
// caller delivers to one endpoint itself (WebhookEndpointPing).
func (e Event) Insert(ctx context.Context, tx *store.Tx) (int64, error) {
	var id int64
	if tx.Dialect() == store.Postgres {
		if err := tx.QueryRowContext(ctx, insertPostgres, e.Args()...).Scan(&id); err != nil {
			return 0, fmt.Errorf("event: record %s: %w", e.Type, err)
		}
		return id, nil
	}
	r, err := tx.ExecContext(ctx, insertSQLite, e.Args()...)
	if err == nil {
		id, err = r.LastInsertId()
	}
	if err != nil {
		return 0, fmt.Errorf("event: record %s: %w", e.Type, err)
	}
	return id, nil
}

// insertPostgres inserts an event whose values are Args, as $1 to $5, and returns its row id.
var insertPostgres = `INSERT INTO events (event_id, merchant_id, type, data, created_at, event_seq)
	VALUES ($1, $2, $3, $4, $5, ` + Place(store.Postgres, "$2") + `) RETURNING id`

// fanOutSQLite queues the deliveries of the event whose row id, merchant, type and time are $1 to $4.
var fanOutSQLite = fanOutSQL(`(SELECT CAST($1 AS BIGINT) AS id, CAST($2 AS TEXT) AS merchant_id, CAST($3 AS TEXT) AS type,
	CAST($4 AS BIGINT) AS created_at)`)

// An event's row takes its place in the merchant's order of events (event_seq, see Key), which it
// shares with the outcomes of the merchant's transactions and the changes of its payment intents
// (Place): on SQLite one more than the merchant's highest place, so that no two of its rows share one
// and their places are the order the single writer recorded them in; on PostgreSQL the id of its own
// transaction, as an outcome's.
var insertSQLite = `INSERT INTO events (event_id, merchant_id, type, data, created_at, event_seq) VALUES ($1, $2, $3, $4, $5, ` +
	Place(store.SQLite, "$2") + `)`

// Place is, in dialect, the place in the commit order of the merchant given by the parameter merchant
// ("$2", say) of a row that the statement writes and that sorts among the merchant's events (Key): a
// transaction's outcome, a change of a payment intent, a row of events. On SQLite it is one more than
// the merchant's highest place (Head): the single writer records one row at a time, so each row has a
// place of its own, in the order the rows were recorded, whatever their sources. On PostgreSQL it is
// the statement's transaction's place (store.XidSQL), which the transaction's rows share: they sort
// by source (Ledger, Intent, Table), the order a transaction writes them in — an intent's change is
// written before the events of what it sets off (an invoice paid, a hosted page's session completed),
// and an outcome of the ledger is a transaction of its own — then by row id, their order within the
// source.
func Place(dialect store.Dialect, merchant string) string {
	if dialect == store.Postgres {
		return store.XidSQL
	}
	return `(` + Head(dialect, merchant) + ` + 1)`
}

// Head is, in dialect, a place in the commit order of the merchant given by the parameter merchant:
// at or after every row of its events (Place) committed before the statement, and before every row
// committed after it but for those of transactions under way during it. On SQLite the merchant's
// highest place, read at the end of an index of each source (transactions_merchant_seq,
// payment_intent_changes_seq, events_merchant); on PostgreSQL one less than the statement's
// snapshot's xmin, below which every transaction has ended. A reader in commit order that starts at
// (Head, the highest id) is given the rows committed from the statement on.
func Head(dialect store.Dialect, merchant string) string {
	if dialect == store.Postgres {
		return `(` + store.XminSQL + ` - 1)`
	}
	return `MAX((SELECT COALESCE(MAX(event_seq), 0) FROM transactions WHERE merchant_id = ` + merchant + ` AND event_seq IS NOT NULL),
		(SELECT COALESCE(MAX(event_seq), 0) FROM payment_intent_changes WHERE merchant_id = ` + merchant + ` AND type IS NOT NULL),
		(SELECT COALESCE(MAX(event_seq), 0) FROM events WHERE merchant_id = ` + merchant + `))`
}

// writePostgres inserts an event whose values are Args, as $1 to $5, and its deliveries.
var writePostgres = `WITH ev AS (INSERT INTO events (event_id, merchant_id, type, data, created_at, event_seq)
	VALUES ($1, $2, $3, $4, $5, ` + Place(store.Postgres, "$2") + `) RETURNING id, merchant_id, type, created_at) ` + fanOutSQL("ev")

// Args are the values of the event's row, in the order of the insert's columns.
func (e Event) Args() []any {
	return []any{e.ID, e.MerchantID, e.Type, string(e.Data), e.CreatedAt.UnixMilli()}
}

// fanOutSQL queues the events that from returns (a table name or a parenthesized query, with columns
// id, merchant_id, type, created_at) for delivery: an entry of webhook_queue for each enabled endpoint
// of the event's merchant subscribed to its type ("*" or the type among the space-separated
// enabled_events). The endpoint's runner makes each entry a delivery, due at the event's time, as it
// sends them (internal/webhook): the change's transaction writes one entry of one B-tree, not a
// delivery row with its indexes (migration 00049).
func fanOutSQL(from string) string {
	return `INSERT INTO webhook_queue (endpoint_id, event_id)
		SELECT w.id, ev.id
		FROM ` + from + ` ev JOIN webhook_endpoints w ON w.merchant_id = ev.merchant_id AND w.disabled = FALSE
		AND (w.enabled_events = '*' OR ' ' || w.enabled_events || ' ' LIKE '% ' || ev.type || ' %')`
}

package checkout

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store"
)

// Create stores a new payment intent for who. With a payment method it is ready to confirm
// (requires_confirmation); without, it waits for one (requires_payment_method).
func (s *Service) Create(ctx context.Context, who Who, p IntentParams) (Intent, error) {
	now := time.UnixMilli(s.now().UnixMilli())
	in := Intent{IntentID: "pi_" + rand.Text()[:24], MerchantID: who.Merchant.ID, Status: StatusRequiresPaymentMethod,
		Amount: p.Amount, Currency: p.Currency, CaptureMethod: p.CaptureMethod, Description: p.Description,
		ReceiptEmail: p.ReceiptEmail, StatementDescriptorSuffix: p.StatementDescriptorSuffix, Metadata: p.Metadata,
		PaymentMethod: p.PaymentMethod, ClientID: who.ClientID, Livemode: s.ledger.Live(ctx, who.Merchant.ID), CreatedAt: now, UpdatedAt: now}
	if in.Metadata == nil {
		in.Metadata = map[string]string{}
	}
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		if in.PaymentMethod != "" {
			if _, err := s.vault.CheckMethod(ctx, tx, who.Merchant.ID, in.PaymentMethod, in.IntentID); err != nil {
				return err
			}
			in.Status = StatusRequiresConfirmation
		}
		md, err := json.Marshal(in.Metadata)
		if err != nil {
			return err
		}
		err = tx.QueryRowContext(ctx, `INSERT INTO payment_intents (intent_id, merchant_id, status, amount, currency, capture_method,
			description, receipt_email, statement_descriptor_suffix, metadata, payment_method, client_id, livemode, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $14, $13, $13) RETURNING id`,
			in.IntentID, in.MerchantID, in.Status, in.Amount, in.Currency.Code, in.CaptureMethod, nullable(in.Description),
			nullable(in.ReceiptEmail), nullable(in.StatementDescriptorSuffix), string(md), nullable(in.PaymentMethod),
			nullable(in.ClientID), now.UnixMilli(), in.Livemode).Scan(&in.ID)
		if err != nil {
			return err
		}
		return recordChange(ctx, tx, Intent{}, in, change{typ: event.PaymentIntentCreated, op: "payment_intent.create",
			clientID: who.ClientID, requestID: who.RequestID})
	})
	return in, err
}

// Get returns one of who's payment intents. An operation left running by a node presumed dead is
// settled first.
func (s *Service) Get(ctx context.Context, who Who, id string) (Intent, error) {
	var in Intent
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		in, err = getIntent(ctx, q, who.Merchant.ID, id)
		return err
	})
	if err == nil && in.stale(s.now()) {
		if settled, err := s.reconcile(ctx, in); err == nil {
			in = settled
		}
	}
	return in, err
}

// ListParams select a page of payment intents, newest first: at most Limit, older than the intent
// StartingAfter or newer than the intent EndingBefore.
type ListParams struct {
	Limit                       int
	StartingAfter, EndingBefore string
	// Status keeps the intents in one status (one of Statuses), "" every one: the dashboard's filter.
	Status string
}

// List bounds.
const (
	DefaultListLimit = 10
	MaxListLimit     = 100
)

// ParseListParams reads limit, starting_after and ending_before; each bad one is a 400 naming it.
func ParseListParams(q map[string][]string) (ListParams, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	p := ListParams{Limit: DefaultListLimit, StartingAfter: get("starting_after"), EndingBefore: get("ending_before")}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return p, fault.Invalid("limit", "limit must be a whole number from 1 to %d", MaxListLimit)
		}
		p.Limit = n
	}
	if p.StartingAfter != "" && p.EndingBefore != "" {
		return p, fault.Invalid("ending_before", "send starting_after or ending_before, not both")
	}
	return p, nil
}

// List returns a page of who's payment intents, newest first, and whether there are more beyond it
// (older ones after a page read with starting_after or none, newer ones before a page read with
// ending_before).
func (s *Service) List(ctx context.Context, who Who, p ListParams) ([]Intent, bool, error) {
	where := `WHERE merchant_id = $1`
	args := []any{who.Merchant.ID}
	if p.Status != "" {
		args = append(args, p.Status)
		where += ` AND status = $2`
	}
	return readPage(ctx, s.db, intentPages, p, scanIntent, `SELECT `+intentColumns+` FROM payment_intents `, where, args)
}

// readPage reads the page of p (TrimPage) of the rows that selectFrom ("SELECT … FROM …") and where
// select, whose args begin with the merchant id, with scan.
func readPage[T any](ctx context.Context, db *store.DB, pg pages, p ListParams, scan func(interface{ Scan(...any) error }) (T, error),
	selectFrom, where string, args []any) ([]T, bool, error) {
	var out []T
	err := db.Read(ctx, func(q store.Querier) error {
		clause, args, err := pg.clause(ctx, q, args[0].(string), p, where, args)
		if err != nil {
			return err
		}
		out, err = queryAll(ctx, q, scan, selectFrom+clause, args...)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	out, more := TrimPage(out, p)
	return out, more, nil
}

// pages describes a v1 list whose cursors (starting_after, ending_before) name rows of table by its
// column idCol, one of the merchant's: payment intents by pi_ id, refunds by re_ id.
type pages struct {
	table, idCol string
	rowID        string // the row id in the list's query, which orders it
	noun         string // what the cursors name, for the error: "payment intents"
}

var intentPages = pages{table: "payment_intents", idCol: "intent_id", rowID: "id", noun: "payment intents"}

// clause completes where (with its args, the merchant id first) with p's cursors, the order and the
// limit of one row beyond p.Limit (TrimPage makes the page of them). A cursor that names none of the
// merchant's rows is a 400 naming it.
func (pg pages) clause(ctx context.Context, q store.Querier, merchantID string, p ListParams, where string, args []any) (string, []any, error) {
	order := "DESC"
	for _, c := range []struct{ name, id, cond string }{
		{"starting_after", p.StartingAfter, " < $"}, {"ending_before", p.EndingBefore, " > $"},
	} {
		if c.id == "" {
			continue
		}
		var pos int64
		if err := q.QueryRowContext(ctx, `SELECT id FROM `+pg.table+` WHERE merchant_id = $1 AND `+pg.idCol+` = $2`,
			merchantID, c.id).Scan(&pos); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return "", nil, fault.Invalid(c.name, "%s must be the id of one of this account's %s; %s is not", c.name, pg.noun, clip(c.id))
			}
			return "", nil, err
		}
		args = append(args, pos)
		where += " AND " + pg.rowID + c.cond + strconv.Itoa(len(args))
		if c.name == "ending_before" {
			order = "ASC"
		}
	}
	args = append(args, p.Limit+1)
	return where + ` ORDER BY ` + pg.rowID + ` ` + order + ` LIMIT $` + strconv.Itoa(len(args)), args, nil
}

// TrimPage makes a page of p from rows read one beyond p.Limit, in id order from where p starts
// (newest first, or oldest first when p.EndingBefore): at most Limit, newest first, and whether there
// were more beyond it.
func TrimPage[T any](rows []T, p ListParams) ([]T, bool) {
	more := len(rows) > p.Limit
	if more {
		rows = rows[:p.Limit]
	}
	if p.EndingBefore != "" {
		slices.Reverse(rows)
	}
	return rows, more
}

// Update changes the fields b sets on one of who's intents. Only an intent not yet confirmed changes
// (requires_payment_method or requires_confirmation); giving it a payment method makes it
// requires_confirmation.
func (s *Service) Update(ctx context.Context, who Who, id string, b IntentBody) (Intent, error) {
	var in Intent
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if in, err = lockIntent(ctx, tx, who.Merchant.ID, id, s.now()); err != nil {
			return err
		}
		before := in
		if in.PendingOp != "" || in.Status != StatusRequiresPaymentMethod && in.Status != StatusRequiresConfirmation {
			return unexpected(in, "update")
		}
		if err := b.apply(&in, who.Merchant); err != nil {
			return err
		}
		if b.PaymentMethod != nil {
			if _, err := s.vault.CheckMethod(ctx, tx, who.Merchant.ID, in.PaymentMethod, in.IntentID); err != nil {
				return err
			}
			in.Status = StatusRequiresConfirmation
		}
		in.UpdatedAt = time.UnixMilli(s.now().UnixMilli())
		return saveIntent(ctx, tx, before, in, change{op: "payment_intent.update", clientID: who.ClientID, requestID: who.RequestID})
	})
	return in, err
}

// lockIntent takes the row lock of one of the merchant's intents for the rest of tx, then reads it, so
// that requests changing one intent happen one after another on both backends (as the vault locks a
// customer).
func lockIntent(ctx context.Context, tx *store.Tx, merchantID, id string, now time.Time) (Intent, error) {
	r, err := tx.ExecContext(ctx, `UPDATE payment_intents SET updated_at = $3 WHERE merchant_id = $1 AND intent_id = $2`,
		merchantID, id, now.UnixMilli())
	if err != nil {
		return Intent{}, err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return Intent{}, fault.NotFound("No payment intent %s.", clip(id))
	}
	return getIntent(ctx, tx, merchantID, id)
}

// saveIntent writes every changeable column of in, which was before as read in tx, and records the
// change c in tx (recordChange).
func saveIntent(ctx context.Context, tx *store.Tx, before, in Intent, c change) error {
	md, err := json.Marshal(in.Metadata)
	if err != nil {
		return err
	}
	var code, decline, msg string
	if e := in.LastError; e != nil {
		code, decline, msg = e.Code, e.DeclineCode, e.Message
	}
	var charge, canceled, lease any
	if in.ChargeID != 0 {
		charge = in.ChargeID
	}
	if !in.CanceledAt.IsZero() {
		canceled = in.CanceledAt.UnixMilli()
	}
	if in.PendingOp != "" {
		lease = in.LeaseUntil.UnixMilli()
	}
	_, err = tx.ExecContext(ctx, `UPDATE payment_intents SET status = $2, amount = $3, currency = $4, capture_method = $5,
		amount_capturable = $6, amount_received = $7, description = $8, receipt_email = $9, statement_descriptor_suffix = $10,
		metadata = $11, payment_method = $12, last_error_code = $13, last_error_decline_code = $14, last_error_message = $15,
		charge_id = $16, latest_charge = $17, canceled_at = $18, cancellation_reason = $19, attempts = $20, pending_op = $21,
		lease_until = $22, updated_at = $23, op_request = $24 WHERE id = $1`,
		in.ID, in.Status, in.Amount, in.Currency.Code, in.CaptureMethod, in.AmountCapturable, in.AmountReceived,
		nullable(in.Description), nullable(in.ReceiptEmail), nullable(in.StatementDescriptorSuffix), string(md),
		nullable(in.PaymentMethod), nullable(code), nullable(decline), nullable(msg), charge, nullable(in.LatestCharge),
		canceled, nullable(in.CancellationReason), in.Attempts, nullable(in.PendingOp), lease, in.UpdatedAt.UnixMilli(),
		nullable(in.OpRequest))
	if err != nil {
		return err
	}
	return recordChange(ctx, tx, before, in, c)
}

// intentEvent is the event of an intent's change from before to after, "" for none, at every
// transition, whoever makes it — the v1 API, the hosted page, the sweep:
//
//   - payment_intent.payment_failed: the change set a new last_payment_error — a confirmation or a
//     challenge declined, a challenge that expired, and a capture or void the processor declined (the
//     intent stays in requires_capture then). An error carried over unchanged is the same value (the
//     pointer read with the intent), so a change that keeps it reports nothing. A change that sets an
//     error leaves the intent in requires_payment_method or requires_capture, whose entry has no
//     event of its own: one change has one event at most.
//   - payment_intent.succeeded, .requires_action, .canceled: the intent entered that status;
//   - payment_intent.amount_capturable_updated: it entered requires_capture, or amount_capturable
//     changed while it stayed there.
//
// processing, requires_confirmation and a return to requires_payment_method without an error are
// steps the merchant has no use for, and have no event.
func intentEvent(before, after Intent) string {
	if after.LastError != nil && after.LastError != before.LastError {
		return event.PaymentIntentPaymentFailed
	}
	switch {
	case after.Status == before.Status:
		if after.Status == StatusRequiresCapture && after.AmountCapturable != before.AmountCapturable {
			return event.PaymentIntentAmountCapturableUpdated
		}
	case after.Status == StatusSucceeded:
		return event.PaymentIntentSucceeded
	case after.Status == StatusRequiresCapture:
		return event.PaymentIntentAmountCapturableUpdated
	case after.Status == StatusRequiresAction:
		return event.PaymentIntentRequiresAction
	case after.Status == StatusCanceled:
		return event.PaymentIntentCanceled
	}
	return ""
}

// unexpected is the 409 of an operation that the intent's status forbids.
func unexpected(in Intent, op string) error {
	status := in.Status
	if in.PendingOp != "" {
		return fault.Busy("operation_in_progress", "Another operation (%s) on payment intent %s is in progress; retry shortly.", in.PendingOp, in.IntentID)
	}
	return &fault.Error{Status: http.StatusConflict, Code: "payment_intent_unexpected_state",
		Message: "You cannot " + op + " payment intent " + in.IntentID + " because its status is " + status + "."}
}

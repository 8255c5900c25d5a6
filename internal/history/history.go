// Package history reads a merchant's activity as one history: the audit log's records (staff
// actions, settings, credentials, vault changes, a staff user's money operations, the gateway's own
// recoveries and reversals, and every money operation finished before the ledger recorded places),
// the ledger's rows that are the records of their money operations (payment.Record: an operation
// asked for through an API, whose finish writes no audit record) and the changes of payment intents
// that are the records of their operations (checkout.Records: those no staff user asked for). The
// Activity page, its CSV export and "kassa audit list" read it; it imports audit, payment and
// checkout, which audit cannot.
//
// Each source is read newest first by an index that begins with the merchant (audit_log_merchant,
// _user or _operation; transactions_merchant_seq; payment_intent_changes_record), and the three are
// merged by time: a page holds the newest head of the three at each step, so that it takes a prefix
// of each source in that source's own order. A Cursor holds where each source's prefix ends, so that
// the next page goes on from there whatever was recorded since: nothing is shown twice or passed over
// among what the first page could see.
package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// Entry is one line of the history: an audit record (AuditID set), a change of a payment intent read
// as the record of its operation (ChangeID set, an audit record's fields), or a ledger row read as the
// record of its operation (Seq set): its client, the operation (sale, authorize, capture, refund,
// void), the transaction, amount, outcome (the status), detail (the message), request and time
// (finished_at).
type Entry struct {
	audit.Record
	AuditID  int64 // the audit record's id; 0 for the other sources
	ChangeID int64 // the change's id (payment_intent_changes); 0 for the other sources
	Seq      int64 // the ledger row's place (event_seq); 0 for the other sources
}

// Cursor is where a page of the history ends: each source's exclusive upper bound, the audit log's
// and the intents' changes' by id, the ledger's by place. The zero Cursor is the newest page.
type Cursor struct {
	Audit, Ledger, Intent int64
}

// exhausted is the bound of a source that has nothing older: ids and places start at 1.
const exhausted = 1

// String is the cursor as a page's query or the CLI's output carry it: "<audit>.<ledger>:<intent>".
func (c Cursor) String() string {
	return strconv.FormatInt(c.Audit, 10) + "." + strconv.FormatInt(c.Ledger, 10) + ":" + strconv.FormatInt(c.Intent, 10)
}

// ParseCursor reads a Cursor's String; "" is the zero Cursor. A cursor of two numbers
// ("<audit>.<ledger>", without ":<intent>") is one given before the changes of payment intents were a
// source of the history, when their operations' records were in the audit log: every change is newer
// than it, so it reads with the intents' bound exhausted, and the next page goes on in the two
// sources it names, as it did then, passing nothing over and showing nothing twice.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	bad := errors.New("history: a cursor is two numbers joined by a dot, then a colon and a third, as a page gave it")
	s, in, hasIntent := strings.Cut(s, ":")
	a, l, ok := strings.Cut(s, ".")
	c := Cursor{Intent: exhausted}
	var errA, errL, errI error
	c.Audit, errA = strconv.ParseInt(a, 10, 64)
	c.Ledger, errL = strconv.ParseInt(l, 10, 64)
	if hasIntent {
		c.Intent, errI = strconv.ParseInt(in, 10, 64)
	}
	if !ok || errA != nil || errL != nil || errI != nil || c.Audit < 0 || c.Ledger < 0 || c.Intent < 0 {
		return Cursor{}, bad
	}
	return c, nil
}

// Filter selects a merchant's history, as audit.Filter does the audit log's. Zero fields select
// everything.
type Filter struct {
	UserID    string // only this staff user's: audit records only, as only they name a user
	Operation string // only this operation: an audit operation, or for ledger rows their kind's (payment.OperationKind)
	Before    Cursor // the page after the one that gave this cursor
	Limit     int    // at most this many: audit.DefaultLimit when 0, at most audit.MaxLimit
}

// Page is a page of the history, newest first, and the Cursor of the next page, whose More says
// whether there may be one.
type Page struct {
	Entries []Entry
	Next    Cursor
	More    bool
}

// List returns a page of the merchant's history that f selects.
func List(ctx context.Context, q store.Querier, merchantID string, f Filter) (Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = audit.DefaultLimit
	}
	limit = min(limit, audit.MaxLimit)
	var page Page
	records, err := audit.List(ctx, q, merchantID, audit.Filter{UserID: f.UserID, Operation: f.Operation, Before: f.Before.Audit, Limit: limit})
	if err != nil {
		return page, err
	}
	var rows []payment.Record
	kind := payment.OperationKind(f.Operation)
	ledger := f.UserID == "" && (f.Operation == "" || kind != "")
	if ledger {
		if rows, err = payment.Records(ctx, q, merchantID, kind, f.Before.Ledger, limit); err != nil {
			return page, err
		}
	}
	// A staff user's operations on intents are in the audit log; the changes name no user.
	var changes []audit.Entry
	if f.UserID == "" {
		if changes, err = checkout.Records(ctx, q, merchantID, f.Operation, f.Before.Intent, limit); err != nil {
			return page, err
		}
	}
	// The newest head at each step; at equal times the ledger row first, then the change, a fixed
	// choice that the cursor's bounds make the next page's too.
	i, j, k := 0, 0, 0
	for len(page.Entries) < limit && (i < len(records) || j < len(rows) || k < len(changes)) {
		switch {
		case j < len(rows) && (i == len(records) || !rows[j].FinishedAt.Before(records[i].At)) &&
			(k == len(changes) || !rows[j].FinishedAt.Before(changes[k].At)):
			page.Entries = append(page.Entries, FromLedger(rows[j]))
			j++
		case k < len(changes) && (i == len(records) || !changes[k].At.Before(records[i].At)):
			page.Entries = append(page.Entries, Entry{Record: changes[k].Record, ChangeID: changes[k].ID})
			k++
		default:
			page.Entries = append(page.Entries, Entry{Record: records[i].Record, AuditID: records[i].ID})
			i++
		}
	}
	page.Next = Cursor{Audit: bound(i, len(records), func(n int) int64 { return records[n].ID }),
		Ledger: exhausted, Intent: bound(k, len(changes), func(n int) int64 { return changes[n].ID })}
	if ledger {
		page.Next.Ledger = bound(j, len(rows), func(n int) int64 { return rows[n].Seq })
	}
	// A source read to its limit may have more beyond; one read short of it has none.
	page.More = i < len(records) || j < len(rows) || k < len(changes) || len(records) == limit || len(rows) == limit ||
		len(changes) == limit
	return page, nil
}

// bound is a source's bound for the next page: below the last of the taken rows it read (key(k)),
// or, when none was taken, at its first row read (its key + 1, so that it is read again), or where
// the source has nothing more.
func bound(taken, read int, key func(int) int64) int64 {
	switch {
	case taken > 0:
		return key(taken - 1)
	case read > 0:
		return key(0) + 1
	}
	return exhausted
}

// FromLedger is the history entry of a ledger row that is its own record.
func FromLedger(r payment.Record) Entry {
	t := r.Transaction
	return Entry{Seq: r.Seq, Record: audit.Record{MerchantID: t.MerchantID, ClientID: t.ClientID, Operation: payment.Operation(t.Kind),
		TransactionID: t.TransactionID, Amount: t.Amount, Currency: t.Currency.Code, Outcome: t.Status, Detail: t.Message,
		RequestID: t.RequestID, At: r.FinishedAt}}
}

// Each calls fn with the merchant's history that f selects (f.Limit is the page read at a time),
// newest first, up to max entries, a page at a time: the memory it holds is a page's, whatever the
// history's size. It stops at fn's first error and returns it.
func Each(ctx context.Context, db *store.DB, merchantID string, f Filter, max int, fn func(Entry) error) error {
	n := 0
	for n < max {
		var page Page
		if err := db.Read(ctx, func(q store.Querier) error {
			var err error
			page, err = List(ctx, q, merchantID, f)
			return err
		}); err != nil {
			return fmt.Errorf("history: read a page: %w", err)
		}
		for _, e := range page.Entries {
			if n == max {
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
			n++
		}
		if !page.More || len(page.Entries) == 0 {
			return nil
		}
		f.Before = page.Next
	}
	return nil
}

// Trail returns the merchant's history of the transactions named (their transaction ids), oldest
// first: their audit records (audit.Trail), the changes of intents that are records of operations on
// them (checkout.RecordsOf) and the ledger rows among them that are their own records
// (payment.RecordsOf), each read by its transaction_id index.
func Trail(ctx context.Context, q store.Querier, merchantID string, transactionIDs []string) ([]Entry, error) {
	records, err := audit.Trail(ctx, q, merchantID, transactionIDs)
	if err != nil {
		return nil, err
	}
	changes, err := checkout.RecordsOf(ctx, q, merchantID, transactionIDs)
	if err != nil {
		return nil, err
	}
	rows, err := payment.RecordsOf(ctx, q, merchantID, transactionIDs)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(records)+len(changes)+len(rows))
	for _, r := range records {
		out = append(out, Entry{Record: r.Record, AuditID: r.ID})
	}
	for _, r := range changes {
		out = append(out, Entry{Record: r.Record, ChangeID: r.ID})
	}
	for _, r := range rows {
		out = append(out, FromLedger(r))
	}
	// Each source is in its own order already; the stable sort by time keeps it at equal times.
	slices.SortStableFunc(out, func(a, b Entry) int { return a.At.Compare(b.At) })
	return out, nil
}

// Package reconcile compares an acquirer's settlement report of a day (acquirer-iso8583.md,
// "Settlement report") with Kassa's ledger of that day for one merchant, and lists every difference
// with what an operator needs to act on it: what `kassa reconcile` prints.
package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
)

// ProcessorKind is the kind of processor account whose transactions an ISO 8583 settlement report lists
// (`kassa merchant update --processor iso8583`).
const ProcessorKind = "iso8583"

// Config says what to reconcile.
type Config struct {
	DB         *store.DB
	MerchantID string
	Day        time.Time // the UTC day reconciled: any instant of it
	Report     []Row     // the acquirer's settlement report of that day (Parse)
}

// Result is what reconciliation found. Every list is in report order, or, for MissingAtAcquirer, in
// ledger order.
type Result struct {
	// Matched counts the report's rows that agree with Kassa's transaction of the same reference: both
	// in effect with the same kind, amount and currency, or both not in effect (reversed at the
	// acquirer; voided, declined or still pending in Kassa).
	Matched int `json:"matched"`
	// MissingInKassa are rows in effect at the acquirer (not reversed) of which Kassa holds no
	// transaction of the day in effect: unknown to Kassa, declined, voided or pending there, or of
	// another day or processor (Kassa's transaction, when there is one, says which).
	MissingInKassa []Entry `json:"missing_in_kassa"`
	// MissingAtAcquirer are the day's approved transactions of Kassa that the report does not list.
	MissingAtAcquirer []Entry `json:"missing_at_acquirer"`
	// AmountMismatch are rows in effect on both sides that differ in amount, currency or kind
	// (Entry.Differs says which).
	AmountMismatch []Entry `json:"amount_mismatch"`
	// ReversedAtAcquirer are rows reversed at the acquirer whose transaction Kassa holds as approved
	// and in effect: the customer was not charged, or the hold was released, while Kassa says otherwise.
	ReversedAtAcquirer []Entry `json:"reversed_at_acquirer"`
	// KassaTotal and AcquirerTotal are each side's net of the day, per currency, in minor units: sales
	// and captures in effect, less refunds in effect. Authorizations move no money and count zero;
	// operations not in effect count nothing. Both name the same currencies.
	KassaTotal    map[string]int64 `json:"kassa_total"`
	AcquirerTotal map[string]int64 `json:"acquirer_total"`
	// OtherMerchants counts the rows of Kassa's other merchants, which a report of a host shared by
	// several merchants lists too; they are left to those merchants' reconciliation.
	OtherMerchants int `json:"other_merchants"`
}

// Entry is one difference: the acquirer's row and Kassa's transaction of a reference, either absent
// when that side has none.
type Entry struct {
	Reference string       `json:"reference"`
	Acquirer  *Row         `json:"acquirer,omitempty"`
	Kassa     *Transaction `json:"kassa,omitempty"`
	// Differs names what differs in an AmountMismatch entry: "amount", "currency", "kind".
	Differs []string `json:"differs,omitempty"`
}

// Transaction is Kassa's transaction of a reference, as reconciliation shows it.
type Transaction struct {
	ID          int64  `json:"id"`   // the numeric id the gateway API takes
	Kind        string `json:"kind"` // SALE, AUTHORIZATION, CAPTURE, REFUND, VOID
	Status      string `json:"status"`
	DeclineCode string `json:"decline_code,omitempty"`
	ClosedBy    string `json:"closed_by,omitempty"` // an authorization's CAPTURE or VOID
	Amount      int64  `json:"amount"`              // minor units of Currency
	Currency    string `json:"currency"`
	CreatedAt   int64  `json:"created_at"` // Unix milliseconds
	// Processor is the kind of account that took it ("iso8583", "stripe"), or "simulator".
	Processor        string `json:"processor"`
	ProcessorAccount string `json:"processor_account,omitempty"`

	reference, merchantID string
	ofDay                 bool // one of Kassa's side of the day
	listed                bool // a row of the report names it
}

// inEffect reports whether t moved money or holds it: approved, and for an authorization not voided.
func (t *Transaction) inEffect() bool {
	return t.Status == "APPROVED" && t.ClosedBy != "VOID"
}

// Differs reports whether the report and the ledger disagree. When nothing is listed the totals
// agree too: every operation in effect on one side is matched by one on the other.
func (r Result) Differs() bool {
	return len(r.MissingInKassa)+len(r.MissingAtAcquirer)+len(r.AmountMismatch)+len(r.ReversedAtAcquirer) > 0
}

// Summary says in one line how the report and the ledger differ.
func (r Result) Summary() string {
	var parts []string
	for _, l := range []struct {
		n    int
		what string
	}{{len(r.MissingInKassa), "missing in Kassa"}, {len(r.MissingAtAcquirer), "missing at the acquirer"},
		{len(r.AmountMismatch), "amount mismatch"}, {len(r.ReversedAtAcquirer), "reversed at the acquirer"}} {
		if l.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", l.n, l.what))
		}
	}
	return strings.Join(parts, ", ")
}

// Reconcile compares cfg.Report with the merchant's ledger of cfg.Day. Kassa's side of the day is
// the merchant's sales, authorizations (card verifications of 0 included), captures and refunds
// created that UTC day by an ISO 8583 account (a transaction of the simulator or of another processor
// is not the acquirer's). Rows and transactions are matched by reference, Kassa's transaction_id.
//
// A row of another day is a *ReportError: the report is not the day's. An unknown merchant is
// merchant.ErrNotFound.
func Reconcile(ctx context.Context, cfg Config) (Result, error) {
	y, m, d := cfg.Day.UTC().Date()
	start := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	day := start.Format(time.DateOnly)
	for _, row := range cfg.Report {
		if row.Date != day {
			return Result{}, &ReportError{Line: row.Line, Column: "date", Reason: "the row is of " + row.Date + ", not of the day reconciled, " + day}
		}
	}
	res := Result{MissingInKassa: []Entry{}, MissingAtAcquirer: []Entry{}, AmountMismatch: []Entry{}, ReversedAtAcquirer: []Entry{},
		KassaTotal: map[string]int64{}, AcquirerTotal: map[string]int64{}}
	var ours []*Transaction // Kassa's side of the day
	known := map[string]*Transaction{}
	err := cfg.DB.Read(ctx, func(q store.Querier) error {
		if _, err := merchant.Get(ctx, q, cfg.MerchantID); err != nil {
			return err
		}
		var err error
		if ours, err = dayOf(ctx, q, cfg.MerchantID, start); err != nil {
			return err
		}
		var others []string // references not of the day: what does Kassa know of them?
		for _, t := range ours {
			known[t.reference] = t
		}
		for _, row := range cfg.Report {
			if known[row.Reference] == nil {
				others = append(others, row.Reference)
			}
		}
		return lookUp(ctx, q, others, known)
	})
	if err != nil {
		return Result{}, err
	}
	for i := range cfg.Report {
		row := &cfg.Report[i]
		t := known[row.Reference]
		if t != nil && t.merchantID != cfg.MerchantID {
			res.OtherMerchants++
			continue
		}
		if !row.Reversed {
			addTotal(res.AcquirerTotal, row.Kind, row.Currency, row.Amount)
		}
		ofDay := t != nil && t.ofDay
		if ofDay {
			t.listed = true
		}
		entry := Entry{Reference: row.Reference, Acquirer: row, Kassa: t}
		switch {
		case row.Reversed && ofDay && !t.inEffect():
			// "a report row with reversed true is not in effect: it matches a Kassa transaction that is
			// not in effect either"
			res.Matched++
		case row.Reversed && ofDay:
			res.ReversedAtAcquirer = append(res.ReversedAtAcquirer, entry)
		case row.Reversed:
			// It names no transaction of the day: in effect nowhere, neither a match nor a difference.
		case !ofDay || !t.inEffect():
			res.MissingInKassa = append(res.MissingInKassa, entry)
		default:
			if entry.Differs = differences(row, t); entry.Differs != nil {
				res.AmountMismatch = append(res.AmountMismatch, entry)
			} else {
				res.Matched++
			}
		}
	}
	for _, t := range ours {
		if t.inEffect() {
			addTotal(res.KassaTotal, t.Kind, t.Currency, t.Amount)
		}
		// "an approved Kassa transaction with no row is missing_at_acquirer": the host lists every
		// approval, an authorization voided since included.
		if !t.listed && t.Status == "APPROVED" {
			res.MissingAtAcquirer = append(res.MissingAtAcquirer, Entry{Reference: t.reference, Kassa: t})
		}
	}
	// Both totals name every currency either side dealt in.
	for c := range res.KassaTotal {
		res.AcquirerTotal[c] += 0
	}
	for c := range res.AcquirerTotal {
		res.KassaTotal[c] += 0
	}
	return res, nil
}

// differences names what differs between a row in effect and Kassa's transaction in effect.
func differences(row *Row, t *Transaction) []string {
	var d []string
	if row.Amount != t.Amount {
		d = append(d, "amount")
	}
	if row.Currency != t.Currency {
		d = append(d, "currency")
	}
	if row.Kind != t.Kind {
		d = append(d, "kind")
	}
	return d
}

// addTotal counts an operation in effect into a day's net: sales and captures in, refunds out.
func addTotal(total map[string]int64, kind, currency string, amount int64) {
	switch kind {
	case "SALE", "CAPTURE":
		total[currency] += amount
	case "REFUND":
		total[currency] -= amount
	default:
		total[currency] += 0 // an authorization: no money moved, but the currency was dealt in
	}
}

// dayOf reads Kassa's side of the day that begins at start: the merchant's sales, authorizations,
// captures and refunds created that day by an ISO 8583 account, pending or not, in ledger order.
// The settled ones are found through the index of the merchant's transactions by time, which on
// PostgreSQL holds settled transactions only (migration 00063), and the pending ones through the index
// of pending attempts; one statement reads both, in one snapshot, so that an attempt whose outcome
// commits meanwhile is read once, pending or settled.
func dayOf(ctx context.Context, q store.Querier, merchantID string, start time.Time) ([]*Transaction, error) {
	const day = `WHERE t.merchant_id = $1 AND t.created_at >= $2 AND t.created_at < $3
		AND t.kind IN ('SALE', 'AUTHORIZATION', 'CAPTURE', 'REFUND') AND a.kind = $4`
	ts, err := scan(ctx, q, selectTransactions+day+` AND t.status <> 'PENDING'
		UNION ALL `+selectTransactions+day+` AND t.status = 'PENDING' ORDER BY 1`,
		merchantID, start.UnixMilli(), start.AddDate(0, 0, 1).UnixMilli(), ProcessorKind)
	for _, t := range ts {
		t.ofDay = true
	}
	return ts, err
}

// lookUpBatch bounds the references of one query.
const lookUpBatch = 500

// lookUp adds to known Kassa's transactions of refs, of any merchant, day or processor.
func lookUp(ctx context.Context, q store.Querier, refs []string, known map[string]*Transaction) error {
	for len(refs) > 0 {
		batch := refs[:min(len(refs), lookUpBatch)]
		refs = refs[len(batch):]
		marks := make([]string, len(batch))
		args := make([]any, len(batch))
		for i, r := range batch {
			marks[i], args[i] = fmt.Sprintf("$%d", i+1), r
		}
		ts, err := scan(ctx, q, selectTransactions+`WHERE t.transaction_id IN (`+strings.Join(marks, ", ")+`)`, args...)
		if err != nil {
			return err
		}
		for _, t := range ts {
			known[t.reference] = t
		}
	}
	return nil
}

// selectTransactions is the head of a statement that selects transactions for scan, up to its WHERE.
const selectTransactions = `SELECT t.id, t.transaction_id, t.merchant_id, t.kind, t.status, COALESCE(t.decline_code, ''),
	COALESCE(t.closed_by, ''), t.amount, t.currency, t.created_at, COALESCE(a.kind, 'simulator'), COALESCE(t.processor_account, '')
	FROM transactions t LEFT JOIN processor_accounts a ON a.id = t.processor_account `

// scan reads the transactions that stmt, a selectTransactions statement, selects.
func scan(ctx context.Context, q store.Querier, stmt string, args ...any) ([]*Transaction, error) {
	rows, err := q.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ts []*Transaction
	for rows.Next() {
		t := &Transaction{}
		if err := rows.Scan(&t.ID, &t.reference, &t.merchantID, &t.Kind, &t.Status, &t.DeclineCode, &t.ClosedBy, &t.Amount,
			&t.Currency, &t.CreatedAt, &t.Processor, &t.ProcessorAccount); err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, rows.Err()
}

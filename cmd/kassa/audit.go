package main

import (
	"context"
	"errors"
	"flag"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/history"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/store"
)

// auditEntry is one entry of the history in "kassa audit list": the Activity page's, and its
// export's columns.
type auditEntry struct {
	Time          string `json:"time"`   // RFC 3339, UTC, to the millisecond
	Source        string `json:"source"` // "audit": an audit record; "ledger": a ledger row that is its operation's record
	UserID        string `json:"user_id,omitempty"`
	ClientID      string `json:"client_id,omitempty"`
	Operation     string `json:"operation"`
	TransactionID string `json:"transaction_id,omitempty"`
	Resource      string `json:"resource,omitempty"`
	Amount        string `json:"amount,omitempty"` // major units, as the API shows it
	Currency      string `json:"currency,omitempty"`
	Outcome       string `json:"outcome"`
	Detail        string `json:"detail,omitempty"`
	RequestID     string `json:"request_id,omitempty"`
	Address       string `json:"address,omitempty"`
}

// auditPage is what "kassa audit list" prints: a page of the merchant's history, newest first, and
// the --before of the next page ("" when there is none).
type auditPage struct {
	Entries []auditEntry `json:"entries"`
	Next    string       `json:"next,omitempty"`
}

func auditListCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	merchantID := fs.String("merchant-id", "", "merchant whose history to list (required)")
	userID := fs.String("user", "", "only this staff user's records (a user id, as \"kassa user list\" prints it)")
	operation := fs.String("operation", "", "only this operation: sale, authorize, capture, refund, void, recover, client.create, …")
	limit := fs.Int("limit", audit.DefaultLimit, "at most this many entries, 1 to "+strconv.Itoa(audit.MaxLimit))
	before := fs.String("before", "", "the page after the one whose \"next\" this is")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *merchantID}); err != nil {
			return err
		}
		if *limit < 1 || *limit > audit.MaxLimit {
			return usagef("--limit must be 1 to %d", audit.MaxLimit)
		}
		cursor, err := history.ParseCursor(*before)
		if err != nil {
			return usagef("--before must be the \"next\" of an earlier page")
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		var page history.Page
		err = db.Read(ctx, func(q store.Querier) error {
			if _, err := merchant.Get(ctx, q, *merchantID); err != nil {
				return err
			}
			page, err = history.List(ctx, q, *merchantID, history.Filter{UserID: *userID, Operation: *operation, Before: cursor, Limit: *limit})
			return err
		})
		if errors.Is(err, merchant.ErrNotFound) {
			return errors.New("no merchant with id " + *merchantID)
		}
		if err != nil {
			return err
		}
		out := auditPage{Entries: []auditEntry{}}
		for _, en := range page.Entries {
			a := auditEntry{Time: en.At.UTC().Format(time.RFC3339Nano), Source: "audit", UserID: en.UserID, ClientID: en.ClientID,
				Operation: en.Operation, TransactionID: en.TransactionID, Resource: en.Resource, Currency: en.Currency, Outcome: en.Outcome,
				Detail: en.Detail, RequestID: en.RequestID, Address: en.Address}
			if en.Seq != 0 {
				a.Source = "ledger"
			}
			if c, ok := money.Lookup(en.Currency); ok {
				a.Amount = money.Format(en.Amount, c)
			}
			out.Entries = append(out.Entries, a)
		}
		if page.More {
			out.Next = page.Next.String()
		}
		return printJSON(e.stdout, out)
	}
}

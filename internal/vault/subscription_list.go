package vault

import (
	"context"
	"slices"
	"strconv"

	"github.com/kassapay/kassa/internal/store"
)

// SubscriptionRow is a subscription as the merchant's lists show it: with its customer.
type SubscriptionRow struct {
	Subscription
	CustomerName, CustomerEmail string
}

// SubscriptionFilter selects the merchant's subscriptions: in one status, or one subscription of
// one customer; a page of at most Limit, newest first, older than the row id After or newer than the
// row id Before.
type SubscriptionFilter struct {
	Status                     string // "" for every status
	CustomerLookupID, LookupID string // both "" for every subscription
	After, Before              int64
	Limit                      int
}

// ListSubscriptions returns the merchant's subscriptions that f selects, newest first, through the
// index on (merchant_id, status, id) or (merchant_id, id).
func ListSubscriptions(ctx context.Context, q store.Querier, merchantID string, f SubscriptionFilter) ([]SubscriptionRow, error) {
	where := " WHERE s.merchant_id = $1"
	args := []any{merchantID}
	add := func(cond string, v any) {
		args = append(args, v)
		where += " AND " + cond + " $" + strconv.Itoa(len(args))
	}
	if f.Status != "" {
		add("s.status =", f.Status)
	}
	if f.LookupID != "" {
		add("cu.lookup_id =", f.CustomerLookupID)
		add("s.lookup_id =", f.LookupID)
	}
	order := "DESC"
	switch {
	case f.After > 0:
		add("s.id <", f.After)
	case f.Before > 0:
		add("s.id >", f.Before)
		order = "ASC"
	}
	args = append(args, f.Limit)
	rows, err := q.QueryContext(ctx, `SELECT `+SubscriptionColumns+`, TRIM(cu.first_name || ' ' || cu.last_name), cu.email`+
		SubscriptionFrom+where+` ORDER BY s.id `+order+` LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SubscriptionRow
	for rows.Next() {
		var r SubscriptionRow
		if r.Subscription, err = ScanSubscription(scanExtra{rows, []any{&r.CustomerName, &r.CustomerEmail}}); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if order == "ASC" {
		slices.Reverse(out)
	}
	return out, rows.Err()
}

// scanExtra scans a row's leading columns into what its caller asks for, and the rest into extra.
type scanExtra struct {
	row   interface{ Scan(...any) error }
	extra []any
}

func (s scanExtra) Scan(dest ...any) error { return s.row.Scan(append(dest, s.extra...)...) }

package processortest

import (
	"context"

	"github.com/kassapay/kassa/internal/processor"
)

// OneAccount is every merchant's and every transaction's processor account (the payment ledger's
// Processors), for tests and benchmarks of a ledger with a single account.
type OneAccount struct{ Acct processor.Account }

// ForMerchant returns the account, whatever the merchant.
func (o OneAccount) ForMerchant(context.Context, string) (processor.Account, error) {
	return o.Acct, nil
}

// Account returns the account, whatever the id.
func (o OneAccount) Account(context.Context, string) (processor.Account, error) { return o.Acct, nil }

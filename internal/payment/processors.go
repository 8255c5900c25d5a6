package payment

import (
	"context"
	"net/http"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/processor"
)

// Processors are the processor accounts the ledger sends operations to: the one that takes a
// merchant's new payments, and the one that took a given transaction. A transaction records its
// account, so that its capture, refund, void and recovery go where it went even after the merchant
// has changed processor: a capture, refund or void goes to the processor that took the original.
type Processors interface {
	// ForMerchant is the account that takes the merchant's new payments. It runs on every payment
	// and must answer from memory.
	ForMerchant(ctx context.Context, merchantID string) (processor.Account, error)
	// Account is the account with the given id; "" is the built-in simulator.
	Account(ctx context.Context, id string) (processor.Account, error)
}

// accountFor is the account that takes c: the merchant's, or the simulator when c asks for a test.
// A transaction's test_mode is then its account's, so that test_mode tells the truth.
func (l *Ledger) accountFor(ctx context.Context, c Charge) (processor.Account, error) {
	if c.TestMode {
		return l.procs.Account(ctx, "")
	}
	acct, err := l.procs.ForMerchant(ctx, c.MerchantID)
	if err != nil {
		// Never the simulator instead: a payment meant for a live acquirer must not be approved by it.
		l.log.ErrorContext(ctx, "the merchant's processor account is not available", "merchant_id", c.MerchantID, "err", err)
		return processor.Account{}, &fault.Error{Status: http.StatusBadGateway, Code: "processor_unavailable",
			Message: "The merchant's processor is not available on this server. Nothing was charged; retry."}
	}
	return acct, nil
}

// Live reports whether the merchant's new payments go to a live processor account: what v1 objects
// created now say as livemode. An account that is not available counts as live: it is not the
// simulator's.
func (l *Ledger) Live(ctx context.Context, merchantID string) bool {
	acct, err := l.procs.ForMerchant(ctx, merchantID)
	return err != nil || !acct.Test
}

// Test reports whether a payment of the merchant that a page shows moves no money: the recorded
// test_mode of transactionID when it names one of the merchant's transactions with an outcome, else
// (none yet, or one that cannot be read) whether the merchant's new payments go to a test account,
// as Live says. Pages use it to mark test payments; it never decides where a payment goes.
func (l *Ledger) Test(ctx context.Context, merchantID, transactionID string) bool {
	if transactionID != "" {
		if t, err := l.Get(ctx, merchantID, transactionID); err == nil {
			return t.TestMode
		}
	}
	return !l.Live(ctx, merchantID)
}

// prepare asks a processor that is a processor.Preparer for the trace of the operation about to be
// recorded; "" for any other. Nothing is recorded or charged when it fails.
func (l *Ledger) prepare(ctx context.Context, acct processor.Account, a Actor) (string, error) {
	p, ok := acct.Processor.(processor.Preparer)
	if !ok {
		return "", nil
	}
	trace, err := p.Prepare(ctx, a.merchant())
	if err != nil {
		l.log.WarnContext(ctx, "processor could not prepare an operation", "processor_account", acct.ID, "err", err)
		return "", &fault.Error{Status: http.StatusBadGateway, Code: "processor_unavailable",
			Message: "The processor is not available. Nothing was charged; retry."}
	}
	return trace, nil
}

// merchant is what the processor is told of the merchant acting.
func (a Actor) merchant() processor.Merchant {
	return processor.Merchant{ID: a.MerchantID, SimulatorProfile: a.Profile, Location: a.Location}
}

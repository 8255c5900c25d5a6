// Package paymenttest sets up a payment ledger for measurements outside package payment: the ledger
// benchmark (BenchmarkCharge) and the load benchmark's ledger scenario (cmd/kassa-load) run the same
// ledger on the same sale through SaleLedger, so that their figures stand for the same work.
package paymenttest

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	cardpkg "github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/velocity"
)

// SaleLedger is a ledger on db taking sales through the built-in simulator answering at once, with
// the velocity limits on, for a merchant it creates in db; and the sale the load benchmark's sale
// scenario asks for (10.00 CAD, a Visa, 12/30, a CVV and an e-mail, e-commerce) for that merchant.
// The caller sets each sale's RequestID. db must be migrated.
func SaleLedger(ctx context.Context, db *store.DB) (*payment.Ledger, payment.Charge, error) {
	kek, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		return nil, payment.Charge{}, err
	}
	ring, err := envelope.NewKeyring(ctx, db, kek, time.Now)
	if err != nil {
		return nil, payment.Charge{}, fmt.Errorf("keyring: %w", err)
	}
	limits, err := velocity.New(ctx, velocity.Config{DB: db, Keyring: ring, Now: time.Now})
	if err != nil {
		return nil, payment.Charge{}, fmt.Errorf("velocity limits: %w", err)
	}
	var m merchant.Merchant
	if err := db.Write(ctx, func(tx *store.Tx) error {
		m, err = merchant.Create(ctx, tx, merchant.New{Name: "Bench", Email: strings.ToLower(rand.Text()) + "@example.com"}, time.Now())
		return err
	}); err != nil {
		return nil, payment.Charge{}, fmt.Errorf("merchant: %w", err)
	}
	sim := processor.Account{Kind: "simulator", Test: true, Processor: simulator.New(simulator.Config{})}
	l := payment.New(payment.Config{DB: db, Processors: processortest.OneAccount{Acct: sim}, Velocity: limits})
	number, err := cardpkg.ParseNumber(cardtest.Visa)
	if err != nil {
		return nil, payment.Charge{}, err
	}
	expiry, err := cardpkg.ParseExpiry("12", "30")
	if err != nil {
		return nil, payment.Charge{}, err
	}
	cad, _ := money.Lookup("CAD")
	return l, payment.Charge{Actor: payment.Actor{MerchantID: m.ID, ClientID: fmt.Sprintf("%032x", 1)},
		Kind: payment.KindSale, Amount: 1000, Currency: cad, Card: number, Expiry: expiry, CVV: "123",
		Customer: payment.Customer{Email: "load@example.com"}, Source: payment.SourceEcommerce}, nil
}

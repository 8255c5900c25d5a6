package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/payment/paymenttest"
	"github.com/kassapay/kassa/internal/store"
)

// The ledger scenario: the ledger alone, the work of internal/payment's BenchmarkCharge
// (paymenttest.SaleLedger: the simulator answering at once, the sale scenario's sale) from the
// scenario's clients calling Ledger.Charge, with no HTTP, no JSON and no token, on a fresh database
// of the backend with its production durability (SQLite synchronous=FULL; PostgreSQL on the durable
// cluster of the run). Its sales per second are compared with the bare handler's answers of the
// same run (http-ceiling).
//
// It runs in this process, not in one of its own as the bare handler does: the scenarios run one
// after the other, so the ledger never shares the cores with the bare handler or the load generator's
// HTTP clients, and nothing else runs in this process while it is measured, so the process's CPU time
// over the measured period is the ledger's (with the 64 goroutines' loop around Charge, which a
// server's handlers have too). Its database stays open, idle, between its rounds, as the server's does.

// ledgerBench is the ledger scenario's ledger on one backend, and the sale it makes.
type ledgerBench struct {
	db   *store.DB
	l    *payment.Ledger
	sale payment.Charge
}

// ledgerOp is the ledger scenario's operation, as the results name it.
const ledgerOp = "ledger sale"

// openLedger opens the ledger scenario's database of env ("ledger") and sets up its ledger.
func openLedger(ctx context.Context, env *environment) (*ledgerBench, error) {
	db, err := env.openStore(ctx, "ledger")
	if err != nil {
		return nil, err
	}
	l, sale, err := paymenttest.SaleLedger(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &ledgerBench{db: db, l: l, sale: sale}, nil
}

func (lb *ledgerBench) close() { lb.db.Close() }

// drive sells from c.clients goroutines: warm-up first, then the measured period. A sale that is not
// approved counts as an error.
func (lb *ledgerBench) drive(ctx context.Context, c config) (*result, error) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		return nil, err
	}
	return load(ctx, c, []string{ledgerOp}, []*os.Process{self}, func() loop {
		return func(ctx context.Context, report func(string, time.Duration, error)) {
			sale := lb.sale
			sale.RequestID = "req-" + rand.Text()
			start := time.Now()
			t, err := lb.l.Charge(ctx, sale)
			if err == nil && t.Status != payment.StatusApproved {
				err = fmt.Errorf("ledger sale: %s, want %s", t.Status, payment.StatusApproved)
			}
			report(ledgerOp, time.Since(start), err)
		}
	})
}

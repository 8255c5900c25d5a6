package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/reconcile"
)

// reconcileCommand compares an acquirer's settlement report with the merchant's ledger of the same
// UTC day. It prints what it found whether or not the two agree, and exits 1
// when they do not, so that a scheduled run can alert on the status alone.
func reconcileCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	merchantID := fs.String("merchant-id", "", "merchant whose ledger to reconcile (required)")
	date := fs.String("date", "", "the UTC day reconciled, YYYY-MM-DD (required)")
	report := fs.String("report", "", "the acquirer's settlement report of that day, CSV (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *merchantID}, [2]string{"date", *date}, [2]string{"report", *report}); err != nil {
			return err
		}
		day, err := time.Parse(time.DateOnly, *date)
		if err != nil {
			return usagef("--date must be a day, YYYY-MM-DD")
		}
		f, err := os.Open(*report)
		if err != nil {
			return err
		}
		defer f.Close()
		rows, err := reconcile.Parse(f)
		if err != nil {
			return err
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		res, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, MerchantID: *merchantID, Day: day, Report: rows})
		if errors.Is(err, merchant.ErrNotFound) {
			return errors.New("no merchant with id " + *merchantID)
		}
		if err != nil {
			return err
		}
		if err := printJSON(e.stdout, res); err != nil {
			return err
		}
		if res.Differs() {
			return errors.New("the report and the ledger differ: " + res.Summary())
		}
		return nil
	}
}

package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// ceiling measures how many sales per second the backend can durably record without Kassa: c.clients
// goroutines each write what a sale writes — the pending attempt in one transaction, then the outcome
// and the audit record in a second — through the same driver, connection settings and durability
// (store.DB.Raw), in a fresh database, with plain database/sql transactions.
func ceiling(ctx context.Context, env *environment, c config) (float64, error) {
	db, err := env.openStore(ctx, "ceiling")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	raw := db.Raw()
	now := time.Now().UnixMilli()
	if _, err := raw.ExecContext(ctx, `INSERT INTO merchants (id, name, email, email_key, default_currency, created_at)
		VALUES ('ce111e1000', 'Ceiling', 'c@example.com', 'c@example.com', 'CAD', $1)`, now); err != nil {
		return 0, err
	}
	write := func(ctx context.Context, fn func(tx *sql.Tx) error) error {
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	sale := func(ctx context.Context) error {
		var id int64
		txid := rand.Text()[:20]
		now := time.Now().UnixMilli()
		if err := write(ctx, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, `INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount, currency,
				scale, card_type, card_prefix, card_suffix, test_mode, source, email, client_id, request_id, lease_until, created_at, updated_at)
				VALUES ($1, 'ce111e1000', 'SALE', 'PENDING', 1000, 'CAD', 2, 'VISA', '424242', '4242', FALSE, 'E_COMMERCE',
				'load@example.com', '0123456789abcdef0123456789abcdef', 'req-1', $2, $3, $3) RETURNING id`,
				txid, now+60000, now).Scan(&id)
		}); err != nil {
			return err
		}
		return write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `UPDATE transactions SET status = 'APPROVED', message = 'Approved', processor_ref = $2,
				lease_until = NULL, updated_at = $3 WHERE id = $1 AND status = 'PENDING'`, id, "sim_"+txid, now); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO audit_log (merchant_id, client_id, operation, transaction_id, amount, currency,
				outcome, detail, request_id, created_at) VALUES ('ce111e1000', '0123456789abcdef0123456789abcdef', 'sale', $1, 1000,
				'CAD', 'APPROVED', 'Approved', 'req-1', $2)`, txid, now)
			return err
		})
	}
	runCtx, stop := context.WithTimeout(ctx, c.warmup+c.duration)
	defer stop()
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	measureFrom := time.Now().Add(c.warmup)
	var wg sync.WaitGroup
	for range c.clients {
		wg.Go(func() {
			for runCtx.Err() == nil {
				err := sale(runCtx)
				if err != nil && runCtx.Err() == nil {
					once.Do(func() { firstErr = err })
					return
				}
				if err == nil && time.Now().After(measureFrom) {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / c.duration.Seconds(), nil
}

package iso8583_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/acquirer"
	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	ledger "github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/iso8583"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

// The ledger's captures, refunds and voids on the connector while it reserves its numbers: with a
// block of one, every message's STAN and RRN are reserved by a database write of their own, so each
// follow-up's trace is prepared with a write. On SQLite that write, made from inside the write that
// records the follow-up, once waited for itself for ever and with it every write of the server (found
// by the soak: the whole server stopped the first time a block ran out during a
// follow-up). Each operation must end, with kassa-acquirer's host approving it.
func TestFollowUpsWhileNumbersAreReserved(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		k, _ := newKind(t, db, iso8583.KindConfig{Block: 1})
		kek, err := envelope.ParseKEK(envelope.NewKEKText())
		if err != nil {
			t.Fatal(err)
		}
		ring, err := envelope.NewKeyring(ctx, db, kek, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		limits, err := velocity.New(ctx, velocity.Config{DB: db, Keyring: ring})
		if err != nil {
			t.Fatal(err)
		}
		books := ledger.New(ledger.Config{DB: db, Processors: processortest.OneAccount{Acct: processor.Account{ID: "acct", Kind: "iso8583",
			Processor: open(t, k, config(h.Addr(), "TERM0001", "5s"))}}, Velocity: limits})
		var merchantID string
		if err := db.Write(ctx, func(tx *store.Tx) error {
			m, err := merchant.Create(ctx, tx, merchant.New{Name: "Shop", Email: "shop@example.com"}, time.Now())
			merchantID = m.ID
			return err
		}); err != nil {
			t.Fatal(err)
		}
		actor := ledger.Actor{MerchantID: merchantID}
		pan, err := card.ParseNumber(cardtest.Visa)
		if err != nil {
			t.Fatal(err)
		}
		exp, _ := card.ParseExpiry("12", "2099")
		// within fails the test when op does not end within 10 s, rather than hanging the package.
		within := func(name string, op func() (ledger.Transaction, error)) ledger.Transaction {
			t.Helper()
			type result struct {
				tx  ledger.Transaction
				err error
			}
			done := make(chan result, 1)
			go func() {
				tx, err := op()
				done <- result{tx, err}
			}()
			select {
			case r := <-done:
				if r.err != nil || r.tx.Status != ledger.StatusApproved {
					t.Fatalf("%s: %+v, %v", name, r.tx, r.err)
				}
				return r.tx
			case <-time.After(10 * time.Second):
				// Not t.Fatal: the test's cleanup would close the database, which waits for the stuck
				// write, and the package would hang until its timeout instead of failing here.
				panic(name + " did not end within 10 s: the write that records it waits for the write that reserves its numbers")
			}
		}
		charge := func(kind string, amount int64) ledger.Transaction {
			return within(strings.ToLower(kind), func() (ledger.Transaction, error) {
				return books.Charge(ctx, ledger.Charge{Actor: actor, Kind: kind, Amount: amount, Currency: cad, Card: pan, Expiry: exp,
					CVV: "123", Source: ledger.SourceEcommerce})
			})
		}
		followUp := func(name string, op func(context.Context, ledger.FollowUp) (ledger.Transaction, error), parent ledger.Transaction, amount int64) {
			within(name, func() (ledger.Transaction, error) {
				return op(ctx, ledger.FollowUp{Actor: actor, ParentID: parent.ID, Amount: amount})
			})
		}
		auth := charge(ledger.KindAuthorization, 5000)
		followUp("capture", books.Capture, auth, 3000)
		sale := charge(ledger.KindSale, 2000)
		followUp("refund", books.Refund, sale, 500)
		followUp("second refund", books.Refund, sale, 700)
		followUp("void", books.Void, charge(ledger.KindAuthorization, 1000), 0)

		var reserved int64
		if err := db.Read(ctx, func(q store.Querier) error {
			return q.QueryRowContext(ctx, `SELECT MIN(reserved) FROM iso8583_series`).Scan(&reserved)
		}); err != nil {
			t.Fatal(err)
		}
		if reserved < 8 { // seven messages and more (the sign-on), each series a block at a time
			t.Fatalf("a series reserved up to %d: the blocks were not of one number", reserved)
		}
	})
}

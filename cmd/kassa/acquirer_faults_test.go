package main_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/acquirer"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store"
)

// openDB opens the database of dbFlags, as the tests' view of Kassa's ledger.
func openDB(t *testing.T, dbFlags []string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), store.Config{DataDir: flagValue(dbFlags, "--data-dir"), DatabaseURL: flagValue(dbFlags, "--database-url")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// count runs a query of one number.
func count(t *testing.T, db *store.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// reversedAtHost checks the journal of an operation that got no answer: the request (mti), decided
// but its answer withheld or cut off, then the 0400 that names it, acknowledged; the request is
// reversed.
func reversedAtHost(t *testing.T, host *acquirerHost, ref, mti string) {
	t.Helper()
	j := host.journal(t, ref)
	if len(j) != 2 || j[0].MTI != mti || j[0].Status != acquirer.StatusProcessed || !j[0].Reversed ||
		j[1].MTI != "0400" || j[1].ResponseCode != "00" || !strings.HasPrefix(j[1].Original, names(j[0])) || j[1].Amount != j[0].Amount {
		t.Fatalf("the journal of %s: %+v, want the %s reversed by a 0400 naming it", ref, j, mti)
	}
}

// declinedReversed checks that the ledger holds tx declined processing_error after its reversal.
func declinedReversed(t *testing.T, tx map[string]any) {
	t.Helper()
	if tx["transaction_result"] != "DECLINED" || tx["decline_code"] != "processing_error" || tx["transaction_success"] != false {
		t.Fatalf("an operation reversed after no answer: %v, want DECLINED processing_error", tx)
	}
}

// An answer that the host withholds (POST /control {"drop_next":1}) ends in a reversal: a sale's
// 0200, a capture's 0220 and a refund's 0200 get no answer within the account's timeout, Kassa sends
// the 0400 that names each, the host acknowledges it, and the client gets the decline
// (processing_error) that the ledger keeps. The authorization can be captured again and the capture
// refunded in full; a subscription's charge reversed so is made again by the billing engine, once.
// Reconciliation matches the report, where the reversed operations are listed as such.
func TestISO8583DroppedAnswerIsReversed(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			shop := newISOShop(t, backend, "TERM0004", "1s", "--billing-interval", "100ms")
			host := shop.host
			ledger := func(tx map[string]any) map[string]any {
				t.Helper()
				return shop.get(t, "/transaction-service/transaction/"+tx["transaction_id"].(string))
			}

			host.control(t, `{"drop_next":1}`)
			sale := shop.pay(t, "/transaction-service/sale", keyedCard(cardtest.Visa, "42.00"))
			declinedReversed(t, sale)
			declinedReversed(t, ledger(sale))
			reversedAtHost(t, host, sale["transaction_id"].(string), "0200")

			auth := shop.pay(t, "/transaction-service/authorize", keyedCard(cardtest.Visa, "20.00"))
			host.control(t, `{"drop_next":1}`)
			capture := shop.pay(t, "/transaction-service/capture/"+auth["transaction_id"].(string), `{}`)
			declinedReversed(t, capture)
			declinedReversed(t, ledger(capture))
			reversedAtHost(t, host, capture["transaction_id"].(string), "0220")
			again := shop.pay(t, "/transaction-service/capture/"+auth["transaction_id"].(string), `{}`)
			if e := host.sent(t, again); again["transaction_result"] != "APPROVED" || e.MTI != "0220" || e.ResponseCode != "00" {
				t.Fatalf("a capture after the reversed one: %v, sent as %+v", again, e)
			}

			host.control(t, `{"drop_next":1}`)
			refund := shop.pay(t, "/transaction-service/refund/"+again["transaction_id"].(string), `{"amount":"15.00"}`)
			declinedReversed(t, refund)
			reversedAtHost(t, host, refund["transaction_id"].(string), "0200")
			// The reversed refund took nothing: the whole capture can still be refunded.
			refund = shop.pay(t, "/transaction-service/refund/"+again["transaction_id"].(string), `{"amount":"20.00"}`)
			if e := host.sent(t, refund); refund["transaction_result"] != "APPROVED" || e.ProcessingCode != "200000" || e.ResponseCode != "00" {
				t.Fatalf("a refund after the reversed one: %v, sent as %+v", refund, e)
			}

			// A subscription's charge whose answer is withheld is reversed too; the billing engine,
			// having charged nothing, charges the cycle again under a new key, once.
			c, _ := shop.customer(t, cardtest.Mastercard)
			host.control(t, `{"drop_next":1}`)
			sub := shop.subscribe(t, c)
			eventually(t, "the subscription's cycle charged", 20*time.Second, func() bool {
				return shop.get(t, "/customer-service/customer/"+c+"/subscription/"+sub)["completed_cycles"] == float64(1)
			})
			charges := shop.charges(t)
			if len(charges) != 2 || charges[1]["transaction_result"] != "APPROVED" {
				t.Fatalf("the subscription's charges: %v, want one reversed and one approved", charges)
			}
			declinedReversed(t, charges[0])
			reversedAtHost(t, host, charges[0]["transaction_id"].(string), "0200")
			if e := host.sent(t, charges[1]); e.EntryMode != "100" || e.Condition != "02" || e.ResponseCode != "00" {
				t.Fatalf("the subscription's charge again: %+v", e)
			}

			// The reversed sale, capture, refund and charge are in effect nowhere; the authorization,
			// the capture and the refund that followed, and the charge made again, are in effect on
			// both sides.
			out := shop.reconcile(t, 8)
			if out["acquirer_total"].(map[string]any)["CAD"] != float64(500) {
				t.Fatalf("the host's total %v", out["acquirer_total"])
			}
		})
	}
}

// Kassa is killed (SIGKILL) after a sale's request left for the host and before its answer was
// recorded (the host holds its answer 3 s). After the restart the attempt is found unanswered, its
// reversal is recorded and sent, and the host acknowledges it; the sale is declined, a retry with the
// same Idempotency-Key gets that decline without sending anything, and reconciliation matches.
func TestISO8583KillBeforeTheAnswer(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			serve := []string{"--processor-timeout", "2s", "--recovery-interval", "200ms"}
			shop := newISOShop(t, backend, "TERM0005", "2s", serve...)
			host := shop.host
			body, key := keyedCard(cardtest.Visa, "25.00"), "order-kill-9"
			if first := shop.pay(t, "/transaction-service/sale", keyedCard(cardtest.Visa, "10.00")); first["transaction_result"] != "APPROVED" {
				t.Fatalf("a sale before the kill: %v", first)
			}

			host.control(t, `{"latency":"3s"}`)
			go callRaw(shop.srv.url, shop.tok, "/transaction-service/sale", body, key) // dies with the server
			db := openDB(t, shop.dbFlags)
			var ref string
			eventually(t, "the sale's attempt recorded", 10*time.Second, func() bool {
				err := db.Reader().QueryRowContext(context.Background(), `SELECT transaction_id FROM transactions WHERE status = 'PENDING'`).Scan(&ref)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					t.Fatal(err)
				}
				return err == nil
			})
			eventually(t, "the sale at the host", 10*time.Second, func() bool { return len(host.journal(t, ref)) == 1 })
			shop.srv.cmd.Process.Signal(syscall.SIGKILL)
			<-shop.srv.done
			host.control(t, `{"latency":"0s"}`)
			if count(t, db, `SELECT COUNT(*) FROM transactions WHERE transaction_id = $1 AND status = 'PENDING'`, ref) != 1 ||
				count(t, db, `SELECT COUNT(*) FROM reversals`) != 0 {
				t.Fatal("after the kill, the sale is not pending without a reversal")
			}

			shop.serve(t, serve...)
			eventually(t, "the sale settled after the restart", 20*time.Second, func() bool {
				return count(t, db, `SELECT COUNT(*) FROM transactions WHERE transaction_id = $1 AND status = 'PENDING'`, ref) == 0
			})
			reversedAtHost(t, host, ref, "0200")
			retry := call(t, shop.srv.url, shop.tok, "/transaction-service/sale", body, key)
			declinedReversed(t, retry)
			if retry["transaction_id"] != ref {
				t.Fatalf("the retry answered %v, not the sale %s", retry, ref)
			}
			reversedAtHost(t, host, ref, "0200") // nothing sent again
			// The acknowledgement is recorded just after the outcome, which the retry may have read first.
			eventually(t, "the reversal's acknowledgement recorded", 10*time.Second, func() bool {
				return count(t, db, `SELECT COUNT(*) FROM reversals WHERE transaction_id = $1 AND acknowledged_at IS NOT NULL`, ref) == 1
			})
			shop.reconcile(t, 2)
		})
	}
}

// The host is killed (SIGKILL) and started again on the same data directory and port while four
// clients take sales. The connector reconnects; requests that were in flight at the kill are reversed
// (or were answered), those that found no connection within the account's timeout are reversed by
// recovery (the host never received them: 25) and those made later are answered once it is back;
// every sale ends approved or declined (a client that got a 502 asks again with its Idempotency-Key, as
// the answer tells it), nothing is left pending, no reversal is left unacknowledged, and
// reconciliation matches.
func TestISO8583AcquirerRestart(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			shop := newISOShop(t, backend, "TERM0006", "1s", "--processor-timeout", "2s", "--recovery-interval", "200ms")
			srv, tok := shop.srv, shop.tok
			shop.host.control(t, `{"latency":"200ms"}`) // so that requests are in flight when it dies

			var mu sync.Mutex
			var keys []string
			var restarted atomic.Bool
			var approvedAfter atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for c := range 4 {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						key := fmt.Sprintf("order-%d-%d", c, i)
						mu.Lock()
						keys = append(keys, key)
						mu.Unlock()
						back := restarted.Load()
						if tx, err := callRaw(srv.url, tok, "/transaction-service/sale", keyedCard(cardtest.Visa, "1.00"), key); err == nil &&
							tx["transaction_result"] == "APPROVED" && back {
							approvedAfter.Add(1)
						}
					}
				})
			}
			time.Sleep(time.Second)
			shop.host.kill(t)
			// Down for longer than the account's timeout: some sales are never sent.
			time.Sleep(1500 * time.Millisecond)
			shop.host = shop.host.restart(t)
			restarted.Store(true)
			eventually(t, "sales approved through the restarted host", 20*time.Second, func() bool { return approvedAfter.Load() >= 20 })
			close(stop)
			wg.Wait()

			outcome := map[string]map[string]any{}
			eventually(t, "every sale approved or declined", 30*time.Second, func() bool {
				for _, key := range keys {
					if outcome[key] != nil {
						continue
					}
					if out, err := callRaw(srv.url, tok, "/transaction-service/sale", keyedCard(cardtest.Visa, "1.00"), key); err == nil &&
						(out["transaction_result"] == "APPROVED" || out["transaction_result"] == "DECLINED") {
						outcome[key] = out
					}
				}
				return len(outcome) == len(keys)
			})
			db := openDB(t, shop.dbFlags)
			eventually(t, "every reversal acknowledged", 30*time.Second, func() bool {
				return count(t, db, `SELECT COUNT(*) FROM reversals WHERE acknowledged_at IS NULL`) == 0
			})
			if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE status = 'PENDING'`); n != 0 {
				t.Fatalf("%d transactions pending", n)
			}
			if n := count(t, db, `SELECT COUNT(*) FROM reversals`); n == 0 {
				t.Fatal("no request was in flight when the host died: nothing was reversed")
			}

			// Each sale approved is in effect at the host, once; each declined is in effect nowhere
			// (never received, refused, or approved and then reversed: the report lists it reversed).
			matched, approved := 0, 0
			for _, key := range keys {
				tx := outcome[key]
				j := shop.host.journal(t, tx["transaction_id"].(string))
				var sales, rows, inEffect int
				for _, e := range j {
					if e.MTI == "0200" && e.Status == acquirer.StatusProcessed {
						sales++
						if e.ResponseCode == "00" { // a row of the report
							rows++
							if !e.Reversed {
								inEffect++
							}
						}
					}
				}
				switch {
				case sales > 1:
					t.Fatalf("sale %s processed %d times at the host: %+v", key, sales, j)
				case tx["transaction_result"] == "APPROVED" && inEffect == 1:
					approved++
					matched++
				case tx["transaction_result"] == "DECLINED" && tx["decline_code"] == "processing_error" && inEffect == 0:
					matched += rows // listed reversed
				default:
					t.Fatalf("sale %s: %v, at the host %+v", key, tx, j)
				}
			}
			t.Logf("%d sales: %d approved, %d reversed of which %d after they reached the host", len(keys), approved,
				count(t, db, `SELECT COUNT(*) FROM reversals`), matched-approved)
			shop.reconcile(t, matched)
		})
	}
}

// Two nodes (two "kassa serve" on one PostgreSQL database) take sales at once for two merchants on
// one host, each node with its own connection, then again after one of them is killed (SIGKILL) and
// replaced: no STAN is used twice by a terminal on the day (the host would refuse the second with 12,
// as a reuse) and no RRN twice; every sale is approved, and each merchant's reconciliation matches,
// the other's rows set aside.
func TestISO8583TwoNodesShareTheHost(t *testing.T) {
	t.Parallel()
	host := startAcquirer(t)
	dbFlags := dbArgs(t, "postgres")
	merchants := []map[string]any{isoMerchant(t, dbFlags, host, "TERM0007", "5s"), isoMerchant(t, dbFlags, host, "TERM0008", "5s")}

	var mu sync.Mutex
	terminal := map[string]string{} // transaction_id → the merchant's terminal
	var txs []map[string]any
	// round takes 10 sales from each of 3 clients of each merchant on each node, all at once.
	round := func(nodes ...*server) {
		t.Helper()
		var wg sync.WaitGroup
		for _, n := range nodes {
			for i, m := range merchants {
				tok := token(t, n.url, m)
				for range 3 {
					wg.Go(func() {
						for range 10 {
							tx, err := callRaw(n.url, tok, "/transaction-service/sale", keyedCard(cardtest.Visa, "2.00"), "")
							if err != nil || tx["transaction_result"] != "APPROVED" {
								t.Errorf("a sale: %v %v", tx, err)
								return
							}
							mu.Lock()
							terminal[tx["transaction_id"].(string)] = fmt.Sprintf("TERM%04d", 7+i)
							txs = append(txs, tx)
							mu.Unlock()
						}
					})
				}
			}
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	first, second := startServer(t, nil, dbFlags...), startServer(t, nil, dbFlags...)
	round(first, second)
	first.cmd.Process.Signal(syscall.SIGKILL) // its blocks of STANs and RRNs are left part used
	<-first.done
	round(startServer(t, nil, dbFlags...), second)

	stans, rrns := map[string]string{}, map[string]string{}
	for _, tx := range txs {
		e := host.sent(t, tx)
		if e.TerminalID != terminal[tx["transaction_id"].(string)] || e.ResponseCode != "00" {
			t.Fatalf("sale %s at the host: %+v", tx["transaction_id"], e)
		}
		stan := e.TerminalID + " " + e.STAN + " " + e.Transmission[:4]
		if other, ok := stans[stan]; ok {
			t.Fatalf("terminal, STAN and day %q of %s and %s", stan, other, e.Reference)
		}
		if other, ok := rrns[e.RRN]; ok {
			t.Fatalf("RRN %s of %s and %s", e.RRN, other, e.Reference)
		}
		stans[stan], rrns[e.RRN] = e.Reference, e.Reference
	}
	// The settlement report lists each sale once, with the STAN and RRN the journal has.
	_, file := host.report(t)
	report, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		if n := strings.Count(string(report), ","+tx["transaction_id"].(string)+","); n != 1 {
			t.Fatalf("sale %s listed %d times in the settlement report", tx["transaction_id"], n)
		}
	}
	each := len(txs) / len(merchants)
	for _, m := range merchants {
		if out := host.reconcile(t, dbFlags, m, each); out["other_merchants"] != float64(each) {
			t.Fatalf("reconciliation set aside %v rows of the other merchant, want %d", out["other_merchants"], each)
		}
	}
}

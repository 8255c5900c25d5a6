package main_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store"
)

// The billing engine of a real "kassa serve" is killed between "attempt recorded" and "outcome
// recorded" of a subscription charge. After the restart the interrupted attempt is resolved with
// nothing charged and the cycle is charged exactly once. On PostgreSQL two nodes then bill one
// database side by side: every subscription due is charged once, whichever node takes it.
// "kassa billing status" reports the work due while the server is down.
func TestBillingWorkerCrash(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dbFlags := dbArgs(t, backend)
			cfg := store.Config{DataDir: flagValue(dbFlags, "--data-dir"), DatabaseURL: flagValue(dbFlags, "--database-url")}
			m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Box Shop", "--email", "box@example.com"}, dbFlags...)...)
			common := append([]string{"--processor-timeout", "2s", "--recovery-interval", "200ms", "--billing-interval", "200ms"}, dbFlags...)
			srv := startServer(t, nil, append([]string{"--simulator-latency", "1500ms"}, common...)...)
			tok := token(t, srv.url, m)

			plan := callJSON(t, "POST", srv.url+"/plan-service/plan", tok, `{"name":"Daily","amount":"5.00","frequency":"DAILY"}`)["lookup_id"].(string)
			subscribe := func(base, tok string) {
				t.Helper()
				c := callJSON(t, "POST", base+"/customer-service/customer", tok, `{"email":"ada@example.com"}`)["lookup_id"].(string)
				callJSON(t, "POST", base+"/customer-service/customer/"+c+"/card", tok,
					`{"card_number":"`+cardtest.Visa+`","card_expiry_month":12,"card_expiry_year":2099}`)
				callJSON(t, "POST", base+"/customer-service/customer/"+c+"/subscription", tok, `{"plan_lookup_id":"`+plan+`"}`)
			}
			subscribe(srv.url, tok)

			db, err := store.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			q := func(query string, args ...any) int64 {
				t.Helper()
				var n int64
				if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				return n
			}
			eventually(t, "the charge's attempt recorded", 10*time.Second, func() bool {
				return q(`SELECT COUNT(*) FROM transactions WHERE source = 'RECURRING' AND status = 'PENDING'`) == 1
			})
			srv.cmd.Process.Signal(syscall.SIGKILL)
			<-srv.done
			if n := q(`SELECT COUNT(*) FROM subscriptions WHERE completed_cycles = 0 AND lease_owner IS NOT NULL`); n != 1 {
				t.Fatalf("%d leased, uncharged subscriptions after the kill, want 1", n)
			}
			status := cliJSON(t, append([]string{"billing", "status"}, dbFlags...)...)
			if fmt.Sprint(status) != "map[due:1 outbox_backlog:0 retrying:0 suspended:0]" {
				t.Fatalf("billing status with the server down: %v", status)
			}

			srv = startServer(t, nil, append([]string{"--simulator-latency", "50ms"}, common...)...)
			nodes := []*server{srv}
			if backend == "postgres" {
				nodes = append(nodes, startServer(t, nil, append([]string{"--simulator-latency", "50ms"}, common...)...))
				tok = token(t, srv.url, m)
				for i := range 10 {
					subscribe(nodes[i%2].url, tok)
				}
			}
			subs := q(`SELECT COUNT(*) FROM subscriptions`)
			eventually(t, "every subscription charged", 30*time.Second, func() bool {
				return q(`SELECT COUNT(*) FROM subscriptions WHERE completed_cycles = 1`) == subs
			})
			for _, n := range nodes {
				n.cmd.Process.Signal(syscall.SIGTERM)
				<-n.done
			}
			if n := q(`SELECT COUNT(*) FROM transactions WHERE source = 'RECURRING' AND status = 'APPROVED'`); n != subs {
				t.Fatalf("%d approved charges for %d subscriptions", n, subs)
			}
			if n := q(`SELECT COUNT(*) FROM transactions WHERE source = 'RECURRING' AND status = 'DECLINED' AND decline_code = 'processing_error'`); n != 1 {
				t.Fatalf("%d interrupted attempts resolved, want 1", n)
			}
			if n := q(`SELECT COUNT(*) FROM transactions WHERE source = 'RECURRING'`); n != subs+1 {
				t.Fatalf("%d charge attempts for %d subscriptions, want one more (the interrupted one)", n, subs)
			}
			if n := q(`SELECT COUNT(*) FROM subscriptions WHERE status = 'ACTIVE' AND failed_attempts = 0 AND cycle = 1
				AND next_run = start_date + 86400000 AND lease_owner IS NULL`); n != subs {
				t.Fatalf("%d of %d subscriptions ACTIVE with the next cycle a day after the start", n, subs)
			}
			status = cliJSON(t, append([]string{"billing", "status"}, dbFlags...)...)
			if fmt.Sprint(status) != "map[due:0 outbox_backlog:0 retrying:0 suspended:0]" {
				t.Fatalf("billing status once charged: %v", status)
			}
		})
	}
}

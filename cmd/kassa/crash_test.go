package main_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/store"
)

// The server process is killed between "attempt recorded" and "outcome recorded" of a sale and of a
// refund. The attempts stay pending with their reservation; the next start resolves them from the
// processor (which never received them), releases the reservation, and charges nothing twice: a
// retry with the same Idempotency-Key finds the resolved attempt.
func TestCrashBetweenAttemptAndOutcome(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dbFlags := dbArgs(t, backend)
			cfg := store.Config{DataDir: flagValue(dbFlags, "--data-dir"), DatabaseURL: flagValue(dbFlags, "--database-url")}
			m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Crash Shop", "--email", "crash@example.com"}, dbFlags...)...)
			serve := append([]string{"--simulator-latency", "1500ms", "--processor-timeout", "2s", "--recovery-interval", "200ms"}, dbFlags...)
			srv := startServer(t, nil, serve...)
			tok := token(t, srv.url, m)

			sale := call(t, srv.url, tok, "/transaction-service/sale", `{"amount":"100.00","card_number":"4242424242424242","card_expiry_month":12,"card_expiry_year":30,"cvv2":"123"}`, "")
			if sale["transaction_result"] != "APPROVED" {
				t.Fatalf("sale: %v", sale)
			}
			saleID := sale["transaction_id"].(string)
			for _, req := range [][2]string{
				{"/transaction-service/refund/" + saleID, `{"amount":"40.00"}`},
				{"/transaction-service/sale", `{"amount":"7.00","card_number":"5555555555554444","card_expiry_month":12,"card_expiry_year":30,"cvv2":"123"}`},
			} {
				go func() { callRaw(srv.url, tok, req[0], req[1], "crash-"+req[0]) }() // dies with the server
			}

			db, err := store.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			q := func(query string, args ...any) int64 {
				var n int64
				if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				return n
			}
			deadline := time.Now().Add(10 * time.Second)
			for q(`SELECT COUNT(*) FROM transactions WHERE status = 'PENDING'`) < 2 {
				if time.Now().After(deadline) {
					t.Fatal("the attempts never appeared as pending")
				}
				time.Sleep(5 * time.Millisecond)
			}
			// The attempt, with its reservation, is on disk before the processor answers.
			if r := q(`SELECT reserved FROM transactions WHERE transaction_id = $1`, saleID); r != 4000 {
				t.Fatalf("reserved %d before the processor answered, want 4000", r)
			}
			srv.cmd.Process.Signal(syscall.SIGKILL)
			<-srv.done
			if n := q(`SELECT COUNT(*) FROM transactions WHERE status = 'PENDING'`); n != 2 {
				t.Fatalf("%d pending attempts after the kill, want 2", n)
			}

			srv = startServer(t, nil, serve...)
			deadline = time.Now().Add(20 * time.Second)
			for q(`SELECT COUNT(*) FROM transactions WHERE status = 'PENDING'`) > 0 {
				if backend == "sqlite" {
					t.Fatal("SQLite: attempts still pending once the restarted server listens")
				}
				if time.Now().After(deadline) {
					t.Fatal("attempts still pending 20 s after the restart")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if n := q(`SELECT COUNT(*) FROM transactions WHERE status = 'DECLINED' AND decline_code = 'processing_error'`); n != 2 {
				t.Fatalf("%d attempts resolved as interrupted, want 2", n)
			}
			if r := q(`SELECT reserved FROM transactions WHERE transaction_id = $1`, saleID); r != 0 {
				t.Fatalf("reservation %d not released", r)
			}
			if n := q(`SELECT COUNT(*) FROM audit_log WHERE operation = 'recover' AND outcome = 'FAILED'`); n != 2 {
				t.Fatalf("%d recovery audit records, want 2", n)
			}

			// A retry with the same key finds the resolved attempt: nothing is charged twice.
			tok = token(t, srv.url, m)
			retry := call(t, srv.url, tok, "/transaction-service/refund/"+saleID, `{"amount":"40.00"}`, "crash-/transaction-service/refund/"+saleID)
			if retry["transaction_result"] != "DECLINED" || retry["decline_code"] != "processing_error" {
				t.Fatalf("retry after the crash: %v", retry)
			}
			if n := q(`SELECT COUNT(*) FROM transactions WHERE kind = 'REFUND'`); n != 1 {
				t.Fatalf("%d refunds after the retry, want 1", n)
			}
			// The released reservation can be refunded in full.
			full := call(t, srv.url, tok, "/transaction-service/refund/"+saleID, `{"amount":"100.00"}`, "")
			if full["transaction_result"] != "APPROVED" {
				t.Fatalf("full refund after recovery: %v", full)
			}
		})
	}
}

func flagValue(args []string, name string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			return args[i+1]
		}
	}
	return ""
}

func token(t *testing.T, base string, m map[string]any) string {
	t.Helper()
	cfg := clientcredentials.Config{ClientID: m["client_id"].(string), ClientSecret: m["client_secret"].(string), TokenURL: base + "/oauth/token"}
	tok, err := cfg.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// callJSON sends a JSON body with a bearer token and decodes the answer; it fails t unless the status is
// 200.
func callJSON(t *testing.T, method, url, tok, body string) map[string]any {
	t.Helper()
	resp, out := getJSON(t, method, url, strings.NewReader(body), map[string]string{"Authorization": "Bearer " + tok,
		"Content-Type": "application/json"})
	if out == nil || resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %v", method, url, resp.StatusCode, out)
	}
	return out
}

// call posts a JSON body with a bearer token and decodes the answer; it fails t on a transport error.
func call(t *testing.T, base, tok, path, body, key string) map[string]any {
	t.Helper()
	out, err := callRaw(base, tok, path, body, key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func callRaw(base, tok, path, body, key string) (map[string]any, error) {
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := jsonDecode(resp, &out); err != nil {
		return nil, errors.Join(errors.New(resp.Status), err)
	}
	return out, nil
}

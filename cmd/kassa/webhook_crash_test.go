package main_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/webhook"
)

// kill -9 of kassa serve while deliveries are pending — some being sent, the others committed with
// their events and not sent yet — loses none: after the restart every event is delivered. On SQLite
// the restarted server frees the dead one's lease of the endpoint at once; on PostgreSQL it runs out
// (MinLease).
func TestCrashWithWebhookDeliveriesPending(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			kekText := envelope.NewKEKText()
			env := []string{"KASSA_VAULT_KEY=" + kekText}
			dbFlags := dbArgs(t, backend)
			out, stderr, code := cliEnv(t, env, append([]string{"merchant", "create", "--init", "--name", "Hook Shop", "--email", "hooks@example.com"}, dbFlags...)...)
			if code != 0 {
				t.Fatalf("merchant create: %s", stderr)
			}
			merchantID := decodeOne(t, out)["merchant_id"].(string)

			// The receiver holds every request until the server is killed; afterwards it answers 200. A
			// held request is let go when the kill is done, not only when its connection is seen to close:
			// net/http notices a closed connection only once the request's body has been read, and the
			// receiver could otherwise wait for it for ever, and rc.Close with it.
			var answering atomic.Bool
			var holding atomic.Int64 // requests held until the kill
			killed := make(chan struct{})
			var mu sync.Mutex
			got := map[string]int{}
			rc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !answering.Load() {
					holding.Add(1)
					select {
					case <-r.Context().Done():
					case <-killed:
					}
					return
				}
				mu.Lock()
				got[r.Header.Get("webhook-id")]++
				mu.Unlock()
			}))
			defer rc.Close()
			roots := filepath.Join(t.TempDir(), "receiver.pem")
			if err := os.WriteFile(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
			env = append(env, "SSL_CERT_FILE="+roots) // the server trusts the receiver's certificate

			db, err := store.Open(ctx, store.Config{DataDir: flagValue(dbFlags, "--data-dir"), DatabaseURL: flagValue(dbFlags, "--database-url")})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			kek, err := envelope.ParseKEK(kekText)
			if err != nil {
				t.Fatal(err)
			}
			ring, err := envelope.NewKeyring(ctx, db, kek, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := webhook.NewEndpoints(webhook.EndpointsConfig{DB: db, Keyring: ring, AllowPrivate: true}).Create(ctx, merchantID,
				webhook.EndpointBody{URL: &rc.URL, EnabledEvents: &[]string{"*"}}, webhook.Actor{}); err != nil {
				t.Fatal(err)
			}
			q := func(query string) int {
				var n int
				if err := db.Reader().QueryRowContext(ctx, query).Scan(&n); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				return n
			}

			serve := append([]string{"--webhooks-allow-private"}, dbFlags...)
			srv := startServer(t, env, serve...)
			var ids []string
			if err := db.Write(ctx, func(tx *store.Tx) error {
				ids = ids[:0]
				for range 30 {
					e, err := event.New(merchantID, event.CustomerCreated, map[string]string{"id": "cus_crash"}, time.Now())
					if err != nil {
						return err
					}
					if err := e.Write(ctx, tx); err != nil {
						return err
					}
					ids = append(ids, e.ID)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for holding.Load() < webhook.MaxInFlight {
				if time.Now().After(deadline) {
					t.Fatal("the server never started sending")
				}
				time.Sleep(10 * time.Millisecond)
			}
			srv.cmd.Process.Signal(syscall.SIGKILL)
			<-srv.done
			close(killed)
			if n := q(`SELECT (SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'PENDING') + (SELECT COUNT(*) FROM webhook_queue)`); n != 30 {
				t.Fatalf("%d deliveries pending or queued after the kill, want 30", n)
			}

			answering.Store(true)
			startServer(t, env, serve...)
			// Slow on PostgreSQL by design: it waits out the killed server's lease (webhook.MinLease) in real
			// time, since a server process's clock cannot be moved.
			deadline = time.Now().Add(webhook.MinLease + 30*time.Second)
			for q(`SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'SUCCEEDED'`) < 30 {
				if time.Now().After(deadline) {
					t.Fatalf("%d of 30 deliveries made after the restart", q(`SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'SUCCEEDED'`))
				}
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if got[id] == 0 {
					t.Errorf("event %s never delivered", id)
				}
			}
		})
	}
}

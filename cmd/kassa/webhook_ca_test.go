package main_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/tlscert/tlscerttest"
)

// caReceiver is a receiver whose certificate ca signed; it records the webhook-id of each request.
type caReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]bool
}

func newCAReceiver(t *testing.T, ca tlscerttest.CA, name string) *caReceiver {
	t.Helper()
	p := ca.Issue(t, name)
	pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	rc := &caReceiver{got: map[string]bool{}}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.got[r.Header.Get("webhook-id")] = true
		rc.mu.Unlock()
	}))
	rc.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	rc.srv.StartTLS()
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *caReceiver) received(id string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got[id]
}

// --webhooks-ca-file adds the operator's CAs to the system's roots for deliveries: a receiver whose
// certificate a private CA signed is refused ("TLS handshake failed") without it and delivered to with
// it, while one of a CA among the system's roots (SSL_CERT_FILE here) is delivered to either way. A
// file that holds no certificate, or none at all, stops the server at its start, naming the flag.
func TestWebhooksCAFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	public, private := tlscerttest.NewCA(t, "System Root CA"), tlscerttest.NewCA(t, "Private CA")
	system := []string{"SSL_CERT_FILE=" + public.CertFile} // what the system trusts, for this process
	onPublic, onPrivate := newCAReceiver(t, public, "public receiver"), newCAReceiver(t, private, "private receiver")

	mid := cliJSON(t, "merchant", "create", "--init", "--name", "CA Shop", "--email", "ca@example.com", "--data-dir", dir)["merchant_id"].(string)
	endpoints := map[*caReceiver]string{}
	for _, rc := range []*caReceiver{onPublic, onPrivate} {
		endpoints[rc] = cliJSON(t, "webhook", "create", "--merchant-id", mid, "--url", rc.srv.URL, "--data-dir", dir)["id"].(string)
	}
	db, err := store.Open(ctx, store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	record := func() string {
		e, err := event.New(mid, event.CustomerCreated, map[string]string{"id": "cus_ca"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Write(ctx, func(tx *store.Tx) error { return e.Write(ctx, tx) }); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	// lastError is the delivery log's phrase of the newest attempt to the endpoint, once there is one.
	lastError := func(endpoint string) (string, bool) {
		var msg string
		err := db.Reader().QueryRowContext(ctx, `SELECT a.error FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
			JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE w.endpoint_id = $1 ORDER BY a.id DESC LIMIT 1`, endpoint).Scan(&msg)
		return msg, err == nil
	}
	wait := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !done(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s within 20 s", what)
			}
		}
	}

	srv := startServer(t, system, "--webhooks-allow-private", "--data-dir", dir)
	first := record()
	wait("the receiver of the system's CA got no delivery", func() bool { return onPublic.received(first) })
	wait("no attempt to the receiver of the private CA", func() bool { _, ok := lastError(endpoints[onPrivate]); return ok })
	if msg, _ := lastError(endpoints[onPrivate]); msg != "TLS handshake failed" || onPrivate.received(first) {
		t.Fatalf("without --webhooks-ca-file the private CA's receiver got the event (%v), its attempt logged %q", onPrivate.received(first), msg)
	}
	if err := srv.stop(t); err != nil {
		t.Fatal(err)
	}

	startServer(t, system, "--webhooks-allow-private", "--webhooks-ca-file", private.CertFile, "--data-dir", dir)
	second := record()
	wait("the receivers of both CAs did not get the event", func() bool { return onPublic.received(second) && onPrivate.received(second) })

	for _, bad := range []string{dir + "/none.pem", public.KeyFile} {
		_, stderr, code := cliEnv(t, system, "serve", "--addr", "127.0.0.1:0", "--webhooks-ca-file", bad, "--data-dir", dir)
		if code != 2 || !strings.Contains(stderr, "--webhooks-ca-file "+bad) {
			t.Errorf("serve --webhooks-ca-file %s: exit %d, %q; want exit 2 naming the flag", bad, code, stderr)
		}
	}
}

package webhook

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// fixture is a database with a keyring, a manual clock and a deliverer allowed to reach the tests'
// receivers on 127.0.0.1.
type fixture struct {
	db    *store.DB
	ring  *envelope.Keyring
	clock *clock.Manual
	d     *Deliverer
}

// testKEK is the key-encryption key of every test's keyring: nodes of one database share it.
var testKEK = sync.OnceValue(func() *envelope.KEK {
	kek, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		panic(err)
	}
	return kek
})

func newFixture(t *testing.T, db *store.DB, cfg Config) *fixture {
	t.Helper()
	f := &fixture{db: db, clock: clock.NewManual(time.Now().Truncate(time.Millisecond))}
	var err error
	if f.ring, err = envelope.NewKeyring(context.Background(), db, testKEK(), f.clock.Now); err != nil {
		t.Fatal(err)
	}
	cfg.DB, cfg.Keyring, cfg.Now = db, f.ring, f.clock.Now
	f.d = New(cfg)
	return f
}

// merchant creates a merchant and returns its id.
func (f *fixture) merchant(t *testing.T, email string) string {
	t.Helper()
	var m merchant.Merchant
	err := f.db.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		m, err = merchant.Create(context.Background(), tx, merchant.New{Name: "Shop " + email, Email: email}, f.clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// endpoint registers an endpoint of the merchant at url, subscribed to every event, with a fresh
// secret; it returns the row's id and the secret.
func (f *fixture) endpoint(t *testing.T, merchantID, url string) (int64, string) {
	t.Helper()
	secret := NewSecret()
	endpointID := "we_" + rand.Text()[:24]
	var id int64
	err := f.db.QueryRow(context.Background(), []any{&id}, `INSERT INTO webhook_endpoints (endpoint_id, merchant_id, url, enabled_events, secret, created_at, updated_at)
		VALUES ($1, $2, $3, '*', $4, $5, $5) RETURNING id`, endpointID, merchantID, url, sealSecret(f.ring, endpointID, secret), f.clock.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	return id, secret
}

// record records n events of the merchant now, and returns their ids.
func (f *fixture) record(t *testing.T, merchantID string, n int) []string {
	t.Helper()
	var ids []string
	err := f.db.Write(context.Background(), func(tx *store.Tx) error {
		ids = ids[:0]
		for i := range n {
			e, err := event.New(merchantID, event.CustomerCreated, map[string]any{"id": "cus_" + strconv.Itoa(i), "name": "Zoë"}, f.clock.Now())
			if err != nil {
				return err
			}
			if err := e.Write(context.Background(), tx); err != nil {
				return err
			}
			ids = append(ids, e.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// drive runs the deliverer's rounds at the clock's time until one leases nothing.
func (f *fixture) drive(t *testing.T) {
	t.Helper()
	for range 1000 {
		before := f.count(t, `SELECT COUNT(*) FROM webhook_attempts`)
		if err := f.d.dispatch(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.d.wg.Wait()
		if f.count(t, `SELECT COUNT(*) FROM webhook_attempts`) == before {
			return
		}
	}
	t.Fatal("the deliverer never ran out of due deliveries")
}

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// delivery is the state of the delivery of the event.
type delivery struct {
	status      string
	attempts    int
	nextAttempt time.Time
}

func (f *fixture) delivery(t *testing.T, eventID string) delivery {
	t.Helper()
	var d delivery
	var next int64
	if err := f.db.Reader().QueryRowContext(context.Background(), `SELECT d.status, d.attempts, d.next_attempt FROM webhook_deliveries d
		JOIN events e ON e.id = d.event_id WHERE e.event_id = $1`, eventID).Scan(&d.status, &d.attempts, &next); err != nil {
		t.Fatal(err)
	}
	d.nextAttempt = time.UnixMilli(next)
	return d
}

// attempt is a row of webhook_attempts.
type attempt struct {
	status   int
	response string
	err      string
	at       time.Time
}

func (f *fixture) attempts(t *testing.T, eventID string) []attempt {
	t.Helper()
	rows, err := f.db.Reader().QueryContext(context.Background(), `SELECT a.status_code, a.response, a.error, a.created_at FROM webhook_attempts a
		JOIN webhook_deliveries d ON d.id = a.delivery_id JOIN events e ON e.id = d.event_id WHERE e.event_id = $1 ORDER BY a.id`, eventID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []attempt
	for rows.Next() {
		var a attempt
		var at int64
		if err := rows.Scan(&a.status, &a.response, &a.err, &at); err != nil {
			t.Fatal(err)
		}
		a.at = time.UnixMilli(at)
		out = append(out, a)
	}
	return out
}

// received is a request a receiver got.
type received struct {
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
}

// receiver is an HTTPS server standing in for a merchant's: it records every request and answers
// with answer (default 200).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{Header: r.Header.Clone(), Body: string(body)})
		rc.mu.Unlock()
		if rc.answer != nil {
			rc.answer(w, r)
			return
		}
		io.WriteString(w, "ok")
	}))
	rc.srv.EnableHTTP2 = true
	rc.srv.StartTLS()
	t.Cleanup(rc.srv.Close)
	return rc
}

// roots trusts the receivers' certificates.
func roots(rcs ...*receiver) *x509.CertPool {
	p := x509.NewCertPool()
	for _, rc := range rcs {
		p.AddCert(rc.srv.Certificate())
	}
	return p
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// verify checks a request with the Standard Webhooks Go library under secret.
func verify(secret string, r received) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify([]byte(r.Body), r.Header)
}

// verifyIgnoringTimestamp is verify without the library's check that the message is recent, for
// tests whose clock runs ahead of the library's.
func verifyIgnoringTimestamp(secret string, r received) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.VerifyIgnoringTimestamp([]byte(r.Body), r.Header)
}

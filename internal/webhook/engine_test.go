package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.215.14": true, "2606:4700::6810:85e5": true, "::ffff:93.184.215.14": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "100.64.0.1": false,
		"169.254.169.254": false, "0.0.0.0": false, "0.1.2.3": false, "224.0.0.1": false, "255.255.255.255": false,
		"::1": false, "::": false, "fe80::1": false, "fd00::1": false, "ff02::1": false, "::ffff:127.0.0.1": false,
		"::ffff:10.0.0.1": false, "64:ff9b::a00:1": false, "2002:a00:1::": false, "198.18.0.1": false,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// Every IPv6 form that carries an IPv4 address is judged by it, or refused whatever it carries: an
// address leading to a public IPv4 address is public (IPv4-mapped, NAT64 64:ff9b::/96, 6to4), one
// leading to loopback, a private, link-local or shared address is not; IPv4-compatible (::/96),
// IPv4-translated, local-use NAT64 and Teredo addresses are refused even around a public one. A zone
// takes no address out of its range.
func TestPublicEmbeddedIPv4(t *testing.T) {
	// 93.184.215.14 is public; 127.0.0.1, 10.0.0.1, 169.254.169.254 and 100.64.0.1 are not.
	for _, c := range []struct {
		form, addr string
		want       bool
	}{
		{"IPv4-mapped", "::ffff:93.184.215.14", true},
		{"IPv4-mapped", "::ffff:127.0.0.1", false},
		{"IPv4-mapped", "::ffff:a9fe:a9fe", false},
		{"IPv4-compatible", "::7f00:1", false},
		{"IPv4-compatible", "::a00:1", false},
		{"IPv4-compatible", "::5db8:d70e", false},
		{"IPv4-translated", "::ffff:0:7f00:1", false},
		{"IPv4-translated", "::ffff:0:5db8:d70e", false},
		{"NAT64", "64:ff9b::5db8:d70e", true},
		{"NAT64", "64:ff9b::7f00:1", false},
		{"NAT64", "64:ff9b::a00:1", false},
		{"NAT64", "64:ff9b::a9fe:a9fe", false},
		{"NAT64", "64:ff9b::6440:1", false},
		{"local-use NAT64", "64:ff9b:1::5db8:d70e", false},
		{"local-use NAT64", "64:ff9b:1:7f00:1::", false},
		{"6to4", "2002:5db8:d70e::1", true},
		{"6to4", "2002:7f00:1::1", false},
		{"6to4", "2002:a00:1:2::1", false},
		{"6to4", "2002:a9fe:a9fe::1", false},
		{"6to4", "2002:6440:1::1", false},
		{"Teredo, public server and client", "2001:0:5db8:d70e:0:0:a247:28f1", false},
		{"Teredo, private client", "2001:0:5db8:d70e::f5ff:fffe", false},
		{"Teredo, loopback server", "2001:0:7f00:1::a247:28f1", false},
		{"zone on NAT64", "64:ff9b::a00:1%eth0", false},
		{"zone on 6to4", "2002:a00:1::1%eth0", false},
		{"zone on IPv4-compatible", "::7f00:1%eth0", false},
		{"zone on documentation", "2001:db8::1%eth0", false},
		{"plain IPv6", "2606:4700::6810:85e5", true},
	} {
		if got := Public(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("%s: Public(%s) = %v, want %v", c.form, c.addr, got, c.want)
		}
	}
}

// Without AllowPrivate, a delivery to loopback, to 10.0.0.0/8, to ::1, to loopback written as an
// IPv4-compatible IPv6 address or to a name resolving to loopback is refused at the connection, and
// nothing reaches the server listening there. What the merchant reads of it — the stored attempt, the
// API's view of the delivery and the endpoint's summary — is "target not allowed" and no address;
// the operator's log has the address refused, with the endpoint, the delivery and the attempt.
func TestPrivateAddressesRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		rc := newReceiver(t, nil)
		log, logs := cardtest.Logger(t)
		f := newFixture(t, db, Config{RootCAs: roots(rc), Logger: log})
		endpoints := NewEndpoints(EndpointsConfig{DB: db, Keyring: f.ring})
		m := f.merchant(t, "ssrf@example.com")
		port := rc.srv.URL[strings.LastIndex(rc.srv.URL, ":")+1:]
		for _, c := range []struct{ url, refused string }{
			{"https://127.0.0.1:" + port + "/", "address 127.0.0.1 is not public"},
			{"https://10.0.0.1/", "address 10.0.0.1 is not public"},
			{"https://[::1]:" + port + "/", "address ::1 is not public"},
			{"https://[::7f00:1]:" + port + "/", "address ::7f00:1 is not public"},
			{"https://localhost:" + port + "/", "is not public"},
		} {
			db.Exec(ctx, `UPDATE webhook_endpoints SET disabled = TRUE`)
			row, _ := f.endpoint(t, m, c.url)
			var endpointID string
			if err := db.Reader().QueryRowContext(ctx, `SELECT endpoint_id FROM webhook_endpoints WHERE id = $1`, row).Scan(&endpointID); err != nil {
				t.Fatal(err)
			}
			id := f.record(t, m, 1)[0]
			f.drive(t)
			if a := f.attempts(t, id); len(a) != 1 || a[0].status != 0 || a[0].err != failNotAllowed {
				t.Errorf("%s: attempts %+v, want one with the error %q alone", c.url, a, failNotAllowed)
			}
			ds, _, err := endpoints.Deliveries(ctx, m, endpointID, checkout.ListParams{Limit: 10})
			if err != nil || len(ds) != 1 {
				t.Fatalf("%s: deliveries %+v, %v", c.url, ds, err)
			}
			wire, err := json.Marshal(ds[0].Wire(endpointID))
			if err != nil {
				t.Fatal(err)
			}
			sum, err := endpoints.Summarize(ctx, row)
			if err != nil || sum.Last == nil || sum.Last.Error != failNotAllowed ||
				!strings.Contains(string(wire), `"status_code":0,"latency_ms":`) || !strings.Contains(string(wire), `"error":"target not allowed"`) {
				t.Errorf("%s: the API shows %s, the summary %+v (%v); want %q", c.url, wire, sum.Last, err, failNotAllowed)
			}
			for _, leak := range []string{"127.0.0.1", "10.0.0.1", "::", "not public", "address", "lookup"} {
				if strings.Contains(string(wire), leak) {
					t.Errorf("%s: the API's view of the delivery shows %q: %s", c.url, leak, wire)
				}
			}
			if line := logLine(logs.String(), endpointID); !strings.Contains(line, c.refused) || !strings.Contains(line, `"attempt":1`) ||
				!strings.Contains(line, `"delivery":"`+DeliveryID(ds[0].ID)+`"`) || !strings.Contains(line, `"level":"WARN"`) {
				t.Errorf("%s: the operator's log has %q, want the error %q with the delivery and its attempt", c.url, line, c.refused)
			}
		}
		if n := len(rc.requests()); n != 0 {
			t.Fatalf("%d requests reached the loopback server", n)
		}
	})
}

// logLine is the line of the log that names the endpoint, "" when none does.
func logLine(log, endpointID string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, `"endpoint":"`+endpointID+`"`) {
			return line
		}
	}
	return ""
}

// Each failure without an answer is recorded as its phrase alone, the error itself in the operator's
// log: a name that does not resolve is "could not connect", without the lookup's words (they name
// the resolver asked, an address inside the operator's network); so is a port where nothing listens.
// A certificate not trusted is "TLS handshake failed", a connection closed before any answer "no
// valid answer".
func TestFailuresRecordedAsPhrases(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	hangUp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hangUp.Close() })
	go func() {
		for {
			c, err := hangUp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	untrusted := newReceiver(t, nil)
	log, logs := cardtest.Logger(t)
	// Every address allowed, no certificate trusted.
	f := newFixture(t, storetest.SQLite(t), Config{AllowPrivate: true, RootCAs: x509.NewCertPool(), Logger: log})
	m := f.merchant(t, "phrases@example.com")
	for _, c := range []struct{ url, phrase, logged string }{
		{"https://no-such-host.invalid/hooks", failConnect, "lookup no-such-host.invalid"},
		{"http://" + closed.Addr().String() + "/", failConnect, "connection refused"},
		{untrusted.srv.URL, failTLS, "certificate"},
		{"http://" + hangUp.Addr().String() + "/", failAnswer, hangUp.Addr().String()},
	} {
		f.db.Exec(context.Background(), `UPDATE webhook_endpoints SET disabled = TRUE`)
		row, _ := f.endpoint(t, m, c.url)
		id := f.record(t, m, 1)[0]
		f.drive(t)
		if a := f.attempts(t, id); len(a) != 1 || a[0].status != 0 || a[0].err != c.phrase {
			t.Errorf("%s: attempts %+v, want one with the error %q alone", c.url, a, c.phrase)
		}
		var endpointID string
		if err := f.db.Reader().QueryRowContext(context.Background(), `SELECT endpoint_id FROM webhook_endpoints WHERE id = $1`, row).Scan(&endpointID); err != nil {
			t.Fatal(err)
		}
		if line := logLine(logs.String(), endpointID); !strings.Contains(line, c.logged) || !strings.Contains(line, `"result":"`+c.phrase+`"`) {
			t.Errorf("%s: the operator's log has %q, want the error (%q)", c.url, line, c.logged)
		}
	}
	if n := len(untrusted.requests()); n != 0 {
		t.Fatalf("%d requests reached the server whose certificate is not trusted", n)
	}
}

// describe reads the kind of an error, not its words: a lookup that timed out is a failure to
// connect, whatever its resolver; a request that ran out of time is "timed out".
func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&url.Error{Op: "Post", URL: "https://shop.example/", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &net.DNSError{Err: "i/o timeout", Name: "shop.example", Server: "10.0.0.53:53", IsTimeout: true}}}, failConnect},
		{&url.Error{Op: "Post", URL: "https://shop.example/", Err: context.DeadlineExceeded}, failTimeout},
		{&url.Error{Op: "Post", URL: "https://shop.example/", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &refusedError{netip.MustParseAddr("10.0.0.1")}}}, failNotAllowed},
		{&url.Error{Op: "Post", URL: "https://shop.example/", Err: &net.OpError{Op: "remote error", Err: tls.AlertError(40)}}, failTLS},
		{&url.Error{Op: "Post", URL: "https://shop.example/", Err: io.ErrUnexpectedEOF}, failAnswer},
	} {
		if got := describe(c.err); got != c.want {
			t.Errorf("describe(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// At most 4 deliveries to one endpoint are in flight at once, and an endpoint that does not answer
// does not keep another merchant's endpoint from getting its deliveries meanwhile.
func TestSlowEndpointLimitedAndNotDelaying(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		var inFlight, most atomic.Int64
		release := make(chan struct{})
		slow := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		fast := newReceiver(t, nil)
		f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(slow, fast), Poll: 20 * time.Millisecond})
		slowMerchant, fastMerchant := f.merchant(t, "slow@example.com"), f.merchant(t, "fast@example.com")
		f.endpoint(t, slowMerchant, slow.srv.URL)
		f.endpoint(t, fastMerchant, fast.srv.URL)
		f.record(t, slowMerchant, 20)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { f.d.Run(ctx) })
		defer func() { cancel(); close(release); wg.Wait() }()
		waitFor(t, "4 deliveries in flight to the slow endpoint", func() bool { return inFlight.Load() == MaxInFlight })
		f.record(t, fastMerchant, 10)
		waitFor(t, "the fast endpoint's 10 deliveries", func() bool { return len(fast.requests()) == 10 })
		time.Sleep(100 * time.Millisecond) // several polls: none of them sends a fifth
		if n := most.Load(); n != MaxInFlight {
			t.Fatalf("%d deliveries in flight to one endpoint at most, want %d", n, MaxInFlight)
		}
		// The fast endpoint's lease is given back once its deliveries' outcomes are recorded, which
		// follows the receiver's answers by a moment (more on a busy machine).
		waitFor(t, "one endpoint leased, the slow one (the fast one given back when done)", func() bool {
			return f.count(t, `SELECT COUNT(*) FROM webhook_endpoints WHERE lease_until IS NOT NULL`) == 1
		})
	})
}

// Two nodes on one PostgreSQL database deliver 1,000 events to one receiver: every event arrives, and
// the duplicates (at-least-once allows them; leases make them rare) are counted.
func TestTwoNodesDeliverEveryEvent(t *testing.T) {
	url := storetest.PostgresURL(t)
	open := func() *store.DB {
		db, err := store.Open(context.Background(), store.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db1, db2 := open(), open()
	var mu sync.Mutex
	seen := map[string]int{}
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
	})
	f1 := newFixture(t, db1, Config{AllowPrivate: true, RootCAs: roots(rc), Poll: 10 * time.Millisecond, Node: "one"})
	f2 := newFixture(t, db2, Config{AllowPrivate: true, RootCAs: roots(rc), Poll: 10 * time.Millisecond, Node: "two"})
	m := f1.merchant(t, "cluster@example.com")
	f1.endpoint(t, m, rc.srv.URL)
	m2 := f1.merchant(t, "cluster2@example.com")
	f1.endpoint(t, m2, rc.srv.URL+"/second")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f1.d.Run(ctx) })
	wg.Go(func() { f2.d.Run(ctx) })
	var ids []string
	for range 10 {
		ids = append(ids, f1.record(t, m, 50)...)
		ids = append(ids, f1.record(t, m2, 50)...)
	}
	waitFor(t, "1,000 deliveries", func() bool {
		return f1.count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'SUCCEEDED'`) == 1000
	})
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, id := range ids {
		if seen[id] == 0 {
			t.Errorf("event %s never arrived", id)
		}
		dups += max(seen[id]-1, 0)
	}
	t.Logf("1,000 events, %d requests, %d duplicates", len(rc.requests()), dups)
	if n := f1.count(t, `SELECT COUNT(*) FROM webhook_attempts`); n != len(rc.requests()) {
		t.Errorf("%d attempts recorded for %d requests", n, len(rc.requests()))
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Payments first: while the node answers BusyRequests API requests or more, it sends at most
// BusyRate deliveries a second; once it is not busy, the rest go at once.
func TestBusyNodePacesDeliveries(t *testing.T) {
	rc := newReceiver(t, nil)
	var requests atomic.Int64
	requests.Store(int64(BusyRequests))
	f := newFixture(t, storetest.SQLite(t), Config{AllowPrivate: true, RootCAs: roots(rc), Poll: 10 * time.Millisecond,
		Requests: func() int { return int(requests.Load()) }})
	m := f.merchant(t, "busy@example.com")
	f.endpoint(t, m, rc.srv.URL)
	f.record(t, m, 100)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.d.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	begin := time.Now()
	waitFor(t, "the first delivery while busy", func() bool { return len(rc.requests()) > 0 })
	time.Sleep(300 * time.Millisecond)
	// The limiter's burst, then BusyRate a second; the slack is for a slow machine's scheduling.
	if n, most := len(rc.requests()), MaxInFlight+int(time.Since(begin).Seconds()*BusyRate)+2; n > most {
		t.Fatalf("%d deliveries in %v while busy, want at most %d", n, time.Since(begin), most)
	}
	requests.Store(0)
	waitFor(t, "the other deliveries once not busy", func() bool { return len(rc.requests()) == 100 })
}

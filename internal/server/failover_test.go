package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/metrics/metricstest"
	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/pgproxy"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// failoverBounds are short bounds, so that the failover takes seconds.
var failoverBounds = store.Bounds{ConnectTimeout: time.Second, TCPTimeout: 3 * time.Second,
	WriteTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second}

// A Kassa node on a multi-host URL comes through its primary hanging with every socket open: no
// request waits longer than the bounds, /readyz answers 503 while no primary takes writes and 200
// again by itself once the other server does, sales resume there with no restart, a retried key gets
// its answer, and /metrics counts the reconnect and the time without a primary. The "cluster" is two
// throwaway servers without replication: the second holds a copy of the first's data and is read-only
// (so that target_session_attrs=read-write passes over it) until the failover makes it writable.
func TestFailoverFromAHungPrimary(t *testing.T) {
	if err := pgcluster.Available(); err != nil {
		storetest.Unavailable(t, "PostgreSQL: %v", err)
	}
	first, err := pgcluster.Start(pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Stop)
	// Read-only through ALTER SYSTEM, not a setting on its command line, which would override the
	// failover's ALTER SYSTEM.
	second, err := pgcluster.Start(pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Stop)
	ctx := context.Background()
	if err := migrate(ctx, first.URL); err != nil {
		t.Fatal(err)
	}
	p1, err := pgproxy.Start("unix", first.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p1.Close() })
	p2, err := pgproxy.Start("unix", second.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p2.Close() })
	url := fmt.Sprintf("postgres://kassa@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write", p1.Addr(), p2.Addr())
	db, err := store.Open(ctx, store.Config{DatabaseURL: url, Bounds: failoverBounds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ms := metrics.New()
	srv := servertest.Start(t, db, server.Config{Metrics: ms})
	scrape := httptest.NewServer(ms.Handler(slog.Default()))
	t.Cleanup(scrape.Close)
	m := srv.NewMerchant(t)

	client := &http.Client{Timeout: 30 * time.Second}
	bound := failoverBounds.WriteTimeout*2 + failoverBounds.ConnectTimeout*2 + time.Second
	do := func(method, path string, body any, key string) (int, map[string]any, http.Header, time.Duration) {
		t.Helper()
		var r *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			r = bytes.NewReader(b)
		} else {
			r = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, srv.URL+path, r)
		req.Header.Set("Authorization", "Bearer "+m.Token)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		start := time.Now()
		resp, err := client.Do(req)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s %s: no answer after %v: %v", method, path, took, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if took > bound {
			t.Errorf("%s %s took %v, over the bound %v", method, path, took, bound)
		}
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After: %v", method, path, out)
		}
		return resp.StatusCode, out, resp.Header, took
	}
	sale := map[string]any{"amount": "10.00", "currency": "CAD", "card_number": "4242424242424242",
		"card_expiry_month": "12", "card_expiry_year": "30", "cvv2": "123"}
	code, before, _, _ := do("POST", "/transaction-service/sale", sale, "before-the-hang")
	if code != 200 || before["transaction_result"] != "APPROVED" {
		t.Fatalf("sale before the hang: %d %v", code, before)
	}
	if code, _, _, _ := do("GET", "/readyz", nil, ""); code != 200 {
		t.Fatalf("readyz before the hang: %d", code)
	}
	// The second server gets the first's data, as a replica would have it, and takes no writes.
	copyDatabase(t, first, second)
	setReadOnly(t, second, true)

	p1.Hang()
	hungAt := time.Now()
	if code, body, _, _ := do("GET", "/readyz", nil, ""); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the primary hung and only a standby: %d %v", code, body)
	}
	if code, body, _, _ := do("POST", "/transaction-service/sale", sale, ""); code != http.StatusServiceUnavailable {
		t.Errorf("a sale with no primary: %d %v, want 503", code, body)
	}
	setReadOnly(t, second, false) // the failover

	var resumed time.Duration
	for {
		code, body, _, _ := do("POST", "/transaction-service/sale", sale, "")
		if code == 200 && body["transaction_result"] == "APPROVED" {
			resumed = time.Since(hungAt)
			break
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("a sale during the failover: %d %v, want 200 or 503", code, body)
		}
		if time.Since(hungAt) > 4*bound {
			t.Fatalf("no sale approved %v after the primary hung: last %d %v\n%s", time.Since(hungAt), code, body, srv.Logs)
		}
	}
	t.Logf("sales resumed %v after the primary hung", resumed)
	for {
		code, _, _, _ := do("GET", "/readyz", nil, "")
		if code == 200 {
			break
		}
		if time.Since(hungAt) > 5*bound {
			t.Fatalf("readyz still %d %v after the primary hung", code, time.Since(hungAt))
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, again, _, _ := do("POST", "/transaction-service/sale", sale, "before-the-hang")
	switch {
	case code == 200 && again["transaction_id"] == before["transaction_id"]:
	case code == http.StatusServiceUnavailable:
		t.Logf("the retry was answered 503 with Retry-After")
	default:
		t.Errorf("the retry of a key answered before the hang: %d %v, want %v or 503", code, again, before["transaction_id"])
	}
	if code, body, _, _ := do("GET", "/transaction-service/transaction", nil, ""); code != 200 {
		t.Errorf("listing after the failover: %d %v", code, body)
	}
	got := metricstest.Scrape(t, scrape.URL)
	if n := got.Value("kassa_db_reconnects_total", nil); n < 1 {
		t.Errorf("kassa_db_reconnects_total = %v, want at least 1", n)
	}
	if s := got.Value("kassa_db_primary_unavailable_seconds_total", nil); s <= 0 {
		t.Errorf("kassa_db_primary_unavailable_seconds_total = %v, want the outage's time", s)
	}
	if up := got.Value("kassa_db_primary_available", nil); up != 1 {
		t.Errorf("kassa_db_primary_available = %v after the failover, want 1", up)
	}
}

// migrate applies Kassa's migrations to the database of url.
func migrate(ctx context.Context, url string) error {
	db, err := store.Open(ctx, store.Config{DatabaseURL: url})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Migrate(ctx)
}

// copyDatabase copies the "postgres" database of from into to's.
func copyDatabase(t *testing.T, from, to *pgcluster.Cluster) {
	t.Helper()
	dump, err := pgcluster.Tool("pg_dump")
	if err != nil {
		t.Fatal(err)
	}
	psql, err := pgcluster.Tool("psql")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dump, "--no-owner", "-h", filepath.Dir(from.Socket()), "-U", "kassa", "postgres").Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	load := exec.Command(psql, "-q", "-v", "ON_ERROR_STOP=1", "-h", filepath.Dir(to.Socket()), "-U", "kassa", "postgres")
	load.Stdin = bytes.NewReader(out)
	if msg, err := load.CombinedOutput(); err != nil {
		t.Fatalf("psql: %v: %s", err, msg)
	}
}

// setReadOnly makes c a server that takes no writes (a standby, as target_session_attrs sees it), or
// one that does again (a standby promoted).
func setReadOnly(t *testing.T, c *pgcluster.Cluster, on bool) {
	t.Helper()
	db, err := sql.Open("pgx", c.URL+"&default_transaction_read_only=off")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{fmt.Sprintf(`ALTER SYSTEM SET default_transaction_read_only = %v`, on), `SELECT pg_reload_conf()`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

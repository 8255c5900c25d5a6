// Package storetest gives tests a fresh, migrated database on each storage backend: a SQLite file in
// the test's temporary directory, and a PostgreSQL database cloned from a migrated template. Each
// backend is migrated once per test binary; every test gets a copy of that migrated database.
//
// PostgreSQL comes from KASSA_TEST_DATABASE_URL when it is set, and otherwise from a throwaway
// cluster that this package starts with the system's initdb and postgres binaries (Debian package
// "postgresql"), once per test binary; a package that uses it stops the cluster in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }
//
// When PostgreSQL cannot be had, its tests skip with the reason, unless KASSA_REQUIRE_ALL=1, which
// makes them fail.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store"
)

// Each runs fn as a subtest once per backend, named "sqlite" and "postgres", each with its own fresh
// database.
func Each(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, Postgres(t))
	})
}

// SQLite opens a fresh migrated SQLite database in t's temporary directory; it closes at cleanup. The
// database is a copy of one migrated once per test binary (migrating takes over a second under the
// race detector, copying a few milliseconds), and is migrated again on opening, which finds nothing
// left to apply.
func SQLite(t testing.TB) *store.DB {
	t.Helper()
	b, err := sqliteTemplate()
	if err != nil {
		t.Fatalf("the migrated SQLite database to copy: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, store.SQLiteFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return open(t, store.Config{DataDir: dir})
}

// sqliteTemplate is the file of a SQLite database migrated once per test binary, with its whole
// write-ahead log checkpointed into it, as bytes: SQLite copies it for each test.
var sqliteTemplate = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "storetest-sqlite-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := store.Open(ctx, store.Config{DataDir: dir})
	if err != nil {
		return nil, err
	}
	err = db.Migrate(ctx)
	if err == nil {
		// The copy is of the file alone: nothing may be left in the log beside it.
		_, err = db.Raw().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Join(dir, store.SQLiteFile+"-wal")); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("%d bytes left in the write-ahead log after a checkpoint", fi.Size())
	}
	return os.ReadFile(filepath.Join(dir, store.SQLiteFile))
})

// SQLiteAt opens (and migrates) the SQLite database of dataDir, for tests that share a file with a
// server process.
func SQLiteAt(t testing.TB, dataDir string) *store.DB {
	t.Helper()
	return open(t, store.Config{DataDir: dataDir})
}

// Postgres opens a fresh migrated PostgreSQL database; it is dropped at cleanup. It skips t (or fails
// it, under KASSA_REQUIRE_ALL=1) when no PostgreSQL server is available.
func Postgres(t testing.TB) *store.DB {
	t.Helper()
	return open(t, store.Config{DatabaseURL: PostgresURL(t)})
}

// DurablePostgres opens a fresh migrated PostgreSQL database on a cluster of its own with production
// durability (fsync, full_page_writes and synchronous_commit on; the shared test cluster has them off),
// for benchmarks whose figures stand for a production server. The cluster stops at cleanup.
func DurablePostgres(t testing.TB) *store.DB {
	t.Helper()
	if err := pgcluster.Available(); err != nil {
		Unavailable(t, "PostgreSQL: %v", err)
	}
	c, err := pgcluster.Start(pgcluster.Options{Durable: true})
	if err != nil {
		t.Fatalf("start a durable PostgreSQL: %v", err)
	}
	t.Cleanup(c.Stop)
	return open(t, store.Config{DatabaseURL: c.URL})
}

// PostgresURL creates a fresh migrated PostgreSQL database and returns its URL, for tests that hand
// the database to a server process. It is dropped at cleanup.
func PostgresURL(t testing.TB) string {
	t.Helper()
	srv, err := server()
	if err != nil {
		Unavailable(t, "PostgreSQL: %v", err)
	}
	name, err := srv.create()
	if err != nil {
		t.Fatalf("create PostgreSQL database: %v", err)
	}
	t.Cleanup(func() { srv.drop(name) })
	return srv.urlFor(name)
}

// Unavailable skips t because a dependency is missing, or fails it when KASSA_REQUIRE_ALL=1.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("KASSA_REQUIRE_ALL") == "1" {
		t.Fatalf("%s (KASSA_REQUIRE_ALL=1: a missing dependency fails the run)", msg)
	}
	t.Skipf("%s; skipping (set KASSA_REQUIRE_ALL=1 to fail instead)", msg)
}

func open(t testing.TB, cfg store.Config) *store.DB {
	t.Helper()
	store.CheckNestedWrites(true)
	ctx := context.Background()
	db, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// Main runs the tests and then stops the PostgreSQL cluster, if one was started.
//
// Every database of the test binary checks that no write begins inside a write of the same database
// (store.CheckNestedWrites): such a write panics. Main fails the run when one did, even if something
// recovered its panic (an HTTP server's middleware answers it with a 500).
func Main(m *testing.M) int {
	store.CheckNestedWrites(true)
	code := m.Run()
	if srvOnce.err == nil && srvOnce.srv != nil {
		srvOnce.srv.close()
	}
	if nested := store.NestedWrites(); len(nested) > 0 {
		for _, e := range nested {
			fmt.Fprintf(os.Stderr, "\n%v\n", e)
		}
		fmt.Fprintf(os.Stderr, "FAIL: a write began inside a write of the same database %d times (see above)\n", len(nested))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// pgServer is a PostgreSQL server with a migrated template database of this test binary.
type pgServer struct {
	admin    *sql.DB // connected to the maintenance database
	base     *url.URL
	template string
	mu       sync.Mutex         // CREATE DATABASE ... TEMPLATE fails while another copy of the template runs
	cluster  *pgcluster.Cluster // nil when the server came from KASSA_TEST_DATABASE_URL
}

var srvOnce struct {
	sync.Once
	srv *pgServer
	err error
}

func server() (*pgServer, error) {
	srvOnce.Do(func() { srvOnce.srv, srvOnce.err = startServer() })
	return srvOnce.srv, srvOnce.err
}

func startServer() (*pgServer, error) {
	s := &pgServer{}
	raw := os.Getenv("KASSA_TEST_DATABASE_URL")
	if raw == "" {
		c, err := pgcluster.Start(pgcluster.Options{})
		if err != nil {
			return nil, err
		}
		s.cluster = c
		raw = c.URL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("KASSA_TEST_DATABASE_URL: %w", err)
	}
	s.base = u
	s.admin, err = sql.Open("pgx", raw)
	if err != nil {
		return nil, err
	}
	if err := s.admin.Ping(); err != nil {
		s.close()
		return nil, err
	}
	// The template is private to this test binary: packages run in parallel against one server.
	s.template = "kassa_tmpl_" + strings.ToLower(rand.Text()[:10])
	if _, err := s.admin.Exec("CREATE DATABASE " + s.template); err != nil {
		s.close()
		return nil, err
	}
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: s.urlFor(s.template), MaxConns: 1})
	if err == nil {
		err = db.Migrate(context.Background())
		db.Close()
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("migrate template: %w", err)
	}
	return s, nil
}

func (s *pgServer) urlFor(name string) string {
	u := *s.base
	u.Path = "/" + name
	return u.String()
}

func (s *pgServer) create() (string, error) {
	name := "kassa_t_" + strings.ToLower(rand.Text()[:12])
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.admin.Exec("CREATE DATABASE " + name + " TEMPLATE " + s.template)
	return name, err
}

func (s *pgServer) drop(name string) {
	s.admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
}

func (s *pgServer) close() {
	if s.admin != nil {
		if s.template != "" {
			s.drop(s.template)
		}
		s.admin.Close()
	}
	if s.cluster != nil {
		s.cluster.Stop()
	}
}

// InBrowser runs fn as a subtest on SQLite alone, named "sqlite" as Each names it, for a test that
// drives pages in a browser. Such a test checks what a page shows and how it is operated; the
// services behind the page read and write alike on either backend, and each backend's storage is
// checked by the tests of those services and of the handlers, which run on both. A browser run per
// backend doubled the costliest tests of the suite for nothing those tests do not already check.
func InBrowser(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLite(t))
	})
}

package pgproxy_test

import (
	"context"
	"database/sql"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/pgproxy"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// cluster starts a throwaway cluster with a table t, and a proxy in front of it; it returns the
// proxy, a pool through it, and a pool straight to the cluster.
func cluster(t *testing.T) (*pgproxy.Proxy, *sql.DB, *sql.DB) {
	t.Helper()
	if err := pgcluster.Available(); err != nil {
		storetest.Unavailable(t, "PostgreSQL: %v", err)
	}
	c, err := pgcluster.Start(pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	direct, err := sql.Open("pgx", c.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	if _, err := direct.Exec(`CREATE TABLE t (n int)`); err != nil {
		t.Fatal(err)
	}
	p, err := pgproxy.Start("unix", c.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	via, err := sql.Open("pgx", "postgres://kassa@"+p.Addr()+"/postgres?sslmode=prefer&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { via.Close() })
	return p, via, direct
}

func count(t *testing.T, db *sql.DB, n int) int {
	t.Helper()
	var got int
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE n = $1`, n).Scan(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// A hung proxy answers nothing, on open connections and new ones alike, until it forwards again;
// a reset ends the open connections and new ones work.
func TestHangAndReset(t *testing.T) {
	p, via, _ := cluster(t)
	ping := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := via.ExecContext(ctx, `SELECT 1`)
		return err
	}
	if err := ping(5 * time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Hang()
	start := time.Now()
	if err := ping(300 * time.Millisecond); err == nil {
		t.Fatal("a statement was answered while the proxy hung")
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("the statement's deadline did not end it: %v", time.Since(start))
	}
	via.SetMaxOpenConns(1)
	fresh, err := sql.Open("pgx", "postgres://kassa@"+p.Addr()+"/postgres?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Ping(); err == nil {
		t.Fatal("a new connection was answered while the proxy hung")
	}
	p.Forward()
	if err := ping(5 * time.Second); err != nil {
		t.Fatalf("after forwarding again: %v", err)
	}
	conn, err := via.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if err := conn.PingContext(context.Background()); err == nil {
		t.Fatal("a connection open across a reset still answered")
	}
	conn.Close()
	if err := ping(5 * time.Second); err != nil {
		t.Fatalf("a new connection after a reset: %v", err)
	}
}

// A cut at COMMIT loses the answer: applied, the transaction is in the database; not applied, it is
// not. The same for a single statement, whose implicit transaction commits at its Sync.
func TestCutAtCommit(t *testing.T) {
	p, via, direct := cluster(t)
	ctx := context.Background()
	for i, apply := range []bool{true, false} {
		p.CutAt(pgproxy.IsCommit, apply)
		tx, err := via.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO t VALUES ($1)`, i+1); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err == nil {
			t.Fatalf("apply %v: the commit's answer reached the client", apply)
		}
		if got, want := count(t, direct, i+1), map[bool]int{true: 1, false: 0}[apply]; got != want {
			t.Errorf("explicit COMMIT, apply %v: %d rows committed, want %d", apply, got, want)
		}
	}
	isInsert := func(q string) bool { return strings.HasPrefix(q, "INSERT INTO t") }
	for i, apply := range []bool{true, false} {
		p.CutAt(isInsert, apply)
		if _, err := via.Exec(`INSERT INTO t VALUES ($1)`, 10+i); err == nil {
			t.Fatalf("apply %v: the statement's answer reached the client", apply)
		}
		if got, want := count(t, direct, 10+i), map[bool]int{true: 1, false: 0}[apply]; got != want {
			t.Errorf("single statement, apply %v: %d rows committed, want %d", apply, got, want)
		}
	}
	if p.Cuts() != 4 {
		t.Errorf("%d cuts, want 4", p.Cuts())
	}
	if _, err := via.Exec(`INSERT INTO t VALUES (99)`); err != nil {
		t.Fatalf("after the cuts: %v", err)
	}
}

// late holds the proxy's write of a cut's statement to the server until the test releases it or the
// proxy closes the connection, as a loaded machine may leave the goroutine that wrote it unscheduled
// while the server answers.
type late struct {
	p       *pgproxy.Proxy
	mu      sync.Mutex
	held    int           // the cuts whose statement's write was held
	release chan struct{} // closed by the test once its client has its answer or its error
}

// arm makes late hold the write that ends the next cut's statement (its Sync, or its simple query).
func (l *late) arm() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.release = make(chan struct{})
	return l.release
}

func (l *late) dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &lateConn{Conn: c, l: l, closed: make(chan struct{})}, nil
}

type lateConn struct {
	net.Conn
	l      *late
	once   sync.Once
	closed chan struct{}
}

// Write writes b, and then holds on if b ends a statement that was cut since the last hold.
func (c *lateConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil || len(b) == 0 || (b[0] != 'Q' && b[0] != 'S') {
		return n, err
	}
	c.l.mu.Lock()
	hold := c.l.p.Cuts() > c.l.held
	if hold {
		c.l.held = c.l.p.Cuts()
	}
	release := c.l.release
	c.l.mu.Unlock()
	if hold {
		select {
		case <-release:
		case <-c.closed:
		}
	}
	return n, err
}

func (c *lateConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// An applied cut drops the server's answer however late the proxy goes on after forwarding the
// statement: the proxy's write of it is held until the client has had an answer or an error, and the
// client gets the error, with the statement committed.
func TestCutAppliedDropsAnEarlyAnswer(t *testing.T) {
	p, via, direct := cluster(t)
	l := &late{p: p}
	p.SetDial(l.dial)
	via.SetMaxIdleConns(0) // each case on a connection of its own
	// Bounded: on a connection whose cut went wrong, the proxy forwards nothing more.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release := l.arm()
	p.CutAt(pgproxy.IsCommit, true)
	tx, err := via.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO t VALUES ($1)`, 1); err != nil {
		t.Fatal(err)
	}
	err = tx.Commit()
	close(release)
	if err == nil {
		t.Error("explicit COMMIT: the answer reached the client")
	}
	release = l.arm()
	p.CutAt(func(q string) bool { return strings.HasPrefix(q, "INSERT INTO t") }, true)
	// With an argument, as Kassa's statements have: the extended protocol, which the batcher uses too.
	_, err = via.ExecContext(ctx, `INSERT INTO t VALUES ($1)`, 2)
	close(release)
	if err == nil {
		t.Error("single statement: the answer reached the client")
	}
	if p.Cuts() != 2 || count(t, direct, 1) != 1 || count(t, direct, 2) != 1 {
		t.Errorf("%d cuts, rows 1 and 2 committed %d and %d times; want 2 cuts, each once",
			p.Cuts(), count(t, direct, 1), count(t, direct, 2))
	}
}

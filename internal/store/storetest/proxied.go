package storetest

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassapay/kassa/internal/pgproxy"
)

// Proxied creates a fresh migrated PostgreSQL database, as PostgresURL does, with a pgproxy.Proxy
// between its clients and its server, for tests of a server that hangs, resets or loses a commit's
// answer. It returns the proxy and the database's URL through it; the proxy closes at cleanup.
func Proxied(t testing.TB) (*pgproxy.Proxy, string) {
	t.Helper()
	direct := PostgresURL(t)
	p, err := ProxyTo(direct)
	if err != nil {
		t.Fatalf("a proxy in front of PostgreSQL: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p, Through(direct, p.Addr())
}

// ProxyTo starts a proxy in front of the server of the PostgreSQL URL raw (its first host).
func ProxyTo(raw string) (*pgproxy.Proxy, error) {
	cfg, err := pgconn.ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return pgproxy.Start("unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port))
	}
	return pgproxy.Start("tcp", fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
}

// Through is the PostgreSQL URL raw with its hosts replaced by hosts (host:port, comma-separated),
// without SSL: what a client of raw's database uses to go through proxies.
func Through(raw, hosts string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Del("host")
	q.Set("sslmode", "disable")
	u.Host, u.RawQuery = hosts, q.Encode()
	return u.String()
}

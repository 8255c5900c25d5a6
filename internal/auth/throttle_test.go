package auth_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The throttle's tables hold keyed MACs, never an e-mail or an address, and are purged: counts once
// their window has ended, usual places a month after the last sign-in from them. A device cookie
// cannot pass for a session.
func TestSignInRecordsArePrivateAndPurged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		const email, pw = "owner@example.com", "a long passphrase"
		m := f.newMerchantWithPassword(t, email, pw)
		ctx := context.Background()
		office, elsewhere := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("198.51.100.4")
		if acct, err := f.svc.SignIn(ctx, auth.Attempt{Email: email, Password: pw, Addr: office}); err != nil || acct.UserID != m.MerchantID {
			t.Fatalf("sign-in: %+v %v", acct, err)
		}
		if _, err := f.svc.SignIn(ctx, auth.Attempt{Email: email, Password: "wrong wrong", Addr: elsewhere}); !errors.Is(err, auth.ErrBadCredentials) {
			t.Fatalf("wrong password: %v", err)
		}
		count := func(table string) int {
			var n int
			if err := db.Read(ctx, func(q store.Querier) error {
				return q.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n)
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if a, p := count("sign_in_attempts"), count("sign_in_places"); a != 3 || p != 1 {
			t.Fatalf("%d counts and %d places; want 3 (the account, two addresses) and 1", a, p)
		}
		for _, query := range []string{`SELECT subject FROM sign_in_attempts`, `SELECT place FROM sign_in_places`} {
			macsOnly(t, db, query, []byte(email), []byte(office.String()), []byte(elsewhere.String()), []byte(m.MerchantID))
		}

		f.clock.Advance(auth.ThrottleWindow)
		if err := f.svc.PurgeSignIns(ctx); err != nil {
			t.Fatal(err)
		}
		if a, p := count("sign_in_attempts"), count("sign_in_places"); a != 0 || p != 1 {
			t.Fatalf("after the window: %d counts and %d places", a, p)
		}
		f.clock.Advance(auth.UsualPlaceTTL)
		if err := f.svc.PurgeSignIns(ctx); err != nil {
			t.Fatal(err)
		}
		if p := count("sign_in_places"); p != 0 {
			t.Fatalf("a month later: %d places", p)
		}

		device, _ := f.svc.NewDeviceCookie(m.MerchantID)
		if _, ok := f.svc.OpenSession(device); ok {
			t.Fatal("a device cookie opened as a session")
		}
	})
}

// macsOnly fails unless every key of the query's rows is a 32-byte MAC holding none of needles.
func macsOnly(t *testing.T, db *store.DB, query string, needles ...[]byte) {
	t.Helper()
	ctx := context.Background()
	err := db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key []byte
			if err := rows.Scan(&key); err != nil {
				return err
			}
			if len(key) != 32 {
				t.Errorf("%s: a key of %d bytes, not a MAC", query, len(key))
			}
			for _, n := range needles {
				if bytes.Contains(key, n) {
					t.Errorf("%s: a key holds %q", query, n)
				}
			}
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

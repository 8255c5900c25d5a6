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
		if id, err := f.svc.SignIn(ctx, auth.Attempt{Email: email, Password: pw, Addr: office}); err != nil || id != m.MerchantID {
			t.Fatalf("sign-in: %q %v", id, err)
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
		for _, table := range []string{"sign_in_attempts", "sign_in_places"} {
			scanFor(t, db, table, []byte(email), office.AsSlice(), []byte(office.String()), []byte(elsewhere.String()), []byte(m.MerchantID))
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

// scanFor fails when any row of table holds one of needles in any column.
func scanFor(t *testing.T, db *store.DB, table string, needles ...[]byte) {
	t.Helper()
	ctx := context.Background()
	err := db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT * FROM `+table)
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			for _, v := range vals {
				b, _ := v.([]byte)
				if s, ok := v.(string); ok {
					b = []byte(s)
				}
				for _, n := range needles {
					if len(b) > 0 && bytes.Contains(b, n) {
						t.Errorf("%s holds %q", table, n)
					}
				}
			}
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

package user_test

import (
	"context"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// Sessions over one database, as two nodes of a cluster hold them, with one clock.
func twoNodes(db *store.DB, clk *clock) (*user.Sessions, *user.Sessions) {
	cfg := user.SessionConfig{DB: db, Now: clk.Now, Poll: 5 * time.Second}
	return user.NewSessions(cfg), user.NewSessions(cfg)
}

// start signs u in on node s and returns the cookie's value and the session.
func start(t *testing.T, s *user.Sessions, u user.User) (string, user.Session) {
	t.Helper()
	cookie, sess, err := s.Start(context.Background(), u, "203.0.113.9", "Mozilla/5.0")
	if err != nil {
		t.Fatal(err)
	}
	return cookie, sess
}

func mustOpen(t *testing.T, s *user.Sessions, cookie string) user.Session {
	t.Helper()
	sess, ok, err := s.Open(context.Background(), cookie)
	if err != nil || !ok {
		t.Fatalf("open: %v %v", ok, err)
	}
	return sess
}

func mustNotOpen(t *testing.T, s *user.Sessions, cookie, why string) {
	t.Helper()
	if _, ok, err := s.Open(context.Background(), cookie); ok || err != nil {
		t.Fatalf("%s: the session still opens (%v)", why, err)
	}
}

// A session ends after 30 minutes without a request, on the node that served it and on another,
// even though last-seen is written only once a minute; requests keep it alive up to 12 hours.
func TestSessionLimits(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		owner := shop(t, db, "owner@example.com", clk.Now())
		a, b := twoNodes(db, clk)
		cookie, sess := start(t, a, owner)
		if sess.Role != user.Owner || sess.MerchantID != owner.MerchantID || sess.CSRF == "" || sess.CSRF == cookie {
			t.Fatalf("session %+v", sess)
		}
		clk.Add(29 * time.Minute)
		mustOpen(t, a, cookie)
		clk.Add(29 * time.Minute) // active on a 29 minutes ago: b reads the last-seen a wrote
		if got := mustOpen(t, b, cookie); got.CSRF != sess.CSRF || got.UserID != owner.ID {
			t.Fatalf("node b: %+v", got)
		}
		clk.Add(30 * time.Minute)
		mustNotOpen(t, a, cookie, "idle for 30 minutes")
		mustNotOpen(t, b, cookie, "idle for 30 minutes, on the other node")

		cookie, sess = start(t, a, owner)
		for clk.Now().Sub(sess.CreatedAt) < 12*time.Hour-15*time.Minute {
			clk.Add(15 * time.Minute)
			mustOpen(t, a, cookie)
		}
		clk.Add(15 * time.Minute)
		mustNotOpen(t, a, cookie, "12 hours old")
		mustNotOpen(t, b, cookie, "12 hours old, on the other node")
		var ended int
		db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM dashboard_sessions WHERE ended_at IS NOT NULL`).Scan(&ended)
		if ended != 2 {
			t.Fatalf("%d sessions ended in the database, want 2", ended)
		}
	})
}

// A page view on a node that holds the session reads nothing from the database; last-seen is written
// at most once a minute.
func TestSessionCheckIsInMemory(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		owner := shop(t, db, "owner@example.com", clk.Now())
		a, b := twoNodes(db, clk)
		cookie, _ := start(t, a, owner)
		lastSeen := func() time.Time {
			var ms int64
			db.Reader().QueryRowContext(ctx, `SELECT last_seen FROM dashboard_sessions`).Scan(&ms)
			return time.UnixMilli(ms)
		}
		start := clk.Now()
		for range 100 {
			clk.Add(time.Second)
			mustOpen(t, a, cookie)
			mustOpen(t, b, cookie)
		}
		if a.Loads() != 0 || b.Loads() != 1 {
			t.Fatalf("200 page views read the session %d times on the node that started it and %d on the other; want 0 and 1", a.Loads(), b.Loads())
		}
		if got := lastSeen(); got.Sub(start) < time.Minute || got.Sub(start) > 2*time.Minute {
			t.Fatalf("last seen written at %v after the start, want once a minute", got.Sub(start))
		}
	})
}

// A sign-out on one node ends the session there at once, and on another at its next poll; so does a
// change of password. A change of role reaches the other node's sessions at its next poll.
func TestSecondNodeLearnsWithinPoll(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		owner := shop(t, db, "owner@example.com", clk.Now())
		clerk := addUser(t, db, owner.MerchantID, "clerk@example.com", user.Sales, clk.Now())
		a, b := twoNodes(db, clk)
		cookie, _ := start(t, a, owner)
		mustOpen(t, b, cookie)
		if err := a.End(ctx, cookie); err != nil {
			t.Fatal(err)
		}
		mustNotOpen(t, a, cookie, "signed out on this node")
		mustOpen(t, b, cookie) // held in memory until b's poll
		clk.Add(5 * time.Second)
		if err := b.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		mustNotOpen(t, b, cookie, "signed out on another node, after the poll")

		// A change of password, made by either node, and the poll after it.
		cookie, _ = start(t, a, owner)
		mustOpen(t, b, cookie)
		hash, _ := user.HashPassword(context.Background(), password.NewGate(password.GateConfig{}), "another passphrase")
		if err := write(t, db, func(tx *store.Tx) error { return user.SetPassword(ctx, tx, owner.ID, hash, clk.Now()) }); err != nil {
			t.Fatal(err)
		}
		clk.Add(5 * time.Second)
		if err := b.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		mustNotOpen(t, b, cookie, "the password changed")

		// A change of role.
		cookie, _ = start(t, a, clerk)
		if s := mustOpen(t, b, cookie); s.Role != user.Sales {
			t.Fatalf("role %s", s.Role)
		}
		clk.Add(time.Minute) // polls happen meanwhile; the role changes after them
		if err := b.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		if err := write(t, db, func(tx *store.Tx) error {
			_, err := user.SetRole(ctx, tx, owner.MerchantID, clerk.ID, user.Reporting, user.Owner, clk.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		clk.Add(5 * time.Second)
		if err := b.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		if s := mustOpen(t, b, cookie); s.Role != user.Reporting {
			t.Fatalf("after the poll, role %s", s.Role)
		}
	})
}

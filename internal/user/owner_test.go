package user_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// Two owners who demote or remove each other in transactions that overlap: the first holds its
// transaction open after its change while the second makes its own. The second sees the owners only
// as the first left them, so exactly one change is made, the other is refused as the last owner's,
// and the merchant keeps an owner. On PostgreSQL the second waits for the first to commit; without
// that it counted two owners while the first was still open, and both changes went through.
func TestLastOwnerWithOverlappingChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(ctx context.Context, tx *store.Tx, merchantID, id string, now time.Time) error
	}{
		{"demote", func(ctx context.Context, tx *store.Tx, merchantID, id string, now time.Time) error {
			_, err := user.SetRole(ctx, tx, merchantID, id, user.Admin, user.Owner, now)
			return err
		}},
		{"remove", func(ctx context.Context, tx *store.Tx, merchantID, id string, now time.Time) error {
			return user.Remove(ctx, tx, merchantID, id, user.Owner, now)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx, now := context.Background(), time.Now()
				a := shop(t, db, "a@"+tc.name+".example", now)
				b := addUser(t, db, a.MerchantID, "b@"+tc.name+".example", user.Owner, now)

				changed, release := make(chan struct{}), make(chan struct{})
				var once sync.Once
				var errFirst, errSecond error
				first, second := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(first)
					errFirst = db.Write(ctx, func(tx *store.Tx) error {
						if err := tc.change(ctx, tx, a.MerchantID, b.ID, now); err != nil {
							return err
						}
						once.Do(func() { close(changed) })
						<-release
						return nil
					})
				}()
				select {
				case <-changed:
				case <-first:
					t.Fatalf("the first change: %v", errFirst)
				}
				go func() {
					defer close(second)
					errSecond = db.Write(ctx, func(tx *store.Tx) error { return tc.change(ctx, tx, a.MerchantID, a.ID, now) })
				}()
				// The second change either waits for the first's commit or, unguarded, ends first.
				select {
				case <-second:
				case <-time.After(500 * time.Millisecond):
				}
				close(release)
				<-first
				<-second
				if errFirst != nil || !errors.Is(errSecond, user.ErrLastOwner) {
					t.Fatalf("the first change: %v; the second: %v, want it refused as the last owner's", errFirst, errSecond)
				}
				list, err := user.List(ctx, db.Reader(), a.MerchantID)
				if err != nil {
					t.Fatal(err)
				}
				var owners []string
				for _, u := range list {
					if u.Role == user.Owner {
						owners = append(owners, u.ID)
					}
				}
				if len(owners) != 1 || owners[0] != a.ID {
					t.Fatalf("owners after the two changes: %v, want %s only", owners, a.ID)
				}
			})
		})
	}
}

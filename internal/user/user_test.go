package user_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// clock is a settable time for the tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)} }
func write(t *testing.T, db *store.DB, fn func(tx *store.Tx) error) error {
	t.Helper()
	return db.Write(context.Background(), fn)
}

// shop creates a merchant whose owner has the password "owner passphrase", and returns the owner.
func shop(t *testing.T, db *store.DB, email string, now time.Time) user.User {
	t.Helper()
	hash, err := user.HashPassword(context.Background(), password.NewGate(password.GateConfig{}), "owner passphrase")
	if err != nil {
		t.Fatal(err)
	}
	var owner user.User
	if err := write(t, db, func(tx *store.Tx) error {
		_, owner, err = user.CreateMerchant(context.Background(), tx, merchant.New{Name: "Shop", Email: email}, hash, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return owner
}

func addUser(t *testing.T, db *store.DB, merchantID, email string, role user.Role, now time.Time) user.User {
	t.Helper()
	var u user.User
	if err := write(t, db, func(tx *store.Tx) error {
		var err error
		u, err = user.Create(context.Background(), tx, user.New{MerchantID: merchantID, Email: email, Role: role}, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return u
}

// A merchant's first owner has its e-mail and id; the password is stored as an argon2id hash; a person
// is on a merchant's staff once, whatever the case of its e-mail; bad input names its field.
func TestCreateAndList(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := time.Now()
		owner := shop(t, db, "Owner@Example.com", now)
		if owner.Role != user.Owner || owner.Email != "Owner@Example.com" || owner.ID != owner.MerchantID || !owner.HasPassword {
			t.Fatalf("owner %+v", owner)
		}
		c, err := user.CredentialsByEmail(ctx, db.Reader(), " owner@example.COM ")
		if err != nil || c.ID != owner.ID {
			t.Fatalf("credentials: %+v %v", c, err)
		}
		if ok, err := password.NewGate(password.GateConfig{}).Verify(ctx, c.Hash, "owner passphrase", true); !ok || err != nil || strings.Contains(c.Hash, "passphrase") {
			t.Fatalf("stored hash %q does not verify", c.Hash)
		}
		clerk := addUser(t, db, owner.MerchantID, "clerk@example.com", user.Sales, now)
		if clerk.HasPassword || clerk.ID == owner.ID {
			t.Fatalf("clerk %+v", clerk)
		}
		list, err := user.List(ctx, db.Reader(), owner.MerchantID)
		if err != nil || len(list) != 2 || list[0].ID != owner.ID || list[1].ID != clerk.ID {
			t.Fatalf("list %+v %v", list, err)
		}
		for _, tc := range []struct {
			name  string
			n     user.New
			field string
			code  int
		}{
			{"staff already, e-mail in any case", user.New{MerchantID: owner.MerchantID, Email: "CLERK@example.com", Role: user.Admin}, "", 409},
			{"bad e-mail", user.New{MerchantID: owner.MerchantID, Email: "clerk", Role: user.Admin}, "email", 400},
			{"unknown role", user.New{MerchantID: owner.MerchantID, Email: "x@example.com", Role: "boss"}, "role", 400},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := write(t, db, func(tx *store.Tx) error {
					_, err := user.Create(ctx, tx, tc.n, now)
					return err
				})
				var f *fault.Error
				if !errors.As(err, &f) || f.Status != tc.code || f.Field != tc.field {
					t.Fatalf("Create = %v; want %d naming %q", err, tc.code, tc.field)
				}
			})
		}
		err = write(t, db, func(tx *store.Tx) error {
			_, err := user.Create(ctx, tx, user.New{MerchantID: "0000000000", Email: "x@example.com", Role: user.Admin}, now)
			return err
		})
		if !errors.Is(err, merchant.ErrNotFound) {
			t.Fatalf("a user of no merchant: %v", err)
		}
		if _, err := user.HashPassword(context.Background(), password.NewGate(password.GateConfig{}), "short"); err == nil || !strings.Contains(err.Error(), "at least 10") {
			t.Fatalf("short password: %v", err)
		}
	})
}

// Owners manage everyone; admins everyone but owners, and cannot make owners; a merchant keeps its
// last owner; nobody reaches another merchant's users.
func TestRoleChangesAndRemoval(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := time.Now()
		owner := shop(t, db, "owner@example.com", now)
		admin := addUser(t, db, owner.MerchantID, "admin@example.com", user.Admin, now)
		clerk := addUser(t, db, owner.MerchantID, "clerk@example.com", user.Sales, now)
		stranger := shop(t, db, "other@example.com", now)
		setRole := func(id string, role, actor user.Role) error {
			return write(t, db, func(tx *store.Tx) error {
				_, err := user.SetRole(ctx, tx, owner.MerchantID, id, role, actor, now)
				return err
			})
		}
		remove := func(id string, actor user.Role) error {
			return write(t, db, func(tx *store.Tx) error { return user.Remove(ctx, tx, owner.MerchantID, id, actor, now) })
		}
		for _, tc := range []struct {
			name string
			err  error
			want error
		}{
			{"the last owner is not demoted", setRole(owner.ID, user.Admin, user.Owner), user.ErrLastOwner},
			{"the last owner is not removed", remove(owner.ID, user.Owner), user.ErrLastOwner},
			{"an admin does not demote an owner", setRole(owner.ID, user.Sales, user.Admin), user.ErrOwnersOnly},
			{"an admin does not make an owner", setRole(clerk.ID, user.Owner, user.Admin), user.ErrOwnersOnly},
			{"an admin does not remove an owner", remove(owner.ID, user.Admin), user.ErrOwnersOnly},
			{"reporting manages nobody", setRole(clerk.ID, user.Reporting, user.Reporting), user.ErrOwnersOnly},
			{"another merchant's user is nobody", remove(stranger.ID, user.Owner), user.ErrNotFound},
			{"an admin changes a clerk", setRole(clerk.ID, user.Reporting, user.Admin), nil},
			{"an owner makes another owner", setRole(admin.ID, user.Owner, user.Owner), nil},
			{"then the first owner may step down", setRole(owner.ID, user.Admin, user.Owner), nil},
			{"and may be removed", remove(owner.ID, user.Owner), nil},
		} {
			if !errors.Is(tc.err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
			}
		}
		list, _ := user.List(ctx, db.Reader(), owner.MerchantID)
		if len(list) != 2 || list[0].ID != admin.ID || list[0].Role != user.Owner || list[1].Role != user.Reporting {
			t.Fatalf("after the changes: %+v", list)
		}
	})
}

// A link sets a password once, before it expires (30 minutes for a reset, 72 hours for an
// invitation); setting a password uses up the person's other reset links and ends its sessions.
func TestLinks(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		owner := shop(t, db, "owner@example.com", clk.Now())
		invited := addUser(t, db, owner.MerchantID, "new@example.com", user.Reporting, clk.Now())
		issue := func(u user.User, kind user.LinkKind) user.Link {
			var l user.Link
			if err := write(t, db, func(tx *store.Tx) error {
				var err error
				l, err = user.IssueLink(ctx, tx, u.ID, kind, u.MerchantID, clk.Now())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return l
		}
		hash, err := user.HashPassword(context.Background(), password.NewGate(password.GateConfig{}), "a new passphrase")
		if err != nil {
			t.Fatal(err)
		}
		use := func(l user.Link) error {
			return write(t, db, func(tx *store.Tx) error {
				_, err := user.UseLink(ctx, tx, l.Token, hash, clk.Now())
				return err
			})
		}
		reset, invite := issue(owner, user.Reset), issue(invited, user.Invite)
		if !reset.ExpiresAt.Equal(clk.Now().Add(30*time.Minute)) || !invite.ExpiresAt.Equal(clk.Now().Add(72*time.Hour)) {
			t.Fatalf("expiries %v %v", reset.ExpiresAt, invite.ExpiresAt)
		}
		var stored int
		db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM user_links WHERE token_hash = $1`, []byte(reset.Token)).Scan(&stored)
		if stored != 0 {
			t.Fatal("a link's secret is stored as sent")
		}
		clk.Add(31 * time.Minute)
		if err := use(reset); !errors.Is(err, user.ErrBadLink) {
			t.Fatalf("an expired reset: %v", err)
		}
		if o, err := user.OpenLink(ctx, db.Reader(), invite.Token, clk.Now()); err != nil || o.ID != invited.ID || o.Kind != user.Invite ||
			o.Invitation.MerchantID != owner.MerchantID || o.Invitation.Merchant != "Shop" || !o.NeedsPassword() {
			t.Fatalf("open the invitation: %+v %v", o, err)
		}
		if err := use(invite); err != nil {
			t.Fatalf("accept the invitation: %v", err)
		}
		if err := use(invite); !errors.Is(err, user.ErrBadLink) {
			t.Fatalf("the invitation used twice: %v", err)
		}
		if _, err := user.OpenLink(ctx, db.Reader(), "nonsense", clk.Now()); !errors.Is(err, user.ErrBadLink) {
			t.Fatalf("an unknown link: %v", err)
		}

		// Setting the password ends the sessions and uses up the other links.
		sessions := user.NewSessions(user.SessionConfig{DB: db, Now: clk.Now})
		cookie, _, err := sessions.Start(ctx, owner, "203.0.113.9", "test")
		if err != nil {
			t.Fatal(err)
		}
		first, second := issue(owner, user.Reset), issue(owner, user.Reset)
		if recent, err := user.RecentReset(ctx, db.Reader(), owner.ID, time.Minute, clk.Now()); err != nil || !recent {
			t.Fatalf("recent reset: %v %v", recent, err)
		}
		if err := use(first); err != nil {
			t.Fatal(err)
		}
		if err := use(second); !errors.Is(err, user.ErrBadLink) {
			t.Fatalf("another link after the password was set: %v", err)
		}
		sessions.Forget(owner.ID)
		if _, ok, err := sessions.Open(ctx, cookie); ok || err != nil {
			t.Fatalf("a session outlived the change of password: %v %v", ok, err)
		}
	})
}

// One person (one e-mail, one password) is staff of several merchants: an invitation to a person who
// exists makes a membership that opens nothing until the person accepts it through the link (without
// a new password: it keeps its own), which makes that merchant the one it signs in to; the person
// chooses among its merchants; taken off one merchant's staff it keeps the others, and taken off the
// last one it is gone.
func TestOnePersonOnManyMerchants(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		maple := shop(t, db, "owner@maple.example", clk.Now())
		birch := shop(t, db, "owner@birch.example", clk.Now())
		clerk := addUser(t, db, maple.MerchantID, "clerk@example.com", user.Sales, clk.Now())

		var invited user.User
		var link user.Link
		if err := write(t, db, func(tx *store.Tx) error {
			var err error
			if invited, err = user.Create(ctx, tx, user.New{MerchantID: birch.MerchantID, Email: "Clerk@Example.com", Role: user.Admin, Invited: true}, clk.Now()); err != nil {
				return err
			}
			link, err = user.IssueLink(ctx, tx, invited.ID, user.Invite, birch.MerchantID, clk.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if invited.ID != clerk.ID || !invited.Pending || invited.Role != user.Admin {
			t.Fatalf("the invitation of a person who exists: %+v, want pending admin %s", invited, clerk.ID)
		}
		if _, err := user.Get(ctx, db.Reader(), birch.MerchantID, clerk.ID); !errors.Is(err, user.ErrNotFound) {
			t.Fatalf("a waiting membership opened: %v", err)
		}
		if all, err := user.Memberships(ctx, db.Reader(), clerk.ID); err != nil || len(all) != 1 || all[0].MerchantID != maple.MerchantID {
			t.Fatalf("memberships before accepting: %+v %v", all, err)
		}
		staff, _ := user.List(ctx, db.Reader(), birch.MerchantID)
		if len(staff) != 2 || !staff[1].Pending {
			t.Fatalf("birch's staff with the invitation waiting: %+v", staff)
		}

		// The person has a password (set through maple's invitation); birch's link only accepts.
		hash, err := user.HashPassword(ctx, password.NewGate(password.GateConfig{}), "the clerk's passphrase")
		if err != nil {
			t.Fatal(err)
		}
		if err := write(t, db, func(tx *store.Tx) error { return user.SetPassword(ctx, tx, clerk.ID, hash, clk.Now()) }); err != nil {
			t.Fatal(err)
		}
		o, err := user.OpenLink(ctx, db.Reader(), link.Token, clk.Now())
		if err != nil || o.NeedsPassword() || o.Invitation.Role != user.Admin || o.Invitation.Merchant != "Shop" {
			t.Fatalf("the invitation of a person with a password: %+v %v", o, err)
		}
		if err := write(t, db, func(tx *store.Tx) error {
			_, err := user.UseLink(ctx, tx, link.Token, "", clk.Now())
			return err
		}); err != nil {
			t.Fatalf("accept: %v", err)
		}
		if c, _ := user.CredentialsByEmail(ctx, db.Reader(), "clerk@example.com"); c.Hash != hash {
			t.Fatal("accepting an invitation changed the person's password")
		}
		if u, err := user.Get(ctx, db.Reader(), birch.MerchantID, clerk.ID); err != nil || u.Role != user.Admin {
			t.Fatalf("the accepted membership: %+v %v", u, err)
		}
		if home, err := user.Home(ctx, db.Reader(), clerk.ID); err != nil || home.MerchantID != birch.MerchantID {
			t.Fatalf("home after accepting birch's invitation: %+v %v", home, err)
		}
		if err := write(t, db, func(tx *store.Tx) error {
			_, err := user.Choose(ctx, tx, maple.MerchantID, clerk.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if home, _ := user.Home(ctx, db.Reader(), clerk.ID); home.MerchantID != maple.MerchantID || home.Role != user.Sales {
			t.Fatalf("home after choosing maple: %+v", home)
		}
		if err := write(t, db, func(tx *store.Tx) error {
			_, err := user.Choose(ctx, tx, birch.MerchantID, maple.ID)
			return err
		}); !errors.Is(err, user.ErrNotFound) {
			t.Fatalf("choosing a merchant whose staff the person is not: %v", err)
		}

		// Off maple's staff, the person keeps birch, which becomes its home; off birch's too, it is gone.
		remove := func(merchantID string) {
			t.Helper()
			if err := write(t, db, func(tx *store.Tx) error { return user.Remove(ctx, tx, merchantID, clerk.ID, user.Owner, clk.Now()) }); err != nil {
				t.Fatal(err)
			}
		}
		remove(maple.MerchantID)
		if home, err := user.Home(ctx, db.Reader(), clerk.ID); err != nil || home.MerchantID != birch.MerchantID {
			t.Fatalf("home after leaving maple: %+v %v", home, err)
		}
		remove(birch.MerchantID)
		if _, err := user.ByEmail(ctx, db.Reader(), "clerk@example.com"); !errors.Is(err, user.ErrNotFound) {
			t.Fatalf("a person on no merchant's staff stays: %v", err)
		}
	})
}

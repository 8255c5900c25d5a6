package store_test

import (
	"context"
	"testing"

	"github.com/kassapay/kassa/internal/user"
)

// beforeUsers is the last schema in which a merchant's own e-mail and password were its one sign-in.
const beforeUsers = 24

// The upgrade to staff users (migration 25): every merchant becomes its first owner, under its own
// id, with its password hash when it had one, and without one (to be set through a link) otherwise.
func TestUpgradeToUsers(t *testing.T) {
	for name, open := range unmigrated() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t)
			if err := db.MigrateTo(ctx, beforeUsers); err != nil {
				t.Fatal(err)
			}
			const hash = "$argon2id$v=19$m=65536,t=3,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA"
			mustExec(t, db, `INSERT INTO merchants (id, name, email, email_key, password_hash, default_currency, created_at)
				VALUES ('aaaaaaaaaa', 'With', 'Owner@Example.com', 'owner@example.com', $1, 'CAD', 1), 
				       ('bbbbbbbbbb', 'Without', 'none@example.com', 'none@example.com', NULL, 'CAD', 2)`, hash)
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			c, err := user.CredentialsByEmail(ctx, db.Reader(), "owner@EXAMPLE.com")
			if err != nil || c.ID != "aaaaaaaaaa" || c.Hash != hash {
				t.Fatalf("the merchant with a password: %+v %v", c, err)
			}
			if u, err := user.Get(ctx, db.Reader(), "aaaaaaaaaa", c.ID); err != nil || u.Role != user.Owner {
				t.Fatalf("the merchant with a password, as its first owner: %+v %v", u, err)
			}
			users, err := user.List(ctx, db.Reader(), "bbbbbbbbbb")
			if err != nil || len(users) != 1 || users[0].ID != "bbbbbbbbbb" || users[0].Role != user.Owner || users[0].HasPassword ||
				users[0].Email != "none@example.com" {
				t.Fatalf("the merchant without a password: %+v %v", users, err)
			}
		})
	}
}

// beforeMemberships is the last schema in which each user belonged to one merchant, in one role.
const beforeMemberships = 54

// The upgrade to memberships (migration 55): each user becomes a person with one accepted membership,
// its merchant and role, which it signs in to; an invitation's link names the merchant it accepts.
func TestUpgradeToMemberships(t *testing.T) {
	for name, open := range unmigrated() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t)
			if err := db.MigrateTo(ctx, beforeMemberships); err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, `INSERT INTO merchants (id, name, email, email_key, default_currency, created_at)
				VALUES ('aaaaaaaaaa', 'Maple', 'owner@example.com', 'owner@example.com', 'CAD', 1)`)
			mustExec(t, db, `INSERT INTO users (id, merchant_id, email, email_key, password_hash, role, created_at)
				VALUES ('aaaaaaaaaa', 'aaaaaaaaaa', 'owner@example.com', 'owner@example.com', 'h', 'owner', 1),
				       ('bbbbbbbbbb', 'aaaaaaaaaa', 'Clerk@example.com', 'clerk@example.com', NULL, 'sales', 2)`)
			mustExec(t, db, `INSERT INTO user_links (token_hash, user_id, kind, created_at, expires_at)
				VALUES ($1, 'bbbbbbbbbb', 'invite', 2, 9999999999999)`, []byte("0123456789abcdef0123456789abcdef"))
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			staff, err := user.List(ctx, db.Reader(), "aaaaaaaaaa")
			if err != nil || len(staff) != 2 || staff[0].Role != user.Owner || staff[1].Role != user.Sales || staff[1].Pending ||
				staff[1].Email != "Clerk@example.com" || staff[1].HasPassword {
				t.Fatalf("the merchant's staff: %+v %v", staff, err)
			}
			if home, err := user.Home(ctx, db.Reader(), "bbbbbbbbbb"); err != nil || home.MerchantID != "aaaaaaaaaa" {
				t.Fatalf("the clerk's home: %+v %v", home, err)
			}
			var linked string
			if err := db.Reader().QueryRowContext(ctx, `SELECT merchant_id FROM user_links WHERE user_id = 'bbbbbbbbbb'`).Scan(&linked); err != nil ||
				linked != "aaaaaaaaaa" {
				t.Fatalf("the invitation's merchant: %q %v", linked, err)
			}
		})
	}
}

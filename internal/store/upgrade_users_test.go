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
			if err != nil || c.ID != "aaaaaaaaaa" || c.MerchantID != "aaaaaaaaaa" || c.Role != user.Owner || c.Hash != hash {
				t.Fatalf("the merchant with a password: %+v %v", c, err)
			}
			users, err := user.List(ctx, db.Reader(), "bbbbbbbbbb")
			if err != nil || len(users) != 1 || users[0].ID != "bbbbbbbbbb" || users[0].Role != user.Owner || users[0].HasPassword ||
				users[0].Email != "none@example.com" {
				t.Fatalf("the merchant without a password: %+v %v", users, err)
			}
		})
	}
}

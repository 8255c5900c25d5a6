package auth_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// Staff users sign in with their own e-mail and password. Owners and admins may use the password
// grant and the partners' consent page (Roles: user.Approvers); a reporting or sales user's right
// password fails there exactly as a wrong one does, and signs in where every role may.
func TestRolesThatSignInForTheMerchant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		const pw = "a long passphrase"
		m := f.newMerchantWithPassword(t, "owner@example.com", pw)
		mb := basic(m.ClientID, m.ClientSecret)
		hash, err := user.HashPassword(context.Background(), password.NewGate(password.GateConfig{}), pw)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, u := range []struct {
			email string
			role  user.Role
		}{{"admin@example.com", user.Admin}, {"reports@example.com", user.Reporting}, {"till@example.com", user.Sales}} {
			if err := db.Write(ctx, func(tx *store.Tx) error {
				c, err := user.Create(ctx, tx, user.New{MerchantID: m.MerchantID, Email: u.email, Role: u.role, Hash: hash}, time.Now())
				if err == nil && !c.HasPassword {
					t.Errorf("%s has no password", u.email)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		_, wrong := f.passwordGrant(t, "reports@example.com", "not the passphrase", mb)
		for _, tc := range []struct {
			email   string
			granted bool
		}{{"owner@example.com", true}, {"admin@example.com", true}, {"reports@example.com", false}, {"till@example.com", false}} {
			status, body := f.passwordGrant(t, tc.email, pw, mb)
			if tc.granted && (status != 200 || body["merchant_id"] != m.MerchantID) {
				t.Errorf("password grant of %s: %d %v", tc.email, status, body)
			}
			if !tc.granted && (status != 400 || body["error"] != "invalid_grant" || body["error_description"] != wrong["error_description"]) {
				t.Errorf("password grant of %s: %d %v; want the answer to a wrong password, %v", tc.email, status, body, wrong)
			}
			addr := netip.MustParseAddr("198.51.100.20")
			_, err := f.svc.SignIn(ctx, auth.Attempt{Email: tc.email, Password: pw, Addr: addr, Roles: user.Approvers})
			if tc.granted != (err == nil) || (!tc.granted && !errors.Is(err, auth.ErrBadCredentials)) {
				t.Errorf("sign-in of %s for the merchant: %v", tc.email, err)
			}
			acct, err := f.svc.SignIn(ctx, auth.Attempt{Email: tc.email, Password: pw, Addr: addr})
			if err != nil || acct.UserID == "" {
				t.Errorf("sign-in of %s to the dashboard: %+v %v", tc.email, acct, err)
			}
		}
	})
}

// A person on two merchants' staff, owner of one and sales at the other: the password grant of the
// first merchant's client gets it a token of that merchant; the second's client is refused it as a
// wrong password, and a pending invitation as an admin of a third opens nothing either.
func TestPasswordGrantIsForTheClientsMerchant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		const pw = "a long passphrase"
		first := f.newMerchantWithPassword(t, "owner@example.com", pw)
		second := f.newMerchantWithPassword(t, "other@example.com", pw)
		third := f.newMerchantWithPassword(t, "third@example.com", pw)
		ctx := context.Background()
		if err := db.Write(ctx, func(tx *store.Tx) error {
			if _, err := user.Create(ctx, tx, user.New{MerchantID: second.MerchantID, Email: "owner@example.com", Role: user.Sales}, time.Now()); err != nil {
				return err
			}
			_, err := user.Create(ctx, tx, user.New{MerchantID: third.MerchantID, Email: "owner@example.com", Role: user.Admin, Invited: true}, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if status, body := f.passwordGrant(t, "owner@example.com", pw, basic(first.ClientID, first.ClientSecret)); status != 200 ||
			body["merchant_id"] != first.MerchantID {
			t.Fatalf("the owner's grant at its merchant: %d %v", status, body)
		}
		for name, c := range map[string]auth.Credentials{"sales": second, "invited": third} {
			if status, body := f.passwordGrant(t, "owner@example.com", pw, basic(c.ClientID, c.ClientSecret)); status != 400 ||
				body["error_description"] != "The e-mail or password is wrong." {
				t.Errorf("the grant where the person is %s: %d %v", name, status, body)
			}
		}
	})
}

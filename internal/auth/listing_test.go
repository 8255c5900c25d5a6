package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestListClients: a merchant's pairs, newest first, with validity, status and when each last got a
// token, to the minute; never another merchant's or a partner's.
func TestListClients(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		var second auth.Credentials
		err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			second, err = auth.CreateClient(ctx, tx, f.creds.MerchantID, 20*time.Minute, time.Now().Add(time.Second))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		f.newMerchant(t, "other@example.com", auth.DefaultValidity)
		f.newPartner(t, 0)
		list := func() []auth.ClientInfo {
			t.Helper()
			var out []auth.ClientInfo
			if err := db.Read(ctx, func(q store.Querier) error {
				var err error
				out, err = auth.ListClients(ctx, q, f.creds.MerchantID)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return out
		}
		got := list()
		if len(got) != 2 || got[0].ClientID != second.ClientID || got[1].ClientID != f.creds.ClientID ||
			got[0].Validity != 20*time.Minute || got[1].Validity != auth.DefaultValidity || !got[0].Active() || !got[1].Active() ||
			!got[0].LastUsed.IsZero() || !got[1].LastUsed.IsZero() {
			t.Fatalf("pairs before use: %+v", got)
		}

		first := f.clock.Now()
		f.clientCredentialsToken(t)
		if got := list(); !got[1].LastUsed.Equal(first.Truncate(time.Millisecond)) || !got[0].LastUsed.IsZero() {
			t.Fatalf("after a token at %v: %+v", first, got)
		}
		f.clock.Advance(30 * time.Second)
		f.clientCredentialsToken(t)
		if got := list(); !got[1].LastUsed.Equal(first.Truncate(time.Millisecond)) {
			t.Errorf("a second token within the minute was written: %v", got[1].LastUsed)
		}
		f.clock.Advance(31 * time.Second)
		f.clientCredentialsToken(t)
		if got := list(); !got[1].LastUsed.Equal(f.clock.Now().Truncate(time.Millisecond)) {
			t.Errorf("a token a minute later was not written: %v, want %v", got[1].LastUsed, f.clock.Now())
		}

		if err := db.Write(ctx, func(tx *store.Tx) error {
			_, err := auth.RevokeClient(ctx, tx, second.ClientID, f.clock.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := list(); got[0].Active() || !got[0].RevokedAt.Equal(f.clock.Now().Truncate(time.Millisecond)) || !got[1].Active() {
			t.Errorf("after revoking the newer pair: %+v", got)
		}
	})
}

// TestConnectedPartners: each partner the merchant approved and has not revoked, once, with the union
// of the scopes approved and the date of the first approval.
func TestConnectedPartners(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		books, maps, gone := f.newPartner(t, 0), f.newPartner(t, 0), f.newPartner(t, 0)
		m := f.creds.MerchantID
		approvedAt := f.clock.Now()
		f.approve(t, m, authorizeQuery(books, "scope", "ecom"))
		f.clock.Advance(time.Hour)
		f.approve(t, m, authorizeQuery(books, "scope", "invoice"))
		f.approve(t, m, authorizeQuery(maps, "scope", "ecom"))
		f.approve(t, m, authorizeQuery(gone, "scope", "ecom"))
		if _, err := auth.RevokePartner(ctx, db, m, gone.PartnerID, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		other := f.newMerchant(t, "other@example.com", auth.DefaultValidity)
		f.approve(t, other.MerchantID, authorizeQuery(gone, "scope", "ecom"))

		var got []auth.ConnectedPartner
		if err := db.Read(ctx, func(q store.Querier) error {
			var err error
			got, err = auth.ConnectedPartners(ctx, q, m)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string]auth.Scopes{books.PartnerID: auth.ScopeEcom | auth.ScopeInvoice, maps.PartnerID: auth.ScopeEcom}
		if len(got) != len(want) {
			t.Fatalf("connected partners: %+v", got)
		}
		for _, p := range got {
			if p.Scopes != want[p.Partner.ID] || p.Partner.Name != "Books Co" {
				t.Errorf("partner %s: scopes %v, want %v", p.Partner.ID, p.Scopes, want[p.Partner.ID])
			}
			if p.Partner.ID == books.PartnerID && !p.ApprovedAt.Equal(approvedAt.Truncate(time.Millisecond)) {
				t.Errorf("approved at %v, want the first approval %v", p.ApprovedAt, approvedAt)
			}
		}
	})
}

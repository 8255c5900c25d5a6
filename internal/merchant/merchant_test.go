package merchant_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

func create(db *store.DB, n merchant.New) (merchant.Merchant, error) {
	var m merchant.Merchant
	err := db.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		m, err = merchant.Create(context.Background(), tx, n, time.Now())
		return err
	})
	return m, err
}

func TestCreateAndGet(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		m, err := create(db, merchant.New{Name: " Shop ", Email: "Owner@Example.com", Currency: "usd"})
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^[0-9a-f]{10}$`).MatchString(m.ID) || m.AccountID() != "acct_"+m.ID {
			t.Fatalf("ids %q %q", m.ID, m.AccountID())
		}
		got, err := merchant.Get(context.Background(), db.Reader(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "Shop" || got.Email != "Owner@Example.com" || got.DefaultCurrency != "USD" {
			t.Fatalf("got %+v", got)
		}
		if _, err := merchant.Get(context.Background(), db.Reader(), "0000000000"); !errors.Is(err, merchant.ErrNotFound) {
			t.Fatalf("Get(unknown) = %v", err)
		}
		// E-mail addresses are unique regardless of case.
		_, err = create(db, merchant.New{Name: "Other", Email: "owner@example.COM"})
		var f *fault.Error
		if !errors.As(err, &f) || f.Status != 409 {
			t.Fatalf("duplicate e-mail: %v", err)
		}
		if n, _ := merchant.Count(context.Background(), db.Reader()); n != 1 {
			t.Fatalf("Count = %d", n)
		}
	})
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	for _, tc := range []struct {
		name  string
		in    merchant.New
		field string
	}{
		{"no name", merchant.New{Email: "a@example.com"}, "name"},
		{"blank name", merchant.New{Name: "   ", Email: "a@example.com"}, "name"},
		{"long name", merchant.New{Name: strings.Repeat("n", 201), Email: "a@example.com"}, "name"},
		{"no email", merchant.New{Name: "n"}, "email"},
		{"not an email", merchant.New{Name: "n", Email: "shop"}, "email"},
		{"display name", merchant.New{Name: "n", Email: "Shop <a@example.com>"}, "email"},
		{"no domain dot", merchant.New{Name: "n", Email: "a@localhost"}, "email"},
		{"long email", merchant.New{Name: "n", Email: strings.Repeat("a", 250) + "@example.com"}, "email"},
		{"bad currency", merchant.New{Name: "n", Email: "a@example.com", Currency: "ZZZ"}, "currency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := create(db, tc.in)
			var f *fault.Error
			if !errors.As(err, &f) || f.Status != 400 || f.Field != tc.field {
				t.Fatalf("Create = %v; want a 400 naming %s", err, tc.field)
			}
		})
	}
	if n, _ := merchant.Count(context.Background(), db.Reader()); n != 0 {
		t.Fatalf("invalid merchants were stored: %d", n)
	}
}

// Who may embed the hosted payment page: by default any https origin and http on localhost and
// 127.0.0.1; with origins named, exactly those.
func TestEmbeddingOrigins(t *testing.T) {
	t.Parallel()
	var def merchant.Settings
	named := merchant.Settings{AllowedOrigins: []string{"https://shop.example", "http://localhost:3000"}}
	for _, tc := range []struct {
		origin     string
		def, named bool
	}{
		{"https://shop.example", true, true},
		{"https://other.example", true, false},
		{"http://shop.example", false, false},
		{"http://localhost:3000", true, true},
		{"http://localhost:4000", true, false},
		{"http://127.0.0.1:8080", true, false},
		{"https://shop.example/path", false, false},
		{"null", false, false},
		{"", false, false},
	} {
		if got := def.MayEmbed(tc.origin); got != tc.def {
			t.Errorf("default MayEmbed(%q) = %v", tc.origin, got)
		}
		if got := named.MayEmbed(tc.origin); got != tc.named {
			t.Errorf("named MayEmbed(%q) = %v", tc.origin, got)
		}
	}
	if def.FrameAncestors() != merchant.DefaultFrameAncestors || named.FrameAncestors() != "https://shop.example http://localhost:3000" {
		t.Fatalf("frame ancestors %q / %q", def.FrameAncestors(), named.FrameAncestors())
	}
	for in, want := range map[string]string{"HTTPS://Shop.Example": "https://shop.example", "http://localhost:3000/": "http://localhost:3000"} {
		if got, err := merchant.ParseOrigin(in); err != nil || got != want {
			t.Errorf("ParseOrigin(%q) = %q, %v", in, got, err)
		}
	}
	// Origins go into the hosted page's frame-ancestors: rebuilt from their parts, never copied as
	// stored; a stored value that is not an origin (a ";" or a quote in its host) is left out, and with
	// none left no page may embed the hosted page.
	stored := merchant.Settings{AllowedOrigins: []string{"https://shop.example;script-src", "HTTPS://Good.Example:8443", "'unsafe-inline'", `https://q.example"`}}
	if got := stored.FrameAncestors(); got != "https://good.example:8443" {
		t.Errorf("frame ancestors of stored origins: %q", got)
	}
	if got := (merchant.Settings{AllowedOrigins: []string{"https://shop.example;script-src"}}).FrameAncestors(); got != "'none'" {
		t.Errorf("frame ancestors of a stored non-origin: %q, want 'none'", got)
	}
	for _, bad := range []string{"shop.example", "ftp://shop.example", "https://shop.example/pay", "https://*.shop.example", "https://u@shop.example",
		"https://shop.example?x=1", "https://shop.example'unsafe-inline'", `https://shop.example"`, "https://shop.example;"} {
		if _, err := merchant.ParseOrigin(bad); err == nil {
			t.Errorf("ParseOrigin(%q) accepted", bad)
		}
	}
}

// A merchant's velocity limits are stored as set: a limit left alone is 0, Kassa's default (which
// Effective shows), UseDefault goes back to it, and a limit out of range is a 400 naming it.
func TestVelocityLimits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		m, err := create(db, merchant.New{Name: "Shop", Email: "limits@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		update := func(v velocity.Limits) (merchant.Merchant, error) {
			var got merchant.Merchant
			err := db.Write(ctx, func(tx *store.Tx) error {
				var err error
				got, err = merchant.ApplyUpdate(ctx, tx, m.ID, merchant.Update{Velocity: v})
				return err
			})
			return got, err
		}
		if _, err := update(velocity.Limits{CardDeclines: 3, RequestRate: 50}); err != nil {
			t.Fatal(err)
		}
		if _, err := update(velocity.Limits{Sessions: 20}); err != nil { // the others stay
			t.Fatal(err)
		}
		got, err := merchant.Get(ctx, db.Reader(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Velocity != (velocity.Limits{CardDeclines: 3, Sessions: 20, RequestRate: 50}) {
			t.Fatalf("stored %+v", got.Velocity)
		}
		d := velocity.Defaults
		if e := got.Velocity.Effective(); e != (velocity.Limits{CardDeclines: 3, CredentialDeclines: d.CredentialDeclines,
			IntentFailures: d.IntentFailures, Sessions: 20, RequestRate: 50}) {
			t.Fatalf("in force %+v", e)
		}
		if got, err = update(velocity.Limits{CardDeclines: velocity.UseDefault}); err != nil || got.Velocity.CardDeclines != 0 {
			t.Fatalf("back to the default: %+v, %v", got.Velocity, err)
		}
		for _, bad := range []velocity.Limits{{IntentFailures: velocity.MaxLimit + 1}, {CredentialDeclines: -5}} {
			var f *fault.Error
			if _, err := update(bad); !errors.As(err, &f) || f.Status != 400 || !strings.HasPrefix(f.Field, "velocity_") {
				t.Fatalf("%+v: %v", bad, err)
			}
		}
	})
}

// TestLocaleAndZone checks that a merchant's locale and time zone are stored and read back on both
// backends, that a new merchant reads amounts as en-US shows them, and that a tag Kassa does not
// support, or a zone that is not one, is refused naming its field and leaves the stored one.
func TestLocaleAndZone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		m, err := create(db, merchant.New{Name: "Shop", Email: "locale@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := merchant.Get(ctx, db.Reader(), m.ID); got.Locale != "en-US" || got.Language().String() != "en-US" {
			t.Fatalf("new merchant's locale %q", got.Locale)
		}
		update := func(u merchant.Update) error {
			return db.Write(ctx, func(tx *store.Tx) error {
				_, err := merchant.ApplyUpdate(ctx, tx, m.ID, u)
				return err
			})
		}
		locale, zone := "de-de", "Asia/Tokyo"
		if err := update(merchant.Update{Locale: &locale, Timezone: &zone}); err != nil {
			t.Fatal(err)
		}
		got, err := merchant.Get(ctx, db.Reader(), m.ID)
		if err != nil || got.Locale != "de-DE" || got.Language().String() != "de-DE" || got.Location().String() != "Asia/Tokyo" {
			t.Fatalf("stored %q %q, %v", got.Locale, got.Timezone, err)
		}
		for _, tc := range []struct {
			u     merchant.Update
			field string
		}{
			{merchant.Update{Locale: ptr("tlh-KX")}, "locale"},
			{merchant.Update{Locale: ptr("de")}, "locale"},
			{merchant.Update{Locale: ptr("not a tag")}, "locale"},
			{merchant.Update{Timezone: ptr("Mars/Olympus")}, "timezone"},
		} {
			var f *fault.Error
			if err := update(tc.u); !errors.As(err, &f) || f.Status != 400 || f.Field != tc.field {
				t.Fatalf("%+v: %v", tc.u, err)
			}
		}
		if got, _ := merchant.Get(ctx, db.Reader(), m.ID); got.Locale != "de-DE" || got.Timezone != "Asia/Tokyo" {
			t.Fatalf("a refused update changed %q %q", got.Locale, got.Timezone)
		}
	})
}

func ptr(s string) *string { return &s }

package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/processor/accounts"
	"github.com/kassapay/kassa/internal/store"
)

// The operator's list and show commands: what the database holds, as JSON, never
// a secret. Times are RFC 3339 in UTC.

// merchantItem is one merchant in "kassa merchant list".
type merchantItem struct {
	MerchantID      string `json:"merchant_id"`
	AccountID       string `json:"account_id"`
	Name            string `json:"name"`
	Email           string `json:"email"`
	DefaultCurrency string `json:"default_currency"`
	CreatedAt       string `json:"created_at"`
}

func merchantListCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		all, err := listMerchants(ctx, db)
		if err != nil {
			return err
		}
		out := struct {
			Merchants []merchantItem `json:"merchants"`
		}{Merchants: []merchantItem{}}
		for _, m := range all {
			out.Merchants = append(out.Merchants, merchantItem{MerchantID: m.ID, AccountID: merchant.Merchant{ID: m.ID}.AccountID(), Name: m.Name,
				Email: m.Email, DefaultCurrency: m.DefaultCurrency, CreatedAt: rfc3339(m.CreatedAt)})
		}
		return printJSON(e.stdout, out)
	}
}

// listMerchants reads every merchant, oldest first.
func listMerchants(ctx context.Context, db *store.DB) ([]merchant.Summary, error) {
	var all []merchant.Summary
	err := db.Read(ctx, func(q store.Querier) error {
		var err error
		all, err = merchant.List(ctx, q)
		return err
	})
	return all, err
}

// merchantShown is what "kassa merchant show" prints: who the merchant is, and its settings as
// "kassa merchant update" prints them.
type merchantShown struct {
	AccountID string `json:"account_id"`
	Name      string `json:"name"`
	Email     string `json:"email"`
	CreatedAt string `json:"created_at"`
	merchantSettings
}

func merchantShowCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	id := fs.String("merchant-id", "", "merchant to show (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *id}); err != nil {
			return err
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		var m merchant.Merchant
		var p accounts.Summary
		err = db.Read(ctx, func(q store.Querier) error {
			if m, err = merchant.Get(ctx, q, *id); err != nil {
				return err
			}
			p, err = accounts.Describe(ctx, q, *id)
			return err
		})
		if errors.Is(err, merchant.ErrNotFound) {
			return errors.New("no merchant with id " + *id)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, merchantShown{AccountID: m.AccountID(), Name: m.Name, Email: m.Email, CreatedAt: rfc3339(m.CreatedAt),
			merchantSettings: settingsOf(m, p)})
	}
}

// clientItem is one client-credential pair in "kassa client list": never its secret.
type clientItem struct {
	ClientID             string  `json:"client_id"`
	CreatedAt            string  `json:"created_at"`
	TokenValiditySeconds int64   `json:"token_validity_seconds"`
	LastUsedAt           *string `json:"last_used_at"` // null: never used
	RevokedAt            *string `json:"revoked_at"`   // null: active
	Active               bool    `json:"active"`
}

func clientListCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	merchantID := fs.String("merchant-id", "", "merchant whose client credentials to list (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *merchantID}); err != nil {
			return err
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		var clients []auth.ClientInfo
		err = db.Read(ctx, func(q store.Querier) error {
			if _, err := merchant.Get(ctx, q, *merchantID); err != nil {
				return err
			}
			clients, err = auth.ListClients(ctx, q, *merchantID)
			return err
		})
		if errors.Is(err, merchant.ErrNotFound) {
			return errors.New("no merchant with id " + *merchantID)
		}
		if err != nil {
			return err
		}
		out := struct {
			MerchantID string       `json:"merchant_id"`
			Clients    []clientItem `json:"clients"`
		}{MerchantID: *merchantID, Clients: []clientItem{}}
		for _, c := range clients {
			out.Clients = append(out.Clients, clientItem{ClientID: c.ClientID, CreatedAt: rfc3339(c.CreatedAt),
				TokenValiditySeconds: int64(c.Validity / time.Second), LastUsedAt: rfc3339OrNull(c.LastUsed), RevokedAt: rfc3339OrNull(c.RevokedAt),
				Active: c.Active()})
		}
		return printJSON(e.stdout, out)
	}
}

// partnerItem is one partner in "kassa partner list".
type partnerItem struct {
	PartnerID    string   `json:"partner_id"`
	AccountID    string   `json:"account_id"`
	Name         string   `json:"name"`
	ImageURL     string   `json:"image_url"`
	CallbackURIs []string `json:"callback_uris"`
	CreatedAt    string   `json:"created_at"`
}

func partnerListCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		var all []auth.Partner
		if err := db.Read(ctx, func(q store.Querier) error {
			all, err = auth.ListPartners(ctx, q)
			return err
		}); err != nil {
			return err
		}
		out := struct {
			Partners []partnerItem `json:"partners"`
		}{Partners: []partnerItem{}}
		for _, p := range all {
			out.Partners = append(out.Partners, partnerItem{PartnerID: p.ID, AccountID: p.AccountID(), Name: p.Name, ImageURL: p.ImageURL,
				CallbackURIs: p.CallbackURIs, CreatedAt: rfc3339(p.CreatedAt)})
		}
		return printJSON(e.stdout, out)
	}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// rfc3339OrNull is a time in JSON, or null for the zero time (never).
func rfc3339OrNull(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := rfc3339(t)
	return &s
}

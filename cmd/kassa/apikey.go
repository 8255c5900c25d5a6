package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/store"
)

// newAPIKey is what "kassa apikey create" prints: the secret key, this once.
type newAPIKey struct {
	ID          string   `json:"id"`
	Key         string   `json:"key"`
	AccountID   string   `json:"account_id"`
	Permissions []string `json:"permissions"`
}

func apikeyCreateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	var account, perms string
	fs.StringVar(&account, "account-id", "", "the account the key belongs to: acct_ and a merchant or partner id (required)")
	fs.StringVar(&perms, "permissions", "", "comma-separated: "+strings.Join(checkout.AllPermissions.Names(), ",")+" (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"account-id", account}, [2]string{"permissions", perms}); err != nil {
			return err
		}
		p, err := checkout.ParsePermissions(strings.Split(perms, ","))
		if err != nil {
			return usagef("--permissions: %s", err)
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		var k checkout.NewKey
		err = db.Write(ctx, func(tx *store.Tx) error {
			k, err = checkout.CreateKey(ctx, tx, account, p, "", time.Now())
			return err
		})
		if errors.Is(err, checkout.ErrUnknownAccount) {
			return errors.New("no merchant or partner has the account id " + account)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, newAPIKey{ID: k.ID, Key: k.Key, AccountID: k.AccountID(), Permissions: k.Permissions.Names()})
	}
}

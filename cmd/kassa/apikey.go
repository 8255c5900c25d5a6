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

// apiKeyList is what "kassa apikey list" prints: the account and its live keys, never a secret.
type apiKeyList struct {
	AccountID string             `json:"account_id"`
	APIKeys   []checkout.WireKey `json:"api_keys"`
}

func apikeyListCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	var account string
	fs.StringVar(&account, "account-id", "", "the account whose keys to list: acct_ and a merchant or partner id (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"account-id", account}); err != nil {
			return err
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		keys, err := checkout.ListKeys(ctx, db, account)
		if errors.Is(err, checkout.ErrUnknownAccount) {
			return errors.New("no merchant or partner has the account id " + account)
		}
		if err != nil {
			return err
		}
		out := apiKeyList{AccountID: account, APIKeys: []checkout.WireKey{}}
		for _, k := range keys {
			out.APIKeys = append(out.APIKeys, k.Wire())
		}
		return printJSON(e.stdout, out)
	}
}

func apikeyRevokeCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	var id string
	fs.StringVar(&id, "id", "", "the key to revoke: key_… (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"id", id}); err != nil {
			return err
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		now := time.Now()
		_, err = checkout.RevokeKey(ctx, db, id, now)
		if errors.Is(err, checkout.ErrUnknownKey) {
			return errors.New("no live API key with id " + id)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, map[string]any{"id": id, "revoked": true, "revoked_at": now.UnixMilli()})
	}
}

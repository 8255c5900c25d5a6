package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/store"
)

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func partnerCreateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	var n auth.NewPartner
	var callbacks stringList
	fs.StringVar(&n.Name, "name", "", "business name, shown to merchants on the consent page (required)")
	fs.StringVar(&n.ImageURL, "image-url", "", "https URL of the partner's square image (required)")
	fs.Var(&callbacks, "callback-uri", "registered redirect URI; repeat for several (at least one)")
	fs.DurationVar(&n.TokenValidity, "token-validity", auth.DefaultPartnerValidity, "validity of the partner's access tokens")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"name", n.Name}, [2]string{"image-url", n.ImageURL}); err != nil {
			return err
		}
		if len(callbacks) == 0 {
			return usagef("--callback-uri is required")
		}
		n.CallbackURIs = callbacks
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		var out auth.PartnerCredentials
		err = db.Write(ctx, func(tx *store.Tx) error {
			out, err = auth.CreatePartner(ctx, tx, n, time.Now())
			return err
		})
		if err != nil {
			return err
		}
		return printJSON(e.stdout, out)
	}
}

func merchantRevokePartnerCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	merchantID := fs.String("merchant-id", "", "merchant whose approval ends (required)")
	partnerID := fs.String("partner-id", "", "partner that loses access to the merchant (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *merchantID}, [2]string{"partner-id", *partnerID}); err != nil {
			return err
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		now := time.Now()
		n, err := auth.RevokePartner(ctx, db, *merchantID, *partnerID, now)
		switch {
		case errors.Is(err, auth.ErrUnknownMerchant):
			return errors.New("no merchant with id " + *merchantID)
		case errors.Is(err, auth.ErrUnknownPartner):
			return errors.New("no partner with id " + *partnerID)
		case err != nil:
			return err
		}
		return printJSON(e.stdout, map[string]any{"merchant_id": *merchantID, "partner_id": *partnerID, "grants_revoked": n,
			"revoked_at": now.UTC().Format(time.RFC3339)})
	}
}

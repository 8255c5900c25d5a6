package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/cardenc"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/private"
	"github.com/kassapay/kassa/internal/processor/accounts"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
	"github.com/kassapay/kassa/internal/velocity"
	"github.com/kassapay/kassa/web"
)

func migrateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		return printJSON(e.stdout, map[string]string{"database": db.String(), "status": "migrated"})
	}
}

// newMerchant is what "kassa merchant create" prints. The merchant's e-mail is its first owner's
// sign-in; without --password, the owner chooses one through the link.
type newMerchant struct {
	MerchantID   string `json:"merchant_id"`
	AccountID    string `json:"account_id"`
	Name         string `json:"name"`
	Email        string `json:"email"`
	OwnerUserID  string `json:"owner_user_id"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	*linkOut
}

func merchantCreateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	var n merchant.New
	var pw string
	fs.StringVar(&n.Name, "name", "", "business name (required)")
	fs.StringVar(&n.Email, "email", "", "e-mail address, also the sign-in of the merchant's first owner on the dashboard (required)")
	fs.StringVar(&pw, "password", "", "the owner's dashboard password (optional, at least 10 characters; without it a link to set one is printed)")
	fs.StringVar(&n.Currency, "currency", "CAD", "default currency, ISO 4217")
	var l linkFlags
	l.register(fs)
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"name", n.Name}, [2]string{"email", n.Email}); err != nil {
			return err
		}
		if err := l.check(); err != nil {
			return err
		}
		db, err := l.open(ctx, e)
		if err != nil {
			return err
		}
		defer db.Close()
		out, err := createMerchant(ctx, db, n, pw, &l, time.Now())
		if err != nil {
			return err
		}
		return printJSON(e.stdout, out)
	}
}

// createMerchant creates a merchant, its first owner and its first client-credential pair in one
// transaction. Without a password, the owner gets a link to set one (an invitation, 72 hours).
func createMerchant(ctx context.Context, db *store.DB, n merchant.New, pw string, l *linkFlags, now time.Time) (newMerchant, error) {
	var hash string
	if pw != "" {
		var err error
		if hash, err = user.HashPassword(ctx, password.NewGate(password.GateConfig{}), pw); err != nil {
			return newMerchant{}, err
		}
	}
	var out newMerchant
	err := db.Write(ctx, func(tx *store.Tx) error {
		m, owner, err := user.CreateMerchant(ctx, tx, n, hash, now)
		if err != nil {
			return err
		}
		c, err := auth.CreateClient(ctx, tx, m.ID, auth.DefaultValidity, now)
		if err != nil {
			return err
		}
		out = newMerchant{MerchantID: m.ID, AccountID: m.AccountID(), Name: m.Name, Email: m.Email, OwnerUserID: owner.ID,
			ClientID: c.ClientID, ClientSecret: c.ClientSecret}
		if hash == "" {
			link, err := l.issue(ctx, tx, owner, user.Invite, now)
			out.linkOut = &link
			return err
		}
		return nil
	})
	return out, err
}

func clientCreateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	merchantID := fs.String("merchant-id", "", "merchant the pair belongs to (required)")
	validity := fs.Duration("validity", auth.DefaultValidity, "validity of the access tokens the pair gets")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *merchantID}); err != nil {
			return err
		}
		if *validity < auth.MinValidity || *validity > auth.MaxValidity || *validity%time.Second != 0 {
			return usagef("--validity must be whole seconds between %v and %v", auth.MinValidity, auth.MaxValidity)
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		var c auth.Credentials
		err = db.Write(ctx, func(tx *store.Tx) error {
			if _, err := merchant.Get(ctx, tx, *merchantID); err != nil {
				return err
			}
			c, err = auth.CreateClient(ctx, tx, *merchantID, *validity, time.Now())
			return err
		})
		if errors.Is(err, merchant.ErrNotFound) {
			return errors.New("no merchant with id " + *merchantID)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, c)
	}
}

func clientRevokeCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	clientID := fs.String("client-id", "", "client to revoke (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"client-id", *clientID}); err != nil {
			return err
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		now := time.Now()
		r, err := checkout.RevokeClient(ctx, db, *clientID, now)
		if errors.Is(err, auth.ErrUnknownClient) {
			return errors.New("no client with id " + *clientID)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, map[string]any{"client_id": *clientID, "revoked": true, "revoked_at": now.UnixMilli(),
			"grants_revoked": r.Grants, "api_keys_revoked": r.APIKeys})
	}
}

// merchantSettings is what "kassa merchant update" prints.
type merchantSettings struct {
	MerchantID       string          `json:"merchant_id"`
	DefaultCurrency  string          `json:"default_currency"`
	Currencies       []string        `json:"currencies"`
	MaxAmount        string          `json:"max_amount"`
	SimulatorProfile string          `json:"simulator_profile"`
	Timezone         string          `json:"timezone"`
	Locale           string          `json:"locale"`
	AllowedOrigins   []string        `json:"allowed_origins"`
	Velocity         velocity.Limits `json:"velocity"` // in force: a limit left at its default shows the default
	// Processor is what may be shown of the processor that takes the merchant's payments: never a
	// secret of its configuration.
	Processor accounts.Summary `json:"processor"`
}

func merchantUpdateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	id := fs.String("merchant-id", "", "merchant to change (required)")
	profile := fs.String("simulator-profile", "", "standard (test cards decide) or payfirma (odd whole amounts approve, even decline)")
	currencies := fs.String("currencies", "", "accepted currencies, comma-separated ISO 4217 codes; the default currency is always kept")
	maxAmount := fs.String("max-amount", "", "largest amount of one transaction, e.g. 999999.99")
	timezone := fs.String("timezone", "", "IANA time zone whose calendar subscriptions bill by and invoices fall due by, e.g. America/Toronto")
	locale := fs.String("locale", "", "locale amounts are shown in to people (dashboard, hosted pages, invoices, receipts): "+localeTags())
	origins := fs.String("allowed-origins", "", `origins whose pages may embed the hosted payment page, comma-separated (e.g. https://shop.example); "default" for any https origin and localhost`)
	kind := fs.String("processor", "", "processor that takes the merchant's new payments: simulator (the default), iso8583 or stripe; earlier transactions keep theirs")
	configFile := fs.String("processor-config", "", "file with the processor's configuration (JSON); stored sealed, never printed back")
	var u merchant.Update
	d := velocity.Defaults
	limits := []struct {
		name, usage, value string
		dst                *int
	}{
		{"velocity-card-declines", fmt.Sprintf("declines of one card per hour; beyond, its payments are declined without the processor (default %d)", d.CardDeclines), "", &u.Velocity.CardDeclines},
		{"velocity-credential-declines", fmt.Sprintf("declines of one credential's payments (token grant, client or API key) per 10 minutes; beyond, 429 (default %d)", d.CredentialDeclines), "", &u.Velocity.CredentialDeclines},
		{"velocity-intent-failures", fmt.Sprintf("failed confirmations of one payment intent per hour; beyond, 429 (default %d)", d.IntentFailures), "", &u.Velocity.IntentFailures},
		{"velocity-sessions", fmt.Sprintf("hosted-page sessions one API key creates per minute (default %d)", d.Sessions), "", &u.Velocity.Sessions},
		{"velocity-request-rate", fmt.Sprintf("API requests per second of one credential (default %d)", d.RequestRate), "", &u.Velocity.RequestRate},
	}
	for i := range limits {
		fs.StringVar(&limits[i].value, limits[i].name, "", limits[i].usage+`; "default" restores the default`)
	}
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *id}); err != nil {
			return err
		}
		for _, l := range limits {
			switch n, err := strconv.Atoi(l.value); {
			case l.value == "":
			case l.value == "default":
				*l.dst = velocity.UseDefault
			case err != nil || n < 1 || n > velocity.MaxLimit:
				return usagef("--%s must be a whole number from 1 to %d, or default", l.name, velocity.MaxLimit)
			default:
				*l.dst = n
			}
		}
		if *profile != "" {
			u.SimulatorProfile = profile
		}
		if *currencies != "" {
			u.Currencies = strings.Split(*currencies, ",")
		}
		if *maxAmount != "" {
			u.MaxAmount = maxAmount
		}
		if *timezone != "" {
			u.Timezone = timezone
		}
		if *locale != "" {
			u.Locale = locale
		}
		switch *origins {
		case "":
		case "default":
			u.AllowedOrigins = []string{}
		default:
			u.AllowedOrigins = strings.Split(*origins, ",")
		}
		if *configFile != "" && *kind == "" {
			return usagef("--processor-config needs --processor")
		}
		var config []byte
		if *configFile != "" {
			var err error
			if config, err = os.ReadFile(*configFile); err != nil {
				return fmt.Errorf("--processor-config: %w", err)
			}
		}
		processors, db, err := e.processors(ctx, *kind != "")
		if err != nil {
			return err
		}
		defer db.Close()
		var m merchant.Merchant
		var p accounts.Summary
		err = db.Write(ctx, func(tx *store.Tx) error {
			if m, err = merchant.ApplyUpdate(ctx, tx, *id, u); err != nil {
				return err
			}
			if processors != nil {
				p, err = processors.Set(ctx, tx, *id, *kind, config)
			} else {
				p, err = accounts.Describe(ctx, tx, *id)
			}
			return err
		})
		if errors.Is(err, merchant.ErrNotFound) {
			return errors.New("no merchant with id " + *id)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, settingsOf(m, p))
	}
}

// settingsOf is what "kassa merchant update" and "kassa merchant show" print of a merchant's settings.
func settingsOf(m merchant.Merchant, p accounts.Summary) merchantSettings {
	return merchantSettings{MerchantID: m.ID, DefaultCurrency: m.DefaultCurrency, Currencies: m.Currencies,
		MaxAmount: m.MaxAmount(), SimulatorProfile: m.SimulatorProfile, Timezone: m.Timezone, Locale: m.Locale, AllowedOrigins: orEmpty(m.AllowedOrigins),
		Velocity: m.Velocity.Effective(), Processor: p}
}

// processors opens the database and, when the command sets a processor, the processor accounts (whose
// configurations are sealed under the key-encryption key, checked first as cardKeys does).
func (e *env) processors(ctx context.Context, setting bool) (*accounts.Service, *store.DB, error) {
	var kek *envelope.KEK
	if setting {
		var err error
		if kek, err = e.db.kek(e.note); err != nil {
			return nil, nil, err
		}
	}
	db, err := e.db.open(ctx)
	if err != nil || !setting {
		return nil, db, err
	}
	ring, err := envelope.NewKeyring(ctx, db, kek, time.Now)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return accounts.New(accounts.Config{DB: db, Keyring: ring, Kinds: e.connectors(db, nil)}), db, nil
}

// orEmpty prints a missing list as [], not null.
func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// publicKeyOut is what "kassa merchant keys" and "kassa keys rotate" print.
type publicKeyOut struct {
	PublicEncryptionKey string `json:"public_encryption_key"`
	KeyID               string `json:"key_id"`
	CreatedAt           int64  `json:"created_at"`
	ScriptPath          string `json:"script_path"`
	ScriptIntegrity     string `json:"script_integrity"`
	PreviousExpiresAt   int64  `json:"previous_key_expires_at,omitempty"`
}

func keyOut(k cardenc.PublicKey) publicKeyOut {
	return publicKeyOut{PublicEncryptionKey: k.Encoded(), KeyID: k.ID, CreatedAt: k.CreatedAt.UnixMilli(),
		ScriptPath: web.CardEncryption.Path(), ScriptIntegrity: web.CardEncryption.Integrity}
}

// cardKeys opens what the card-encryption commands need, and checks that the merchant exists. The
// key-encryption key is checked first: a configuration problem is reported before a data problem.
func cardKeys(ctx context.Context, e *env, merchantID string) (*cardenc.Service, func(), error) {
	kek, err := e.db.kek(e.note)
	if err != nil {
		return nil, nil, err
	}
	db, err := e.db.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*cardenc.Service, func(), error) { db.Close(); return nil, nil, err }
	if err := db.Read(ctx, func(q store.Querier) error { _, err := merchant.Get(ctx, q, merchantID); return err }); err != nil {
		if errors.Is(err, merchant.ErrNotFound) {
			err = errors.New("no merchant with id " + merchantID)
		}
		return fail(err)
	}
	ring, err := envelope.NewKeyring(ctx, db, kek, time.Now)
	if err != nil {
		return fail(err)
	}
	return cardenc.New(cardenc.Config{DB: db, Keyring: ring}), func() { db.Close() }, nil
}

func merchantKeysCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	id := fs.String("merchant-id", "", "merchant whose public card-encryption key to print (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *id}); err != nil {
			return err
		}
		svc, done, err := cardKeys(ctx, e, *id)
		if err != nil {
			return err
		}
		defer done()
		k, err := svc.Current(ctx, *id)
		if err != nil {
			return err
		}
		return printJSON(e.stdout, keyOut(k))
	}
}

func keysRotateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	id := fs.String("merchant-id", "", "merchant whose card-encryption key pair to replace (required)")
	grace := fs.Duration("grace", cardenc.DefaultGrace, "how long tokens made with the previous key keep working")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *id}); err != nil {
			return err
		}
		if *grace < 0 {
			return usagef("--grace must not be negative")
		}
		svc, done, err := cardKeys(ctx, e, *id)
		if err != nil {
			return err
		}
		defer done()
		k, err := svc.Rotate(ctx, *id, *grace)
		if err != nil {
			return err
		}
		out := keyOut(k)
		out.PreviousExpiresAt = k.CreatedAt.Add(*grace).UnixMilli()
		return printJSON(e.stdout, out)
	}
}

// rotateVaultOut is what "kassa keys rotate-vault" prints.
type rotateVaultOut struct {
	OldKEKID          string `json:"old_kek_id"`
	NewKEKID          string `json:"new_kek_id"`
	DataKeysRewrapped int    `json:"data_keys_rewrapped"`
	VaultKeyFile      string `json:"vault_key_file"`
}

// keysRotateVaultCommand re-wraps the data keys under a new key-encryption key. It works while servers
// run; they must then be restarted with the new key. When the current key is the generated one in the
// data directory, the new key takes its place there.
func keysRotateVaultCommand(flags *flag.FlagSet) func(context.Context, *env) error {
	newFile := flags.String("new-vault-key-file", "", "file with the new key-encryption key; created (mode 0600) with a fresh key when it does not exist (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"new-vault-key-file", *newFile}); err != nil {
			return err
		}
		old, err := e.db.kek(e.note)
		if err != nil {
			return err
		}
		if _, err := os.Stat(*newFile); errors.Is(err, fs.ErrNotExist) {
			if err := private.WriteFile(*newFile, []byte(envelope.NewKEKText()+"\n")); err != nil {
				return err
			}
		}
		text, err := os.ReadFile(*newFile)
		if err != nil {
			return err
		}
		next, err := envelope.ParseKEK(string(text))
		if err != nil {
			return err
		}
		if next.ID == old.ID {
			return usagef("--new-vault-key-file holds the current key")
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		n, err := envelope.Rewrap(ctx, db, old, next)
		if err != nil {
			return err
		}
		out := rotateVaultOut{OldKEKID: old.ID, NewKEKID: next.ID, DataKeysRewrapped: n, VaultKeyFile: *newFile}
		if os.Getenv("KASSA_VAULT_KEY") == "" && e.db.vaultKeyPath() == e.db.defaultVaultKeyPath() {
			// Replace the generated key in place, atomically, so that a restart finds the new one.
			tmp := e.db.defaultVaultKeyPath() + ".new"
			if err := private.WriteFile(tmp, text); err != nil {
				return err
			}
			if err := os.Rename(tmp, e.db.defaultVaultKeyPath()); err != nil {
				return err
			}
			out.VaultKeyFile = e.db.defaultVaultKeyPath()
		}
		return printJSON(e.stdout, out)
	}
}

func billingStatusCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		s, err := billing.Status(ctx, db, time.Now())
		if err != nil {
			return err
		}
		return printJSON(e.stdout, s)
	}
}

// localeTags lists the locales a merchant may choose, for the --locale flag's usage: "en-US, en-CA, …".
func localeTags() string {
	var tags []string
	for _, l := range money.Locales() {
		tags = append(tags, l.Tag)
	}
	return strings.Join(tags, ", ")
}

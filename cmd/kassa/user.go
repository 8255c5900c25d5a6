package main

import (
	"context"
	"errors"
	"flag"
	"net/url"
	"os"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/dashboard"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// linkFlags are the flags of the commands that hand out a password link: the public URL the link
// points at, and the SMTP server through which it is also mailed.
type linkFlags struct {
	publicURL, smtpURL string
}

func (l *linkFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.publicURL, "public-url", envOr("KASSA_PUBLIC_URL", "http://127.0.0.1:8080"), "public URL of the Kassa the link points at (env KASSA_PUBLIC_URL)")
	fs.StringVar(&l.smtpURL, "smtp-url", os.Getenv("KASSA_SMTP_URL"), "when set, the link is also e-mailed through the outbox that a server with this SMTP server delivers (env KASSA_SMTP_URL)")
}

// check validates the flags before anything is written.
func (l *linkFlags) check() error {
	if u, err := url.Parse(l.publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--public-url must be an absolute http or https URL")
	}
	if l.smtpURL != "" {
		if _, err := billing.NewMailer(l.smtpURL, "kassa@localhost"); err != nil {
			return usageError{err.Error()}
		}
	}
	return nil
}

// open opens the database for a command that hands out a link. A link that is mailed waits in the
// outbox sealed under the key-encryption key, which is then loaded first (e.db.kek), as for the other
// commands that seal: a configuration problem is reported before a data problem.
func (l *linkFlags) open(ctx context.Context, e *env) (*store.DB, error) {
	if l.smtpURL == "" {
		return e.db.open(ctx)
	}
	kek, err := e.db.kek(e.note)
	if err != nil {
		return nil, err
	}
	db, err := e.db.open(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := envelope.NewKeyring(ctx, db, kek, time.Now); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// issue makes a link of kind for u in tx, and queues its e-mail when SMTP is configured.
func (l *linkFlags) issue(ctx context.Context, tx *store.Tx, u user.User, kind user.LinkKind, now time.Time) (linkOut, error) {
	link, expires, err := dashboard.SendLink(ctx, tx, u, kind, l.publicURL, l.smtpURL != "", now)
	return linkOut{Link: link, ExpiresAt: expires.UnixMilli(), Mailed: l.smtpURL != ""}, err
}

// linkOut is a password link as the commands print it: shown once, its secret stored only hashed.
type linkOut struct {
	Link      string `json:"set_password_link"`
	ExpiresAt int64  `json:"link_expires_at"`
	Mailed    bool   `json:"mailed"` // queued in the outbox for the e-mail's owner
}

// newUser is what "kassa user create" prints.
type newUser struct {
	user.User
	linkOut
}

func userCreateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	merchantID := fs.String("merchant-id", "", "merchant the user works for (required)")
	email := fs.String("email", "", "the user's e-mail address, with which it signs in (required)")
	role := fs.String("role", "", "owner, admin, reporting or sales (required)")
	var l linkFlags
	l.register(fs)
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *merchantID}, [2]string{"email", *email}, [2]string{"role", *role}); err != nil {
			return err
		}
		r, err := user.ParseRole(*role)
		if err != nil {
			return usagef("--role must be owner, admin, reporting or sales")
		}
		if err := l.check(); err != nil {
			return err
		}
		db, err := l.open(ctx, e)
		if err != nil {
			return err
		}
		defer db.Close()
		var out newUser
		now := time.Now()
		err = db.Write(ctx, func(tx *store.Tx) error {
			if out.User, err = user.Create(ctx, tx, user.New{MerchantID: *merchantID, Email: *email, Role: r}, now); err != nil {
				return err
			}
			if out.HasPassword { // on another merchant's staff already: it signs in as it does there
				return nil
			}
			out.linkOut, err = l.issue(ctx, tx, out.User, user.Invite, now)
			return err
		})
		if errors.Is(err, merchant.ErrNotFound) {
			return errors.New("no merchant with id " + *merchantID)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, out)
	}
}

// userList is what "kassa user list" prints: never a password hash.
type userList struct {
	MerchantID string      `json:"merchant_id"`
	Users      []user.User `json:"users"`
}

func userListCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	merchantID := fs.String("merchant-id", "", "merchant whose users to list (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", *merchantID}); err != nil {
			return err
		}
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		out := userList{MerchantID: *merchantID}
		err = db.Read(ctx, func(q store.Querier) error {
			if _, err := merchant.Get(ctx, q, *merchantID); err != nil {
				return err
			}
			out.Users, err = user.List(ctx, q, *merchantID)
			return err
		})
		if errors.Is(err, merchant.ErrNotFound) {
			return errors.New("no merchant with id " + *merchantID)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, out)
	}
}

// resetOut is what "kassa user reset-password" prints.
type resetOut struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	linkOut
}

func userResetPasswordCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	email := fs.String("email", "", "e-mail of the user whose password to reset (required)")
	var l linkFlags
	l.register(fs)
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"email", *email}); err != nil {
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
		var out resetOut
		now := time.Now()
		err = db.Write(ctx, func(tx *store.Tx) error {
			p, err := user.ByEmail(ctx, tx, *email)
			if err != nil {
				return err
			}
			u, err := user.Home(ctx, tx, p.ID) // the merchant under which the e-mail goes
			if err != nil {
				return err
			}
			out.UserID, out.Email = u.ID, u.Email
			out.linkOut, err = l.issue(ctx, tx, u, user.Reset, now)
			return err
		})
		if errors.Is(err, user.ErrNotFound) {
			return errors.New("no user with e-mail " + *email)
		}
		if err != nil {
			return err
		}
		return printJSON(e.stdout, out)
	}
}

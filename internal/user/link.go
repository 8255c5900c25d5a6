package user

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"errors"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store"
)

// LinkKind is what a link is for.
type LinkKind string

// The kinds of link, and how long each works.
const (
	// Reset sets a new password: single use, 30 minutes.
	Reset LinkKind = "reset"
	// Invite accepts a membership of a merchant's staff, and sets the password of a person who has
	// none yet: 72 hours.
	Invite LinkKind = "invite"

	ResetTTL  = 30 * time.Minute
	InviteTTL = 72 * time.Hour
)

// TTL is how long a link of the kind works.
func (k LinkKind) TTL() time.Duration {
	if k == Invite {
		return InviteTTL
	}
	return ResetTTL
}

// ErrBadLink is the one answer to a link that is unknown, used or expired: which of these it is
// tells nobody anything useful.
var ErrBadLink = errors.New("user: the link is unknown, used or expired")

// ErrPasswordNeeded refuses to use a link without a password where it must set one: a reset, or an
// invitation of a person who has none yet.
var ErrPasswordNeeded = fault.Invalid("password", "password is required")

// Link is an issued link's secret and expiry. The secret is shown once (in the e-mail, or to the
// operator); only its SHA-256 is stored.
type Link struct {
	Token     string
	ExpiresAt time.Time
}

// IssueLink makes a link of kind for person id, in the caller's transaction; an invitation names the
// merchant whose membership it accepts.
func IssueLink(ctx context.Context, tx store.Querier, id string, kind LinkKind, merchantID string, now time.Time) (Link, error) {
	l := Link{Token: rand.Text(), ExpiresAt: now.Add(kind.TTL())} // 130 random bits
	_, err := tx.ExecContext(ctx, `INSERT INTO user_links (token_hash, user_id, kind, created_at, expires_at, merchant_id) VALUES ($1, $2, $3, $4, $5, $6)`,
		linkHash(l.Token), id, string(kind), now.UnixMilli(), l.ExpiresAt.UnixMilli(), sql.NullString{String: merchantID, Valid: kind == Invite})
	return l, err
}

// RecentReset reports whether the person was sent a reset link that is still unused within the last
// d: the forgotten-password form then sends no other, so that it cannot flood a mailbox.
func RecentReset(ctx context.Context, q store.Querier, id string, d time.Duration, now time.Time) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM user_links WHERE user_id = $1 AND kind = 'reset' AND used_at IS NULL AND created_at > $2`,
		id, now.Add(-d).UnixMilli()).Scan(&n)
	return n > 0, err
}

// Opened is what a link that can still be used is for: its person, its kind, and for an invitation
// the membership it accepts.
type Opened struct {
	Person
	Kind LinkKind
	// Invitation is the membership an invitation accepts, with its merchant's name.
	Invitation Membership
}

// NeedsPassword reports whether using the link sets a password: a reset, or an invitation of a person
// who has none yet.
func (o Opened) NeedsPassword() bool { return o.Kind == Reset || !o.HasPassword }

// OpenLink reads what a link that can still be used is for, without using it.
func OpenLink(ctx context.Context, q store.Querier, token string, now time.Time) (Opened, error) {
	var o Opened
	var merchantID sql.NullString
	err := q.QueryRowContext(ctx, `SELECT user_id, kind, merchant_id FROM user_links WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2`,
		linkHash(token), now.UnixMilli()).Scan(&o.ID, &o.Kind, &merchantID)
	if errors.Is(err, sql.ErrNoRows) {
		return Opened{}, ErrBadLink
	}
	if err != nil {
		return Opened{}, err
	}
	if o.Person, err = GetPerson(ctx, q, o.ID); err != nil {
		return Opened{}, cmpErr(badLink(err), err)
	}
	if o.Kind == Invite {
		if o.Invitation.User, err = Staff(ctx, q, merchantID.String, o.ID); err != nil {
			return Opened{}, cmpErr(badLink(err), err)
		}
		if err := q.QueryRowContext(ctx, `SELECT name FROM merchants WHERE id = $1`, merchantID.String).Scan(&o.Invitation.Merchant); err != nil {
			return Opened{}, err
		}
	}
	return o, nil
}

// badLink is ErrBadLink when err is ErrNotFound (the person or the membership went), else nil.
func badLink(err error) error {
	if errors.Is(err, ErrNotFound) {
		return ErrBadLink
	}
	return nil
}

// UseLink uses a link up, in the caller's transaction: it works once. hash (HashPassword) becomes the
// person's password where the link sets one (Opened.NeedsPassword; ErrPasswordNeeded without it), which,
// like every change of password, ends the person's sessions and its reset links. An invitation
// accepts its membership and makes its merchant the one the person signs in to next.
func UseLink(ctx context.Context, tx store.Querier, token, hash string, now time.Time) (Opened, error) {
	o, err := OpenLink(ctx, tx, token, now)
	if err != nil {
		return Opened{}, err
	}
	if o.NeedsPassword() && hash == "" {
		return Opened{}, ErrPasswordNeeded
	}
	r, err := tx.ExecContext(ctx, `UPDATE user_links SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2`,
		linkHash(token), now.UnixMilli())
	if err != nil {
		return Opened{}, err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return Opened{}, cmpErr(err, ErrBadLink) // used by a transaction that raced this one
	}
	if o.NeedsPassword() {
		if err := SetPassword(ctx, tx, o.ID, hash, now); err != nil {
			return Opened{}, err
		}
		o.HasPassword = true
	}
	if o.Kind == Invite {
		if _, err := tx.ExecContext(ctx, `UPDATE memberships SET accepted_at = $3 WHERE user_id = $1 AND merchant_id = $2 AND accepted_at IS NULL`,
			o.ID, o.Invitation.MerchantID, now.UnixMilli()); err != nil {
			return Opened{}, err
		}
		if _, err := Choose(ctx, tx, o.Invitation.MerchantID, o.ID); err != nil {
			return Opened{}, err
		}
		if err := changed(ctx, tx, o.ID, now); err != nil {
			return Opened{}, err
		}
		o.Invitation.Pending = false
	}
	return o, nil
}

func linkHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

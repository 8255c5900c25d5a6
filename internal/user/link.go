package user

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"errors"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// LinkKind is what a link is for: both set the user's password.
type LinkKind string

// The kinds of link, and how long each works.
const (
	// Reset is a password reset: "single use, 30 minutes" (issue 16, point 1).
	Reset LinkKind = "reset"
	// Invite is an invitation to a new user: "link to set a password, 72 h" (issue 16, point 3).
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

// Link is an issued link's secret and expiry. The secret is shown once (in the e-mail, or to the
// operator); only its SHA-256 is stored.
type Link struct {
	Token     string
	ExpiresAt time.Time
}

// IssueLink makes a link of kind for the user, in the caller's transaction.
func IssueLink(ctx context.Context, tx store.Querier, userID string, kind LinkKind, now time.Time) (Link, error) {
	l := Link{Token: rand.Text(), ExpiresAt: now.Add(kind.TTL())} // 130 random bits
	_, err := tx.ExecContext(ctx, `INSERT INTO user_links (token_hash, user_id, kind, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		linkHash(l.Token), userID, string(kind), now.UnixMilli(), l.ExpiresAt.UnixMilli())
	return l, err
}

// RecentReset reports whether the user was sent a reset link that is still unused within the last
// d: the forgotten-password form then sends no other, so that it cannot flood a mailbox.
func RecentReset(ctx context.Context, q store.Querier, userID string, d time.Duration, now time.Time) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM user_links WHERE user_id = $1 AND kind = 'reset' AND used_at IS NULL AND created_at > $2`,
		userID, now.Add(-d).UnixMilli()).Scan(&n)
	return n > 0, err
}

// OpenLink reads the user and kind of a link that can still be used, without using it.
func OpenLink(ctx context.Context, q store.Querier, token string, now time.Time) (User, LinkKind, error) {
	var id string
	var kind LinkKind
	err := q.QueryRowContext(ctx, `SELECT user_id, kind FROM user_links WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2`,
		linkHash(token), now.UnixMilli()).Scan(&id, &kind)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, "", ErrBadLink
	}
	if err != nil {
		return User{}, "", err
	}
	u, err := Get(ctx, q, id)
	if errors.Is(err, ErrNotFound) {
		return User{}, "", ErrBadLink
	}
	return u, kind, err
}

// UseLink makes hash (HashPassword) the password of the link's user, in the caller's transaction, and uses the link up:
// it works once. Like every change of password, it ends the user's sessions and its other links.
func UseLink(ctx context.Context, tx store.Querier, token, hash string, now time.Time) (User, error) {
	var id string
	err := tx.QueryRowContext(ctx, `UPDATE user_links SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2
		RETURNING user_id`, linkHash(token), now.UnixMilli()).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrBadLink
	}
	if err != nil {
		return User{}, err
	}
	if err := SetPassword(ctx, tx, id, hash, now); err != nil {
		return User{}, err
	}
	return Get(ctx, tx, id)
}

func linkHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

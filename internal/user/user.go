// Package user keeps the staff of a merchant who sign in to the dashboard (issue 16, point 3): their
// roles, the links by which they set a password (a reset or an invitation), and their dashboard
// sessions. A user belongs to one merchant and signs in with an e-mail that no other user has.
//
// Roles, after the original gateway's "Staff" groups:
//
//   - owner: everything (a merchant has one or more);
//   - admin: everything but managing owners;
//   - reporting: read-only, no money movement, no credentials;
//   - sales: takes payments and sees only the transactions it took.
package user

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
)

// Role is what a user may do.
type Role string

// The roles.
const (
	Owner     Role = "owner"
	Admin     Role = "admin"
	Reporting Role = "reporting"
	Sales     Role = "sales"
)

// Roles are every role, from the most to the least powerful.
var Roles = []Role{Owner, Admin, Reporting, Sales}

// Approvers are the roles that may act for the merchant towards the OAuth server: approve a partner on
// the consent page, and get tokens by the password grant. A reporting or sales user holds neither
// credentials nor the merchant's consent, so its password fails there as a wrong one would
// (docs/decisions.md, "Staff users and roles").
var Approvers = []Role{Owner, Admin}

// ParseRole reads a role's name; the error names the field "role".
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if !slices.Contains(Roles, r) {
		return "", fault.Invalid("role", "role must be one of owner, admin, reporting, sales")
	}
	return r, nil
}

// Label is the role's name as a page shows it.
func (r Role) Label() string {
	switch r {
	case Owner:
		return "Owner"
	case Admin:
		return "Admin"
	case Reporting:
		return "Reporting"
	case Sales:
		return "Sales"
	}
	return string(r)
}

// User is one staff user. It never carries the password hash.
type User struct {
	ID          string    `json:"user_id"` // 10 lowercase hex characters
	MerchantID  string    `json:"merchant_id"`
	Email       string    `json:"email"`
	Role        Role      `json:"role"`
	HasPassword bool      `json:"has_password"` // false until the user sets one through a link
	CreatedAt   time.Time `json:"-"`
	Created     int64     `json:"created_at"` // epoch milliseconds, as the other CLI commands print times
}

// New describes a user to create.
type New struct {
	MerchantID string
	Email      string
	Role       Role
	// Hash is the password's hash (HashPassword), optional: without one the user sets a password
	// through a link.
	Hash string
}

// Errors callers branch on.
var (
	ErrNotFound = errors.New("user: not found")
	// ErrLastOwner refuses to remove or demote a merchant's last owner.
	ErrLastOwner = fault.Conflict("last_owner", "a merchant keeps at least one owner: make another user owner first")
	// ErrOwnersOnly refuses an admin's change to an owner, or an admin's grant of the owner role.
	ErrOwnersOnly = fault.New(http.StatusForbidden, "owners_only", "only an owner can manage owners")
)

const columns = `id, merchant_id, email, role, password_hash IS NOT NULL, created_at`

func scan(row interface{ Scan(...any) error }) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.MerchantID, &u.Email, &u.Role, &u.HasPassword, &u.Created)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrNotFound
	}
	u.CreatedAt = time.UnixMilli(u.Created)
	return u, err
}

// Create validates n and stores the user in the caller's transaction. The merchant must exist; an
// e-mail that another user has is a conflict.
func Create(ctx context.Context, tx store.Querier, n New, now time.Time) (User, error) {
	id, err := newID(ctx, tx)
	if err != nil {
		return User{}, err
	}
	return insert(ctx, tx, id, n, now)
}

// CreateMerchant creates a merchant and its first owner (CreateOwner) in the caller's transaction:
// "kassa merchant create makes its e-mail the first owner" (issue 16, point 3). hash is the owner's
// password (HashPassword), or "" for the owner to set one through a link.
func CreateMerchant(ctx context.Context, tx store.Querier, n merchant.New, hash string, now time.Time) (merchant.Merchant, User, error) {
	m, err := merchant.Create(ctx, tx, n, now)
	if err != nil {
		return merchant.Merchant{}, User{}, err
	}
	u, err := CreateOwner(ctx, tx, m, hash, now)
	return m, u, err
}

// CreateOwner stores a merchant's first owner, with the merchant's e-mail and, as its user id, the
// merchant's id (as the migration that introduced users did for existing merchants).
// hash is the password's (HashPassword), or "" for none yet.
func CreateOwner(ctx context.Context, tx store.Querier, m merchant.Merchant, hash string, now time.Time) (User, error) {
	return insert(ctx, tx, m.ID, New{MerchantID: m.ID, Email: m.Email, Role: Owner, Hash: hash}, now)
}

func insert(ctx context.Context, tx store.Querier, id string, n New, now time.Time) (User, error) {
	u := User{ID: id, MerchantID: n.MerchantID, Email: strings.TrimSpace(n.Email), Role: n.Role, CreatedAt: now, Created: now.UnixMilli()}
	if err := merchant.ValidateEmail(u.Email); err != nil {
		return User{}, fault.Invalid("email", "email %s", err)
	}
	if _, err := ParseRole(string(u.Role)); err != nil {
		return User{}, err
	}
	if _, err := merchant.Get(ctx, tx, u.MerchantID); err != nil {
		return User{}, err
	}
	hash := sql.NullString{String: n.Hash, Valid: n.Hash != ""}
	u.HasPassword = hash.Valid
	_, err := tx.ExecContext(ctx, `INSERT INTO users (id, merchant_id, email, email_key, password_hash, role, created_at, password_changed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, u.ID, u.MerchantID, u.Email, merchant.EmailKey(u.Email), hash, string(u.Role),
		u.Created, sql.NullInt64{Int64: u.Created, Valid: hash.Valid})
	if store.IsUniqueViolation(err) {
		return User{}, fault.Conflict("email_taken", "a user with email %s already exists", u.Email)
	}
	return u, err
}

// HashPassword hashes a new password, before the transaction that stores it (an argon2id hash takes a
// fifth of a second, which a transaction should not wait for); the error names the field "password".
func HashPassword(pw string) (string, error) {
	h, err := password.Hash(pw)
	if err != nil {
		return "", fault.Invalid("password", "%s", strings.TrimPrefix(err.Error(), "password: "))
	}
	return h, nil
}

// newID returns 10 lowercase hex characters that are no user's, merchant's or partner's id: a
// merchant's first owner takes the merchant's id, so staff ids stay out of that namespace too.
func newID(ctx context.Context, q store.Querier) (string, error) {
	for range 5 {
		var b [5]byte
		rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		var taken int
		if err := q.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM users WHERE id = $1) + (SELECT COUNT(*) FROM merchants WHERE id = $1)
			+ (SELECT COUNT(*) FROM partners WHERE id = $1)`, id).Scan(&taken); err != nil {
			return "", err
		}
		if taken == 0 {
			return id, nil
		}
	}
	return "", errors.New("user: no free id after five tries")
}

// Get reads a user by id.
func Get(ctx context.Context, q store.Querier, id string) (User, error) {
	return scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM users WHERE id = $1`, id))
}

// ByEmail reads the user who signs in with email (compared without regard to case).
func ByEmail(ctx context.Context, q store.Querier, email string) (User, error) {
	if !httpapi.Storable(email) {
		return User{}, ErrNotFound // nobody signs in so, and PostgreSQL would refuse to look
	}
	return scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM users WHERE email_key = $1`, merchant.EmailKey(strings.TrimSpace(email))))
}

// Credentials are what a sign-in checks a password against: Hash is "" while the user has none.
type Credentials struct {
	User
	Hash string
}

// CredentialsByEmail reads the user who signs in with email and the password hash.
func CredentialsByEmail(ctx context.Context, q store.Querier, email string) (Credentials, error) {
	if !httpapi.Storable(email) {
		return Credentials{}, ErrNotFound
	}
	var c Credentials
	var hash sql.NullString
	err := q.QueryRowContext(ctx, `SELECT id, merchant_id, role, password_hash FROM users WHERE email_key = $1`,
		merchant.EmailKey(strings.TrimSpace(email))).Scan(&c.ID, &c.MerchantID, &c.Role, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return Credentials{}, ErrNotFound
	}
	c.Hash, c.HasPassword = hash.String, hash.Valid
	return c, err
}

// List returns a merchant's users, owners first, then by e-mail.
func List(ctx context.Context, q store.Querier, merchantID string) ([]User, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+columns+` FROM users WHERE merchant_id = $1
		ORDER BY CASE role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'reporting' THEN 2 ELSE 3 END, email_key`, merchantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []User{}
	for rows.Next() {
		u, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// MayManage reports whether a user in role actor may change or remove a user in role target, or
// give a user role target: owners manage everyone, admins everyone but owners ("admin: everything
// but managing owners", issue 16, point 3), the others nobody.
func MayManage(actor, target Role) bool {
	switch actor {
	case Owner:
		return true
	case Admin:
		return target != Owner
	}
	return false
}

// manageable reads the merchant's user id for a change by actor, and checks that actor may manage
// it.
func manageable(ctx context.Context, tx store.Querier, merchantID, id string, actor Role) (User, error) {
	u, err := Get(ctx, tx, id)
	if err != nil {
		return User{}, err
	}
	if u.MerchantID != merchantID {
		return User{}, ErrNotFound // another merchant's user is nobody here
	}
	if !MayManage(actor, u.Role) {
		return User{}, ErrOwnersOnly
	}
	return u, nil
}

// lockOwners keeps the merchant's owners as they are until tx ends, for a change that may take one
// away (a role change, a removal): taken before the user to change is read, it makes such changes of
// one merchant happen one after the other, each reading the user and counting the owners as the one
// before left them. Without it two owners who demote or remove each other (or each themselves) at
// once on PostgreSQL each count two owners, and both changes leave the merchant none. PostgreSQL
// locks the merchant's row (FOR NO KEY UPDATE: rows that refer to the merchant are still written
// meanwhile); SQLite runs one write transaction at a time already.
func lockOwners(ctx context.Context, tx *store.Tx, merchantID string) error {
	if tx.Dialect() != store.Postgres {
		return nil
	}
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, merchantID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// lastOwner reports whether u is its merchant's only owner; its caller holds lockOwners.
func lastOwner(ctx context.Context, tx *store.Tx, u User) (bool, error) {
	if u.Role != Owner {
		return false, nil
	}
	var n int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM users WHERE merchant_id = $1 AND role = 'owner'`, u.MerchantID).Scan(&n)
	return n <= 1, err
}

// SetRole gives the merchant's user id the role, as a user in role actor asks, in the caller's
// transaction. The user's sessions learn the new role within the session poll (Sessions).
func SetRole(ctx context.Context, tx *store.Tx, merchantID, id string, role, actor Role, now time.Time) (User, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return User{}, err
	}
	if !MayManage(actor, role) {
		return User{}, ErrOwnersOnly
	}
	if role != Owner {
		if err := lockOwners(ctx, tx, merchantID); err != nil {
			return User{}, err
		}
	}
	u, err := manageable(ctx, tx, merchantID, id, actor)
	if err != nil {
		return User{}, err
	}
	if role != Owner {
		if last, err := lastOwner(ctx, tx, u); err != nil || last {
			return User{}, cmpErr(err, ErrLastOwner)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE users SET role = $2 WHERE id = $1`, id, string(role)); err != nil {
		return User{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE dashboard_sessions SET changed_at = $2 WHERE user_id = $1 AND ended_at IS NULL`,
		id, now.UnixMilli()); err != nil {
		return User{}, err
	}
	u.Role = role
	return u, nil
}

// Remove deletes the merchant's user id, as a user in role actor asks, in the caller's transaction:
// its sessions end and its links stop working.
func Remove(ctx context.Context, tx *store.Tx, merchantID, id string, actor Role, now time.Time) error {
	if err := lockOwners(ctx, tx, merchantID); err != nil {
		return err
	}
	u, err := manageable(ctx, tx, merchantID, id, actor)
	if err != nil {
		return err
	}
	if last, err := lastOwner(ctx, tx, u); err != nil || last {
		return cmpErr(err, ErrLastOwner)
	}
	if err := EndAll(ctx, tx, id, now); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM user_links WHERE user_id = $1`, id); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM users WHERE id = $1`, id)
	return err
}

// cmpErr is err when there is one, else the refusal.
func cmpErr(err, refusal error) error {
	if err != nil {
		return err
	}
	return refusal
}

// SetPassword makes hash (HashPassword) the user's password, in the caller's transaction. Every session
// of the user ends and every link it still holds stops working: "all of a user's sessions ended when
// the password changes" (issue 16, point 1).
func SetPassword(ctx context.Context, tx store.Querier, id, hash string, now time.Time) error {
	r, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = $2, password_changed_at = $3 WHERE id = $1`, id, hash, now.UnixMilli())
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `UPDATE user_links SET used_at = $2 WHERE user_id = $1 AND used_at IS NULL`, id, now.UnixMilli()); err != nil {
		return err
	}
	return EndAll(ctx, tx, id, now)
}

// EndAll ends every session of the user, in the caller's transaction.
func EndAll(ctx context.Context, tx store.Querier, id string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE dashboard_sessions SET ended_at = $2, changed_at = $2 WHERE user_id = $1 AND ended_at IS NULL`,
		id, now.UnixMilli())
	return err
}

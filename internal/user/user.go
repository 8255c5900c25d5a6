// Package user keeps the people who sign in to the merchant dashboard and the staff they are of. A
// user is a person: one e-mail, one password, one second factor. A membership makes a person staff of
// one merchant in one role; a person may be staff of several merchants, signs in once and chooses
// among them (the dashboard's switcher). A membership made by an invitation waits until the person
// accepts it through the invitation's link, so that no merchant can put itself into another person's
// dashboard unasked.
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
// (docs/design/auth.md, "Staff: people, memberships and roles").
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

// Person is someone who signs in: its id, its e-mail, whether it has a password yet. It never carries
// the password hash.
type Person struct {
	ID          string `json:"user_id"` // 10 lowercase hex characters
	Email       string `json:"email"`
	HasPassword bool   `json:"has_password"` // false until the person sets one through a link
}

// User is a person as staff of one merchant: its membership's merchant and role.
type User struct {
	Person
	MerchantID string `json:"merchant_id"`
	Role       Role   `json:"role"`
	// Pending: the membership waits for the person to accept its invitation; it opens nothing.
	Pending   bool      `json:"pending"`
	CreatedAt time.Time `json:"-"`
	Created   int64     `json:"created_at"` // epoch milliseconds, as the other CLI commands print times
}

// New describes a membership to make, and the person when it is new.
type New struct {
	MerchantID string
	Email      string
	Role       Role
	// Hash is the password's hash (HashPassword) of a new person, optional: without one the person
	// sets a password through a link. A person who exists keeps its own password: a hash given for
	// one is refused.
	Hash string
	// Invited: the membership waits for the person to accept it through an invitation's link, else it
	// is accepted at once (made by the operator).
	Invited bool
}

// Errors callers branch on.
var (
	ErrNotFound = errors.New("user: not found")
	// ErrNoMerchant: the person is staff of no merchant it has accepted.
	ErrNoMerchant = fault.New(http.StatusForbidden, "no_merchant", "you are not on the staff of any merchant: open the invitation you were e-mailed")
	// ErrLastOwner refuses to remove or demote a merchant's last owner.
	ErrLastOwner = fault.Conflict("last_owner", "a merchant keeps at least one owner: make another user owner first")
	// ErrOwnersOnly refuses an admin's change to an owner, or an admin's grant of the owner role.
	ErrOwnersOnly = fault.New(http.StatusForbidden, "owners_only", "only an owner can manage owners")
	// ErrAlreadyStaff refuses a second membership of one person at one merchant.
	ErrAlreadyStaff = fault.Conflict("already_staff", "this person is already on the merchant's staff")
	// ErrBusy refuses a password change while too many passwords are being hashed (password.ErrBusy).
	ErrBusy = fault.New(http.StatusTooManyRequests, "busy", "Kassa is busy checking other passwords: try again in a moment")
	// ErrPersonHasPassword refuses a password for a person who exists: it keeps its own.
	ErrPersonHasPassword = fault.Conflict("email_taken", "a person with this e-mail already signs in to Kassa, with a password of its own")
)

// memberColumns read a User from memberships m joined to users u.
const memberColumns = `u.id, u.email, u.password_hash IS NOT NULL, m.merchant_id, m.role, m.accepted_at IS NULL, m.created_at`

func scan(row interface{ Scan(...any) error }) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Email, &u.HasPassword, &u.MerchantID, &u.Role, &u.Pending, &u.Created)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrNotFound
	}
	u.CreatedAt = time.UnixMilli(u.Created)
	return u, err
}

// Create makes n's membership in the caller's transaction, and the person when no one signs in with
// its e-mail. The merchant must exist; a person already on its staff is ErrAlreadyStaff.
func Create(ctx context.Context, tx store.Querier, n New, now time.Time) (User, error) {
	p, err := ByEmail(ctx, tx, n.Email)
	switch {
	case errors.Is(err, ErrNotFound):
		var id string
		if id, err = newID(ctx, tx); err != nil {
			return User{}, err
		}
		return insert(ctx, tx, id, n, now)
	case err != nil:
		return User{}, err
	case n.Hash != "":
		return User{}, ErrPersonHasPassword
	}
	return join(ctx, tx, p, n, now)
}

// CreateMerchant creates a merchant and its first owner (CreateOwner) in the caller's transaction.
// hash is the owner's password (HashPassword), or "" for the owner to set one through a link.
func CreateMerchant(ctx context.Context, tx store.Querier, n merchant.New, hash string, now time.Time) (merchant.Merchant, User, error) {
	m, err := merchant.Create(ctx, tx, n, now)
	if err != nil {
		return merchant.Merchant{}, User{}, err
	}
	u, err := CreateOwner(ctx, tx, m, hash, now)
	return m, u, err
}

// CreateOwner makes the person who signs in with the merchant's e-mail its first owner, accepted.
// A new person takes the merchant's id as its user id (as the migration that introduced users did for
// the merchants before it). hash is the new person's password (HashPassword), or "" for none yet.
func CreateOwner(ctx context.Context, tx store.Querier, m merchant.Merchant, hash string, now time.Time) (User, error) {
	n := New{MerchantID: m.ID, Email: m.Email, Role: Owner, Hash: hash}
	p, err := ByEmail(ctx, tx, m.Email)
	switch {
	case errors.Is(err, ErrNotFound):
		return insert(ctx, tx, m.ID, n, now)
	case err != nil:
		return User{}, err
	case hash != "":
		return User{}, ErrPersonHasPassword
	}
	return join(ctx, tx, p, n, now)
}

// insert stores a new person under id and its membership n.
func insert(ctx context.Context, tx store.Querier, id string, n New, now time.Time) (User, error) {
	email := strings.TrimSpace(n.Email)
	if err := merchant.ValidateEmail(email); err != nil {
		return User{}, fault.Invalid("email", "email %s", err)
	}
	if _, err := ParseRole(string(n.Role)); err != nil {
		return User{}, err
	}
	hash := sql.NullString{String: n.Hash, Valid: n.Hash != ""}
	_, err := tx.ExecContext(ctx, `INSERT INTO users (id, email, email_key, password_hash, created_at, password_changed_at, last_merchant_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, email, merchant.EmailKey(email), hash, now.UnixMilli(),
		sql.NullInt64{Int64: now.UnixMilli(), Valid: hash.Valid}, n.MerchantID)
	if store.IsUniqueViolation(err) {
		return User{}, fault.Conflict("email_taken", "a user with email %s already exists", email)
	}
	if err != nil {
		return User{}, err
	}
	return join(ctx, tx, Person{ID: id, Email: email, HasPassword: hash.Valid}, n, now)
}

// join makes p staff of n's merchant in n's role.
func join(ctx context.Context, tx store.Querier, p Person, n New, now time.Time) (User, error) {
	if _, err := ParseRole(string(n.Role)); err != nil {
		return User{}, err
	}
	if _, err := merchant.Get(ctx, tx, n.MerchantID); err != nil {
		return User{}, err
	}
	u := User{Person: p, MerchantID: n.MerchantID, Role: n.Role, Pending: n.Invited, CreatedAt: now, Created: now.UnixMilli()}
	_, err := tx.ExecContext(ctx, `INSERT INTO memberships (user_id, merchant_id, role, created_at, accepted_at) VALUES ($1, $2, $3, $4, $5)`,
		p.ID, n.MerchantID, string(n.Role), u.Created, sql.NullInt64{Int64: u.Created, Valid: !n.Invited})
	if store.IsUniqueViolation(err) {
		return User{}, ErrAlreadyStaff
	}
	if err == nil && !n.Invited {
		err = changed(ctx, tx, p.ID, now)
	}
	return u, err
}

// HashPassword hashes a new password within g's bound, before the transaction that stores it (an
// argon2id hash takes a fifth of a second, which a transaction should not wait for); the error names
// the field "password", or is ErrBusy. The new password of a signed-in user, or of the holder of a
// link, waits in the gate's trusted queue.
func HashPassword(ctx context.Context, g *password.Gate, pw string) (string, error) {
	h, err := g.Hash(ctx, pw, true)
	switch {
	case errors.Is(err, password.ErrBusy):
		return "", ErrBusy
	case errors.Is(err, password.ErrTooShort), errors.Is(err, password.ErrTooLong):
		return "", fault.Invalid("password", "%s", strings.TrimPrefix(err.Error(), "password: "))
	}
	return h, err
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

// Get reads user id as staff of the merchant, its membership accepted: another merchant's user, or
// one whose invitation waits, is ErrNotFound.
func Get(ctx context.Context, q store.Querier, merchantID, id string) (User, error) {
	u, err := Staff(ctx, q, merchantID, id)
	if err == nil && u.Pending {
		return User{}, ErrNotFound
	}
	return u, err
}

// Staff reads user id as staff of the merchant, its invitation accepted or waiting.
func Staff(ctx context.Context, q store.Querier, merchantID, id string) (User, error) {
	return scan(q.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.merchant_id = $1 AND m.user_id = $2`, merchantID, id))
}

// GetPerson reads the person id.
func GetPerson(ctx context.Context, q store.Querier, id string) (Person, error) {
	return scanPerson(q.QueryRowContext(ctx, `SELECT id, email, password_hash IS NOT NULL FROM users WHERE id = $1`, id))
}

// ByEmail reads the person who signs in with email (compared without regard to case).
func ByEmail(ctx context.Context, q store.Querier, email string) (Person, error) {
	if !httpapi.Storable(email) {
		return Person{}, ErrNotFound // nobody signs in so, and PostgreSQL would refuse to look
	}
	return scanPerson(q.QueryRowContext(ctx, `SELECT id, email, password_hash IS NOT NULL FROM users WHERE email_key = $1`,
		merchant.EmailKey(strings.TrimSpace(email))))
}

func scanPerson(row *sql.Row) (Person, error) {
	var p Person
	err := row.Scan(&p.ID, &p.Email, &p.HasPassword)
	if errors.Is(err, sql.ErrNoRows) {
		return Person{}, ErrNotFound
	}
	return p, err
}

// Credentials are what a sign-in checks a password against: Hash is "" while the person has none.
type Credentials struct {
	Person
	Hash string
}

// CredentialsByEmail reads the person who signs in with email and the password hash.
func CredentialsByEmail(ctx context.Context, q store.Querier, email string) (Credentials, error) {
	if !httpapi.Storable(email) {
		return Credentials{}, ErrNotFound
	}
	var c Credentials
	var hash sql.NullString
	err := q.QueryRowContext(ctx, `SELECT id, email, password_hash FROM users WHERE email_key = $1`,
		merchant.EmailKey(strings.TrimSpace(email))).Scan(&c.ID, &c.Email, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return Credentials{}, ErrNotFound
	}
	c.Hash, c.HasPassword = hash.String, hash.Valid
	return c, err
}

// Memberships returns the accepted memberships of person id, by the merchant's name.
func Memberships(ctx context.Context, q store.Querier, id string) ([]Membership, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+memberColumns+`, mc.name FROM memberships m JOIN users u ON u.id = m.user_id
		JOIN merchants mc ON mc.id = m.merchant_id WHERE m.user_id = $1 AND m.accepted_at IS NOT NULL ORDER BY mc.name, m.merchant_id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Membership
	for rows.Next() {
		var ms Membership
		err := rows.Scan(&ms.ID, &ms.Email, &ms.HasPassword, &ms.MerchantID, &ms.Role, &ms.Pending, &ms.Created, &ms.Merchant)
		if err != nil {
			return nil, err
		}
		ms.CreatedAt = time.UnixMilli(ms.Created)
		out = append(out, ms)
	}
	return out, rows.Err()
}

// Membership is a person's place on a merchant's staff, with the merchant's name.
type Membership struct {
	User
	Merchant string
}

// Home returns the membership person id signs in to: the merchant it last chose or joined, while it
// is still on its staff, else its first by name; ErrNoMerchant when it has none.
func Home(ctx context.Context, q store.Querier, id string) (User, error) {
	var last sql.NullString
	if err := q.QueryRowContext(ctx, `SELECT last_merchant_id FROM users WHERE id = $1`, id).Scan(&last); errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrNotFound
	} else if err != nil {
		return User{}, err
	}
	if last.Valid {
		if u, err := Get(ctx, q, last.String, id); err == nil || !errors.Is(err, ErrNotFound) {
			return u, err
		}
	}
	all, err := Memberships(ctx, q, id)
	if err != nil || len(all) == 0 {
		return User{}, cmpErr(err, ErrNoMerchant)
	}
	return all[0].User, nil
}

// Choose makes the merchant the one person id signs in to next (Home), in the caller's transaction;
// the person must be on its staff.
func Choose(ctx context.Context, tx store.Querier, merchantID, id string) (User, error) {
	u, err := Get(ctx, tx, merchantID, id)
	if err != nil {
		return User{}, err
	}
	_, err = tx.ExecContext(ctx, `UPDATE users SET last_merchant_id = $1 WHERE id = $2`, merchantID, id)
	return u, err
}

// List returns a merchant's staff, waiting invitations included, owners first, then by e-mail.
func List(ctx context.Context, q store.Querier, merchantID string) ([]User, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+memberColumns+` FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.merchant_id = $1
		ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'reporting' THEN 2 ELSE 3 END, u.email_key`, merchantID)
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
// give a user role target: owners manage everyone, admins everyone but owners (an admin may do
// everything but manage owners), the others nobody.
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
// it; a waiting invitation is managed as its role.
func manageable(ctx context.Context, tx store.Querier, merchantID, id string, actor Role) (User, error) {
	u, err := Staff(ctx, tx, merchantID, id)
	if err != nil {
		return User{}, err // another merchant's user is nobody here
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

// lastOwner reports whether u is its merchant's only owner; its caller holds lockOwners. An owner
// whose invitation waits is no owner yet.
func lastOwner(ctx context.Context, tx *store.Tx, u User) (bool, error) {
	if u.Role != Owner || u.Pending {
		return false, nil
	}
	var n int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM memberships WHERE merchant_id = $1 AND role = 'owner' AND accepted_at IS NOT NULL`,
		u.MerchantID).Scan(&n)
	return n <= 1, err
}

// SetRole gives the merchant's user id the role, as a user in role actor asks, in the caller's
// transaction. The user's sessions at the merchant learn the new role within the session poll
// (Sessions).
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
	if _, err := tx.ExecContext(ctx, `UPDATE memberships SET role = $3 WHERE user_id = $1 AND merchant_id = $2`, id, merchantID, string(role)); err != nil {
		return User{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE dashboard_sessions SET changed_at = $3 WHERE user_id = $1 AND merchant_id = $2 AND ended_at IS NULL`,
		id, merchantID, now.UnixMilli()); err != nil {
		return User{}, err
	}
	u.Role = role
	return u, nil
}

// Remove takes user id off the merchant's staff, as a user in role actor asks, in the caller's
// transaction: its sessions at the merchant end and its invitation to it stops working. A person left
// on no merchant's staff is deleted, with its links.
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
	if _, err := tx.ExecContext(ctx, `UPDATE dashboard_sessions SET ended_at = $3, changed_at = $3 WHERE user_id = $1 AND merchant_id = $2
		AND ended_at IS NULL`, id, merchantID, now.UnixMilli()); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM user_links WHERE user_id = $1 AND merchant_id = $2`, id, merchantID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM memberships WHERE user_id = $1 AND merchant_id = $2`, id, merchantID); err != nil {
		return err
	}
	if err := changed(ctx, tx, id, now); err != nil {
		return err
	}
	var left int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM memberships WHERE user_id = $1`, id).Scan(&left); err != nil || left > 0 {
		return err
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

// SetPassword makes hash (HashPassword) the person's password, in the caller's transaction. Every
// session of the person ends and every reset link it still holds stops working. Its invitations stay:
// for a person with a password they only accept a membership.
func SetPassword(ctx context.Context, tx store.Querier, id, hash string, now time.Time) error {
	r, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = $2, password_changed_at = $3 WHERE id = $1`, id, hash, now.UnixMilli())
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `UPDATE user_links SET used_at = $2 WHERE user_id = $1 AND kind = 'reset' AND used_at IS NULL`,
		id, now.UnixMilli()); err != nil {
		return err
	}
	return EndAll(ctx, tx, id, now)
}

// changed marks every live session of person id changed, in the caller's transaction, so that every
// node reads them again within the session poll: the merchants whose staff it is have changed.
func changed(ctx context.Context, tx store.Querier, id string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE dashboard_sessions SET changed_at = $2 WHERE user_id = $1 AND ended_at IS NULL`, id, now.UnixMilli())
	return err
}

// EndAll ends every session of the person, at every merchant, in the caller's transaction.
func EndAll(ctx context.Context, tx store.Querier, id string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE dashboard_sessions SET ended_at = $2, changed_at = $2 WHERE user_id = $1 AND ended_at IS NULL`,
		id, now.UnixMilli())
	return err
}

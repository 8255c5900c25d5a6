package auth

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// ErrBadCredentials is the one answer to a wrong e-mail, a wrong password, a user without a password
// yet, or a user whose role may not sign in where it tried, so that a sign-in tells nobody which
// e-mails exist or what they may do.
var ErrBadCredentials = errors.New("auth: wrong e-mail or password")

// Attempt is a sign-in on the sign-in page.
type Attempt struct {
	Email, Password string
	// Addr is the client's address (httpapi.ClientAddr).
	Addr netip.Addr
	// Device is the value of the device cookie the browser sent (NewDeviceCookie), "" when none.
	Device string
	// Roles are the roles that may sign in here; nil allows every role. A person in none of them at
	// any merchant whose staff it is fails as a wrong password would.
	Roles []user.Role
}

// Account is who signed in: a person on the staff of one or more merchants (user.Memberships).
type Account struct {
	UserID string
}

// account is who an e-mail names, and its password hash; id and hash are "" when nobody can sign in
// with it where it tries.
type account struct {
	Account
	id, hash string
}

// plan is how an attempt is counted and checked.
type plan struct {
	buckets []bucket
	trusted bool   // the attempt waits in the gate's trusted queue (password.Gate)
	place   []byte // the usual place a success on the sign-in page records
}

// SignIn checks a staff user's e-mail and password on a sign-in page (the authorization pages', the
// dashboard's) and returns who signed in. The attempt is counted before the password is checked —
// against its device cookie when the cookie is the user's, else against the user and address when
// the user signed in from that address lately, else against the account and the address — and a full
// bucket is a ThrottledError with nothing checked. Every attempt that is checked costs one argon2id
// verification, against a dummy hash when the e-mail is unknown or its role is not among a.Roles.
func (s *Service) SignIn(ctx context.Context, a Attempt) (Account, error) {
	now := s.now()
	addr := addrKey(a.Addr)
	var acct account
	var p plan
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		if acct, err = lookupAccount(ctx, q, a.Email, a.Roles, ""); err != nil {
			return err
		}
		if acct.id == "" {
			return nil
		}
		p.place = s.subjectKey("place", acct.id, addr)
		if d, ok := s.openPass(deviceAAD, a.Device); ok && d.UserID == acct.id {
			p.buckets, p.trusted = []bucket{{s.subjectKey("device", string(d.ID[:])), TrustedAttemptLimit}}, true
			return nil
		}
		p.trusted, err = isUsualPlace(ctx, q, p.place, now)
		if p.trusted {
			p.buckets = []bucket{{p.place, TrustedAttemptLimit}}
		}
		return err
	})
	if err != nil {
		return Account{}, err
	}
	if !p.trusted {
		// Always in this order, so that concurrent reservations take the rows' locks in one order.
		p.buckets = []bucket{s.accountBucket(a.Email), {s.subjectKey("addr", addr), AddressAttemptLimit}}
	}
	return s.check(ctx, acct, a.Password, p)
}

// CheckPassword checks the password of a signed-in staff user who must give it again (to change it),
// as an untrusted sign-in is checked: counted in the bucket of the user's account before it is
// verified, within the process's bound on password hashing. A session taken over therefore guesses
// the password no faster than a stranger on the sign-in page, and its guesses never lock the user out
// of its own browser or usual places, which count apart. A wrong password is ErrBadCredentials, a
// full bucket or a busy gate a ThrottledError.
func (s *Service) CheckPassword(ctx context.Context, email, pw string) error {
	var acct account
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		acct, err = lookupAccount(ctx, q, email, nil, "")
		return err
	})
	if err != nil {
		return err
	}
	_, err = s.check(ctx, acct, pw, plan{buckets: []bucket{s.accountBucket(email)}})
	return err
}

// accountBucket counts the untrusted attempts at the account that signs in with email.
func (s *Service) accountBucket(email string) bucket {
	return bucket{s.subjectKey("account", strings.ToLower(strings.TrimSpace(email))), AccountAttemptLimit}
}

// Passwords is the gate within which every password of this server is hashed and verified.
func (s *Service) Passwords() *password.Gate { return s.gate }

// signInClient checks the e-mail and password of a password grant made with client c, which signs in
// only an owner or admin of its own merchant (user.Approvers): a correct password of a person who is
// not, there, fails as a wrong one. The attempt is counted against the client alone, so that failures
// on the sign-in page never stop the merchant's own integration.
func (s *Service) signInClient(ctx context.Context, c client, email, pw string) (Account, error) {
	var acct account
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		acct, err = lookupAccount(ctx, q, email, user.Approvers, c.merchantID)
		return err
	})
	if err != nil {
		return Account{}, err
	}
	return s.check(ctx, acct, pw, plan{buckets: []bucket{{s.subjectKey("client", c.idString()), ClientAttemptLimit}}, trusted: true})
}

// lookupAccount reads who signs in with email, when it is on a merchant's staff (merchantID's, when
// not "") in one of roles (any, when roles is nil).
func lookupAccount(ctx context.Context, q store.Querier, email string, roles []user.Role, merchantID string) (account, error) {
	c, err := user.CredentialsByEmail(ctx, q, email)
	switch {
	case errors.Is(err, user.ErrNotFound), err == nil && c.Hash == "":
		return account{}, nil
	case err != nil:
		return account{}, err
	}
	if roles != nil {
		all, err := user.Memberships(ctx, q, c.ID)
		if err != nil {
			return account{}, err
		}
		if !slices.ContainsFunc(all, func(m user.Membership) bool {
			return slices.Contains(roles, m.Role) && (merchantID == "" || m.MerchantID == merchantID)
		}) {
			return account{}, nil
		}
	}
	return account{Account: Account{UserID: c.ID}, id: c.ID, hash: c.Hash}, nil
}

// check reserves the attempt in p's buckets, then verifies pw within the process's bound on password
// hashing. An attempt whose password was right, or was not checked, is given back.
func (s *Service) check(ctx context.Context, acct account, pw string, p plan) (Account, error) {
	now := s.now()
	res, err := s.reserve(ctx, p.buckets, now)
	if err != nil {
		return Account{}, err
	}
	ok, err := s.gate.Verify(ctx, acct.hash, pw, p.trusted)
	if err != nil {
		if rerr := s.release(ctx, res, nil, now); rerr != nil {
			return Account{}, rerr
		}
		if errors.Is(err, password.ErrBusy) {
			return Account{}, &ThrottledError{Until: s.now().Add(BusyRetry), Busy: true}
		}
		return Account{}, err
	}
	if !ok || acct.id == "" {
		return Account{}, ErrBadCredentials
	}
	return acct.Account, s.release(ctx, res, p.place, now)
}

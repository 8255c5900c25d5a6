package auth

import (
	"context"
	"errors"
	"net/netip"
	"strings"

	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
)

// ErrBadCredentials is the one answer to a wrong e-mail, a wrong password, or a merchant without a
// dashboard password, so that a sign-in tells nobody which e-mails exist.
var ErrBadCredentials = errors.New("auth: wrong e-mail or password")

// Attempt is a sign-in on the sign-in page.
type Attempt struct {
	Email, Password string
	// Addr is the client's address (httpapi.ClientAddr).
	Addr netip.Addr
	// Device is the value of the device cookie the browser sent (NewDeviceCookie), "" when none.
	Device string
}

// account is who an e-mail names: the merchant and its password hash, both "" when nobody can sign
// in with it.
type account struct{ id, hash string }

// plan is how an attempt is counted and checked.
type plan struct {
	buckets []bucket
	trusted bool   // the attempt waits in the gate's trusted queue (password.Gate)
	place   []byte // the usual place a success on the sign-in page records
}

// SignIn checks a merchant's dashboard e-mail and password on the sign-in page and returns the
// merchant id. The attempt is counted before the password is checked — against its device cookie
// when the cookie is the account's, else against the merchant and address when the merchant signed
// in from that address lately, else against the account and the address — and a full bucket is a
// ThrottledError with nothing checked. Every attempt that is checked costs one argon2id verification,
// against a dummy hash when the e-mail is unknown.
func (s *Service) SignIn(ctx context.Context, a Attempt) (string, error) {
	now := s.now()
	addr := addrKey(a.Addr)
	var acct account
	var p plan
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		if acct, err = lookupAccount(ctx, q, a.Email); err != nil {
			return err
		}
		if acct.id == "" {
			return nil
		}
		p.place = s.subjectKey("place", acct.id, addr)
		if d, ok := s.openPass(deviceAAD, a.Device); ok && d.MerchantID == acct.id {
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
		return "", err
	}
	if !p.trusted {
		// Always in this order, so that concurrent reservations take the rows' locks in one order.
		p.buckets = []bucket{{s.subjectKey("account", strings.ToLower(strings.TrimSpace(a.Email))), AccountAttemptLimit},
			{s.subjectKey("addr", addr), AddressAttemptLimit}}
	}
	return s.check(ctx, acct, a.Password, p)
}

// signInClient checks the e-mail and password of a password grant made with client c, which signs in
// only its own merchant: a correct password of another merchant fails as a wrong one. The attempt is
// counted against the client alone, so that failures on the sign-in page never stop the merchant's
// own integration.
func (s *Service) signInClient(ctx context.Context, c client, email, pw string) (string, error) {
	var acct account
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		acct, err = lookupAccount(ctx, q, email)
		return err
	})
	if err != nil {
		return "", err
	}
	if acct.id != c.merchantID {
		acct = account{}
	}
	return s.check(ctx, acct, pw, plan{buckets: []bucket{{s.subjectKey("client", c.idString()), ClientAttemptLimit}}, trusted: true})
}

// lookupAccount reads who signs in with email.
func lookupAccount(ctx context.Context, q store.Querier, email string) (account, error) {
	if !httpapi.Storable(email) {
		return account{}, nil // no one signs in so, and PostgreSQL would refuse to look: an unknown e-mail
	}
	id, hash, err := merchant.PasswordHash(ctx, q, email)
	switch {
	case errors.Is(err, merchant.ErrNotFound), err == nil && hash == "":
		return account{}, nil
	case err != nil:
		return account{}, err
	}
	return account{id: id, hash: hash}, nil
}

// check reserves the attempt in p's buckets, then verifies pw within the process's bound on password
// hashing. An attempt whose password was right, or was not checked, is given back.
func (s *Service) check(ctx context.Context, acct account, pw string, p plan) (string, error) {
	now := s.now()
	res, err := s.reserve(ctx, p.buckets, now)
	if err != nil {
		return "", err
	}
	ok, err := s.gate.Verify(ctx, acct.hash, pw, p.trusted)
	if err != nil {
		if rerr := s.release(ctx, res, nil, now); rerr != nil {
			return "", rerr
		}
		if errors.Is(err, password.ErrBusy) {
			return "", &ThrottledError{Until: s.now().Add(BusyRetry), Busy: true}
		}
		return "", err
	}
	if !ok || acct.id == "" {
		return "", ErrBadCredentials
	}
	return acct.id, s.release(ctx, res, p.place, now)
}

package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
)

// Sign-in throttling, for the password grant and the sign-in page alike: "5 failures lock that
// account for 15 minutes" (issue 8); a client address is locked after more failures, since many
// people may share one address. Failures count within a window that starts at the first of them.
const (
	AccountFailureLimit = 5
	AddressFailureLimit = 20
	FailureWindow       = 15 * time.Minute
	Lockout             = 15 * time.Minute
)

// ErrBadCredentials is the one answer to a wrong e-mail, a wrong password, or a merchant without a
// dashboard password, so that a sign-in tells nobody which e-mails exist.
var ErrBadCredentials = errors.New("auth: wrong e-mail or password")

// ThrottledError is returned while the account or the client address is locked.
type ThrottledError struct{ Until time.Time }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("auth: too many failed sign-ins; locked until %s", e.Until.UTC().Format(time.RFC3339))
}

// SignIn checks a merchant's dashboard e-mail and password and returns the merchant id. addr is the
// client's address. With onlyMerchant set, a correct password of any other merchant fails like a
// wrong one (the password grant: a merchant's client signs in only its own merchant).
//
// Every attempt costs one argon2id verification, against a dummy hash when the e-mail is unknown.
// While the account or the address is locked, the answer is a ThrottledError whatever the password.
func (s *Service) SignIn(ctx context.Context, email, pw, addr, onlyMerchant string) (string, error) {
	now := s.now()
	subjects := []string{"account:" + strings.ToLower(strings.TrimSpace(email)), "addr:" + addr}
	var lockedUntil int64
	var id, hash string
	err := s.db.Read(ctx, func(q store.Querier) error {
		if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(locked_until), 0) FROM sign_in_failures
			WHERE subject IN ($1, $2) AND locked_until > $3`, subjects[0], subjects[1], now.UnixMilli()).Scan(&lockedUntil); err != nil {
			return err
		}
		var err error
		id, hash, err = merchant.PasswordHash(ctx, q, email)
		if errors.Is(err, merchant.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", err
	}
	if lockedUntil > 0 {
		return "", &ThrottledError{Until: time.UnixMilli(lockedUntil)}
	}
	check := hash
	if check == "" {
		check = password.Dummy()
	}
	ok, _ := password.Verify(check, pw)
	if !ok || hash == "" || (onlyMerchant != "" && id != onlyMerchant) {
		if err := s.recordFailure(ctx, subjects, now); err != nil {
			return "", err
		}
		return "", ErrBadCredentials
	}
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sign_in_failures WHERE subject = $1`, subjects[0])
		return err
	})
	return id, err
}

// recordFailure counts a failed sign-in against the account and the address, and locks either when
// it reaches its limit.
func (s *Service) recordFailure(ctx context.Context, subjects []string, now time.Time) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		for i, subject := range subjects {
			limit := map[int]int{0: AccountFailureLimit, 1: AddressFailureLimit}[i]
			var failures int
			err := tx.QueryRowContext(ctx, `INSERT INTO sign_in_failures (subject, failures, window_start) VALUES ($1, 1, $2)
				ON CONFLICT (subject) DO UPDATE SET
					failures = CASE WHEN sign_in_failures.window_start <= $3 THEN 1 ELSE sign_in_failures.failures + 1 END,
					window_start = CASE WHEN sign_in_failures.window_start <= $3 THEN $2 ELSE sign_in_failures.window_start END
				RETURNING failures`, subject, now.UnixMilli(), now.Add(-FailureWindow).UnixMilli()).Scan(&failures)
			if err != nil {
				return err
			}
			if failures >= limit {
				if _, err := tx.ExecContext(ctx, `UPDATE sign_in_failures SET failures = 0, window_start = $2, locked_until = $3
					WHERE subject = $1`, subject, now.UnixMilli(), now.Add(Lockout).UnixMilli()); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

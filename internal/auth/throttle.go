package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// Sign-in throttling (RFC 6749 §4.3.2: the password grant "MUST protect the endpoint against brute
// force attacks"), on the sign-in page and the password grant alike. Every attempt is counted before
// its password is checked, within a window that starts at the first attempt, in buckets that depend
// on how much the attempt is trusted (docs/design/auth.md, "Sign-in throttling"):
//
//   - untrusted (the sign-in page, without a device cookie of the account and not from one of its
//     usual addresses): per account and per client address;
//   - a device cookie of the account: per device cookie;
//   - an address from which the merchant signed in lately: per (merchant, address);
//   - the password grant, authenticated by the merchant's client credentials: per client.
//
// A correct password gives its attempt back, so a bucket counts failures and the attempts still
// being checked: never more verifications than its limit in a window.
const (
	AccountAttemptLimit = 5
	AddressAttemptLimit = 20
	TrustedAttemptLimit = 10
	ClientAttemptLimit  = 5
	ThrottleWindow      = 15 * time.Minute
	// UsualPlaceTTL is how long an address stays one of a merchant's usual places after the
	// merchant's last sign-in from it.
	UsualPlaceTTL = 30 * 24 * time.Hour
	// BusyRetry is the Retry-After of an attempt refused because too many passwords were being
	// checked.
	BusyRetry = time.Second
)

// throttleSecret names the server secret under which subjects are MACed.
const throttleSecret = "sign-in throttle"

// ThrottledError is returned, with no password checked, while one of the attempt's buckets is full
// (until its window ends), or when too many passwords are being checked at once (Busy).
type ThrottledError struct {
	Until time.Time
	Busy  bool
}

func (e *ThrottledError) Error() string {
	if e.Busy {
		return "auth: too many sign-ins being checked"
	}
	return fmt.Sprintf("auth: too many failed sign-ins; refused until %s", e.Until.UTC().Format(time.RFC3339))
}

// bucket is one count an attempt is reserved in.
type bucket struct {
	subject []byte // subjectKey of what it counts
	limit   int
}

// reservation is an attempt counted in its buckets, and the windows it was counted in.
type reservation struct {
	subjects [][]byte
	windows  []int64
}

// subjectKey is the stored name of a bucket or a usual place: a MAC of its kind and parts under a
// server secret, so that the tables hold no e-mail, no address and no history of where a merchant
// signs in from.
func (s *Service) subjectKey(kind string, parts ...string) []byte {
	m := hmac.New(sha256.New, s.throttleKey)
	m.Write([]byte(kind))
	for _, p := range parts {
		m.Write([]byte{0})
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// addrKey is the part of a client address that throttling counts: the address for IPv4, its /64 for
// IPv6, since one IPv6 client commonly holds a whole /64 (RFC 6177, RFC 7421).
func addrKey(a netip.Addr) string {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// reserve counts one attempt in every bucket, all or none: when a bucket is full the transaction is
// rolled back and the answer is a ThrottledError until that bucket's window ends. Each count is one
// conditional upsert: PostgreSQL re-evaluates its condition under the row lock, so concurrent
// attempts on any number of nodes never count past the limit; SQLite has one writer.
func (s *Service) reserve(ctx context.Context, buckets []bucket, now time.Time) (reservation, error) {
	var res reservation
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		res = reservation{}
		for _, b := range buckets {
			var start int64
			err := tx.QueryRowContext(ctx, `INSERT INTO sign_in_attempts (subject, attempts, window_start) VALUES ($1, 1, $2)
				ON CONFLICT (subject) DO UPDATE SET
					attempts = CASE WHEN sign_in_attempts.window_start <= $3 THEN 1 ELSE sign_in_attempts.attempts + 1 END,
					window_start = CASE WHEN sign_in_attempts.window_start <= $3 THEN $2 ELSE sign_in_attempts.window_start END
				WHERE sign_in_attempts.window_start <= $3 OR sign_in_attempts.attempts < $4
				RETURNING window_start`, b.subject, now.UnixMilli(), now.Add(-ThrottleWindow).UnixMilli(), b.limit).Scan(&start)
			if errors.Is(err, sql.ErrNoRows) {
				if err := tx.QueryRowContext(ctx, `SELECT window_start FROM sign_in_attempts WHERE subject = $1`, b.subject).Scan(&start); err != nil {
					return err
				}
				return &ThrottledError{Until: time.UnixMilli(start).Add(ThrottleWindow)}
			}
			if err != nil {
				return err
			}
			res.subjects = append(res.subjects, b.subject)
			res.windows = append(res.windows, start)
		}
		return nil
	})
	return res, err
}

// release gives a reservation back — its password was right, or was not checked — and, when place
// is set, records it as one of the merchant's usual places.
func (s *Service) release(ctx context.Context, res reservation, place []byte, now time.Time) error {
	ctx = context.WithoutCancel(ctx) // a client that has gone away still gets its attempt back
	return s.db.Write(ctx, func(tx *store.Tx) error {
		for i, subject := range res.subjects {
			if _, err := tx.ExecContext(ctx, `UPDATE sign_in_attempts SET attempts = attempts - 1
				WHERE subject = $1 AND window_start = $2 AND attempts > 0`, subject, res.windows[i]); err != nil {
				return err
			}
		}
		if place == nil {
			return nil
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sign_in_places (place, last_success) VALUES ($1, $2)
			ON CONFLICT (place) DO UPDATE SET last_success = excluded.last_success`, place, now.UnixMilli())
		return err
	})
}

// isUsualPlace reports whether the merchant signed in from place within UsualPlaceTTL.
func isUsualPlace(ctx context.Context, q store.Querier, place []byte, now time.Time) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM sign_in_places WHERE place = $1 AND last_success > $2`,
		place, now.Add(-UsualPlaceTTL).UnixMilli()).Scan(&n)
	return n > 0, err
}

// PurgeSignIns deletes the counts whose window has ended and the places not used within
// UsualPlaceTTL.
func (s *Service) PurgeSignIns(ctx context.Context) error {
	now := s.now()
	return s.db.Write(ctx, func(tx *store.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sign_in_attempts WHERE window_start <= $1`, now.Add(-ThrottleWindow).UnixMilli()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM sign_in_places WHERE last_success <= $1`, now.Add(-UsualPlaceTTL).UnixMilli())
		return err
	})
}

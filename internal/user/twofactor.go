package user

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/qrcode"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/totp"
)

// Two-factor authentication: TOTP (RFC 6238, SHA-1, 6 digits, 30 s, ±1 step, each code used once)
// with enrolment by QR code and a manual key, ten single-use recovery codes (stored hashed), and a
// merchant-wide setting "require 2FA for all staff".
const (
	// EnrolmentTTL is how long an offered secret waits for the user's first code.
	EnrolmentTTL = 15 * time.Minute
	// RecoveryCodeCount is how many recovery codes a user gets at a time.
	RecoveryCodeCount = 10
	// PendingTTL is how long a user who gave the right password has to give the second factor.
	PendingTTL = 5 * time.Minute
	// MaxCodeFailures wrong codes in a row refuse the user's codes for CodeLockout: with one step
	// either side, three codes in a million pass, so a guesser who knows the password gets five
	// guesses a quarter of an hour.
	MaxCodeFailures = 5
	CodeLockout     = 15 * time.Minute
	// issuer names Kassa in the user's authenticator app.
	issuer = "Kassa"
)

// Two-factor errors; each names the form field it concerns.
var (
	// ErrBadCode: the code is wrong, was used already, or is for a time too far from now.
	ErrBadCode = fault.Invalid("code", "the code is not right: type the code your authenticator app shows now, or a recovery code")
	// ErrEnrolmentExpired: the offered secret is not this user's or is older than EnrolmentTTL.
	ErrEnrolmentExpired = fault.Invalid("enrolment", "this setup has expired: start again")
	// ErrCodesLocked refuses every code of a user after MaxCodeFailures wrong ones, for CodeLockout.
	ErrCodesLocked = fault.New(http.StatusTooManyRequests, "too_many_codes", "too many wrong codes: wait a quarter of an hour and sign in again")
	// ErrTwoFactorRequired refuses to turn two-factor authentication off where the merchant requires it.
	ErrTwoFactorRequired = fault.Conflict("two_factor_required", "your merchant requires two-factor authentication for all staff")
	// ErrAlreadyEnabled refuses to set up a second factor over one in place: replacing a factor is
	// Replace, which takes a code of the current one.
	ErrAlreadyEnabled = fault.Conflict("two_factor_enabled", "two-factor authentication is already on: replacing it takes a code from your current app")
	// ErrNotEnabled refuses to replace a second factor that is not there.
	ErrNotEnabled = fault.Conflict("two_factor_off", "two-factor authentication is off: set it up first")
)

var (
	secretAAD    = []byte("kassa totp secret\x00")
	enrolmentAAD = []byte("kassa totp enrolment\x00")
	pendingAAD   = []byte("kassa two-factor sign-in\x00")
)

// TwoFactor keeps users' second factor: the TOTP secret sealed under the key-encryption key (whoever
// reads the database must not be able to compute codes), the last step used, and recovery codes.
type TwoFactor struct {
	db   *store.DB
	ring *envelope.Keyring
}

// NewTwoFactor returns the two-factor store over db, sealing secrets with ring.
func NewTwoFactor(db *store.DB, ring *envelope.Keyring) *TwoFactor {
	return &TwoFactor{db: db, ring: ring}
}

// Enrolment is a secret offered to a user and not yet confirmed: nothing is stored until the user
// types a code it produced (Confirm).
type Enrolment struct {
	Key   string        // the secret for manual entry, base32
	URI   string        // the otpauth URI the QR code carries
	QR    template.HTML // the QR code, inline SVG
	Token string        // the form's sealed copy of the secret, bound to the user, valid EnrolmentTTL
}

// Begin offers u a new secret.
func (t *TwoFactor) Begin(u Person, now time.Time) (Enrolment, error) {
	s, err := totp.NewSecret()
	if err != nil {
		return Enrolment{}, err
	}
	plain := binary.BigEndian.AppendUint64(nil, uint64(now.Add(EnrolmentTTL).Unix()))
	plain = append(plain, s...)
	return enrolment(u, s, base64.RawURLEncoding.EncodeToString(t.ring.Seal(plain, append(enrolmentAAD, u.ID...))))
}

// Resume shows again the enrolment of token, offered to u by Begin and not yet expired: after a wrong
// first code the user keeps the entry already scanned into the app.
func (t *TwoFactor) Resume(u Person, token string, now time.Time) (Enrolment, error) {
	s, err := t.openEnrolment(u, token, now)
	if err != nil {
		return Enrolment{}, err
	}
	return enrolment(u, s, token)
}

// enrolment is what the page offering secret s to u shows.
func enrolment(u Person, s totp.Secret, token string) (Enrolment, error) {
	uri := totp.URI(s, issuer, u.Email)
	qr, err := qrcode.Encode(uri)
	if err != nil {
		return Enrolment{}, err
	}
	return Enrolment{Key: s.String(), URI: uri, QR: qr.SVG("QR code to scan with your authenticator app"), Token: token}, nil
}

// openEnrolment returns the secret of an enrolment token offered to u, ErrEnrolmentExpired when it is
// not u's or has expired.
func (t *TwoFactor) openEnrolment(u Person, token string, now time.Time) (totp.Secret, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, ErrEnrolmentExpired
	}
	plain, err := t.ring.Open(raw, append(enrolmentAAD, u.ID...))
	if err != nil || len(plain) != 8+totp.SecretSize || now.Unix() > int64(binary.BigEndian.Uint64(plain)) {
		return nil, ErrEnrolmentExpired
	}
	return totp.Secret(plain[8:]), nil
}

// Confirm turns two-factor authentication on for u, who has none, with the secret of an enrolment
// token, once code shows that the user's app computes it, and returns the user's new recovery codes
// (shown once). A user who has a second factor is refused (ErrAlreadyEnabled), even when the check and
// another request's change race: only Replace replaces a factor.
func (t *TwoFactor) Confirm(ctx context.Context, u Person, token, code string, now time.Time) ([]string, error) {
	return t.install(ctx, u, token, code, "", now)
}

// Replace puts the secret of an enrolment token in place of u's second factor, once current (a code of
// the factor in place, or one of its recovery codes, checked as Check does) and code (of the new
// secret) are both right, and returns the new recovery codes; the old ones stop working. The new code
// is checked first, so that a typing error there does not use up the current code.
func (t *TwoFactor) Replace(ctx context.Context, u Person, current, token, code string, now time.Time) ([]string, error) {
	if current == "" {
		return nil, ErrBadCode
	}
	return t.install(ctx, u, token, code, current, now)
}

// install sets the secret of token as u's factor once code is right: over none when current is "",
// else over the factor that current is a code of.
func (t *TwoFactor) install(ctx context.Context, u Person, token, code, current string, now time.Time) ([]string, error) {
	s, err := t.openEnrolment(u, token, now)
	if err != nil {
		return nil, err
	}
	step, ok := totp.Verify(s, code, now, 0)
	if !ok {
		return nil, ErrBadCode
	}
	st, err := t.status(ctx, u.ID)
	switch {
	case err != nil:
		return nil, err
	case current == "" && st.Enabled:
		return nil, ErrAlreadyEnabled
	case current != "" && !st.Enabled:
		return nil, ErrNotEnabled
	case current != "":
		if _, err := t.Check(ctx, u.ID, current, now); err != nil {
			return nil, err
		}
	}
	codes, hashes, err := newRecoveryCodes()
	if err != nil {
		return nil, err
	}
	err = t.db.Write(ctx, func(tx *store.Tx) error {
		// Over none, the row must still have none: two set-ups racing (or a set-up racing a sign-in's
		// enrolment) cannot both install a secret, the second silently replacing the first.
		cond := ` AND totp_secret IS NULL`
		if current != "" {
			cond = ` AND totp_secret IS NOT NULL`
		}
		r, err := tx.ExecContext(ctx, `UPDATE users SET totp_secret = $1, totp_last_step = $2 WHERE id = $3`+cond,
			t.ring.Seal(s, append(secretAAD, u.ID...)), step, u.ID)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n != 1 {
			return cmpErr(err, map[bool]error{true: ErrAlreadyEnabled, false: ErrNotEnabled}[current == ""])
		}
		return replaceRecoveryCodes(ctx, tx, u.ID, hashes)
	})
	if err != nil {
		return nil, err
	}
	return codes, nil
}

// status reads the second factor of user id.
func (t *TwoFactor) status(ctx context.Context, id string) (Status, error) {
	var st Status
	err := t.db.Read(ctx, func(q store.Querier) error {
		var err error
		st, err = StatusOf(ctx, q, id)
		return err
	})
	return st, err
}

// Status is a user's second factor as the account page shows it.
type Status struct {
	Enabled       bool
	RecoveryCodes int // unused recovery codes left
}

// StatusOf reads the second factor of user id.
func StatusOf(ctx context.Context, q store.Querier, id string) (Status, error) {
	var st Status
	err := q.QueryRowContext(ctx, `SELECT totp_secret IS NOT NULL,
		(SELECT COUNT(*) FROM user_recovery_codes WHERE user_id = $1 AND used_at IS NULL) FROM users WHERE id = $1`, id).
		Scan(&st.Enabled, &st.RecoveryCodes)
	if errors.Is(err, sql.ErrNoRows) {
		return Status{}, ErrNotFound
	}
	return st, err
}

// Step is what a sign-in whose password was right still needs before a session starts.
type Step byte

// The steps after the password.
const (
	// StepNone: the user has no second factor and none is required of it.
	StepNone Step = iota
	// StepCode: the user has a second factor, and gives a code of it (or a recovery code).
	StepCode
	// StepEnrol: the user has none and its merchant requires one, which it sets up now.
	StepEnrol
)

// NextStep says what the sign-in of person id needs after its password.
func NextStep(ctx context.Context, q store.Querier, id string) (Step, error) {
	st, err := StatusOf(ctx, q, id)
	if err != nil {
		return StepNone, err
	}
	if st.Enabled {
		return StepCode, nil
	}
	required, err := FactorRequired(ctx, q, id)
	if err != nil || !required {
		return StepNone, err
	}
	return StepEnrol, nil
}

// Pending seals the sign-in of user id between its password and its second factor, for PendingTTL:
// the value of a cookie that only the next step reads. It names the one step it allows, so that the
// password of a user with a second factor never opens the enrolment, where a secret of the bearer's
// choosing would take the place of the user's own.
func (t *TwoFactor) Pending(id string, step Step, now time.Time) string {
	plain := binary.BigEndian.AppendUint64(nil, uint64(now.Add(PendingTTL).Unix()))
	return base64.RawURLEncoding.EncodeToString(t.ring.Seal(append(plain, id...), append(pendingAAD, byte(step))))
}

// OpenPending returns the user of a Pending value for step that has not expired; a value made for
// another step opens nothing.
func (t *TwoFactor) OpenPending(v string, step Step, now time.Time) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return "", false
	}
	plain, err := t.ring.Open(raw, append(pendingAAD, byte(step)))
	if err != nil || len(plain) <= 8 || now.Unix() > int64(binary.BigEndian.Uint64(plain)) {
		return "", false
	}
	return string(plain[8:]), true
}

// Check verifies the second factor of user id: a TOTP code, used once (the step it matched is
// recorded in the same statement that checks it is later than the last one, so that two requests
// racing with one code cannot both pass), or one of the user's unused recovery codes, which it uses
// up. It reports whether a recovery code was used. A user without two-factor authentication never
// passes. The attempt is counted before the code is checked (as sign-in counts passwords), and
// MaxCodeFailures in a row refuse the user's codes for CodeLockout (ErrCodesLocked); a right code
// clears the count.
func (t *TwoFactor) Check(ctx context.Context, id, code string, now time.Time) (recovery bool, err error) {
	if err := t.countAttempt(ctx, id, now); err != nil {
		return false, err
	}
	recovery, err = t.check(ctx, id, code, now)
	if err == nil {
		_, err = t.db.Exec(ctx, `UPDATE users SET totp_failures = 0 WHERE id = $1`, id)
	}
	return recovery, err
}

// countAttempt counts an attempt against user id, or refuses it while the user's codes are locked: the
// attempt that finds MaxCodeFailures before it locks them.
func (t *TwoFactor) countAttempt(ctx context.Context, id string, now time.Time) error {
	locked := false
	err := t.db.Write(ctx, func(tx *store.Tx) error {
		var failures int
		var until sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT totp_failures, totp_locked_until FROM users WHERE id = $1`, id).Scan(&failures, &until)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // Check refuses it
		}
		if err != nil {
			return err
		}
		switch {
		case until.Valid && until.Int64 > now.UnixMilli():
			locked = true
			return nil
		case failures >= MaxCodeFailures:
			locked = true
			_, err = tx.ExecContext(ctx, `UPDATE users SET totp_failures = 0, totp_locked_until = $1 WHERE id = $2`,
				now.Add(CodeLockout).UnixMilli(), id)
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE users SET totp_failures = totp_failures + 1 WHERE id = $1`, id)
		return err
	})
	if err == nil && locked {
		return ErrCodesLocked
	}
	return err
}

func (t *TwoFactor) check(ctx context.Context, id, code string, now time.Time) (recovery bool, err error) {
	if digits := strings.Join(strings.Fields(code), ""); len(digits) != totp.Digits {
		return true, t.useRecoveryCode(ctx, id, code, now)
	}
	var sealed []byte
	var last sql.NullInt64
	err = t.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT totp_secret, totp_last_step FROM users WHERE id = $1`, id).Scan(&sealed, &last)
	})
	if errors.Is(err, sql.ErrNoRows) || (err == nil && sealed == nil) {
		return false, ErrBadCode
	}
	if err != nil {
		return false, err
	}
	s, err := t.ring.Open(sealed, append(secretAAD, id...))
	if err != nil {
		return false, err
	}
	step, ok := totp.Verify(s, code, now, last.Int64)
	if !ok {
		return false, ErrBadCode
	}
	var won int64
	err = t.db.Write(ctx, func(tx *store.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE users SET totp_last_step = $1 WHERE id = $2 AND totp_secret IS NOT NULL
			AND (totp_last_step IS NULL OR totp_last_step < $1)`, step, id)
		if err == nil {
			won, err = r.RowsAffected()
		}
		return err
	})
	if err == nil && won == 0 {
		err = ErrBadCode // another request used this step's code first
	}
	return false, err
}

func (t *TwoFactor) useRecoveryCode(ctx context.Context, id, code string, now time.Time) error {
	return t.db.Write(ctx, func(tx *store.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE user_recovery_codes SET used_at = $1 WHERE user_id = $2 AND code_hash = $3 AND used_at IS NULL`,
			now.UnixMilli(), id, recoveryHash(code))
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n != 1 {
			return cmpErr(err, ErrBadCode)
		}
		return nil
	})
}

// NewRecoveryCodes replaces the user's recovery codes with new ones, in the caller's transaction, and
// returns them (shown once).
func NewRecoveryCodes(ctx context.Context, tx store.Querier, id string) ([]string, error) {
	codes, hashes, err := newRecoveryCodes()
	if err == nil {
		err = replaceRecoveryCodes(ctx, tx, id, hashes)
	}
	return codes, err
}

// Disable turns the person's two-factor authentication off, in the caller's transaction, unless one of
// its merchants requires it.
func Disable(ctx context.Context, tx store.Querier, id string) error {
	required, err := FactorRequired(ctx, tx, id)
	if err != nil {
		return err
	}
	if required {
		return ErrTwoFactorRequired
	}
	if _, err := tx.ExecContext(ctx, `UPDATE users SET totp_secret = NULL, totp_last_step = NULL WHERE id = $1`, id); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM user_recovery_codes WHERE user_id = $1`, id)
	return err
}

// RequiresTwoFactor reports whether the merchant requires two-factor authentication of all its staff.
func RequiresTwoFactor(ctx context.Context, q store.Querier, merchantID string) (bool, error) {
	var on bool
	err := q.QueryRowContext(ctx, `SELECT require_two_factor FROM merchants WHERE id = $1`, merchantID).Scan(&on)
	return on, err
}

// FactorRequired reports whether a merchant whose staff person id is requires two-factor
// authentication: one person has one second factor, which the strictest of its merchants decides.
func FactorRequired(ctx context.Context, q store.Querier, id string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM memberships m JOIN merchants mc ON mc.id = m.merchant_id
		WHERE m.user_id = $1 AND m.accepted_at IS NOT NULL AND mc.require_two_factor`, id).Scan(&n)
	return n > 0, err
}

// SetRequireTwoFactor sets the merchant's "require 2FA for all staff", in the caller's transaction.
// Staff without a second factor enrol at their next sign-in.
func SetRequireTwoFactor(ctx context.Context, tx store.Querier, merchantID string, on bool) error {
	_, err := tx.ExecContext(ctx, `UPDATE merchants SET require_two_factor = $1 WHERE id = $2`, on, merchantID)
	return err
}

// recoveryAlphabet is base32's (RFC 4648): upper-case letters and the digits 2 to 7, none of which a
// person confuses with another once case is ignored (no 0, 1, 8 or 9 beside O, I, L and B).
const recoveryAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// newRecoveryCodes makes RecoveryCodeCount codes of 16 characters (80 random bits), written in groups
// of four, and their hashes.
func newRecoveryCodes() (codes []string, hashes [][]byte, err error) {
	for range RecoveryCodeCount {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, nil, err
		}
		var c strings.Builder
		for i, v := range b {
			if i > 0 && i%4 == 0 {
				c.WriteByte('-')
			}
			c.WriteByte(recoveryAlphabet[v&31])
		}
		codes = append(codes, c.String())
		hashes = append(hashes, recoveryHash(c.String()))
	}
	return codes, hashes, nil
}

// recoveryHash is the stored form of a recovery code as a person may type it: its hyphens and spaces
// and its case do not matter.
func recoveryHash(code string) []byte {
	norm := strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(code))
	sum := sha256.Sum256([]byte("kassa recovery code\x00" + norm))
	return sum[:]
}

func replaceRecoveryCodes(ctx context.Context, tx store.Querier, id string, hashes [][]byte) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM user_recovery_codes WHERE user_id = $1`, id); err != nil {
		return err
	}
	for _, h := range hashes {
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_recovery_codes (user_id, code_hash) VALUES ($1, $2)`, id, h); err != nil {
			return err
		}
	}
	return nil
}

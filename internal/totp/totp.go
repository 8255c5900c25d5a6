// Package totp implements time-based one-time passwords as authenticator apps compute them (RFC 6238
// over RFC 4226's HOTP): HMAC-SHA-1, six digits, 30-second steps, a code accepted one step either side
// of the server's clock, and each step's code used once.
package totp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

const (
	// Digits is the length of a code.
	Digits = 6
	// Period is how long a code lasts: RFC 6238's default time step X of 30 seconds.
	Period = 30 * time.Second
	// Skew is how many steps either side of the server's clock a code is accepted from: "at most one
	// time step is allowed as the network delay" (RFC 6238, section 5.2).
	Skew = 1
	// SecretSize is the shared secret's length in bytes: "the length of the shared secret MUST be at
	// least 128 bits. This document RECOMMENDs a shared secret length of 160 bits" (RFC 4226, section 4).
	SecretSize = 20

	modulus = 1_000_000 // 10^Digits
)

// ErrSecret is ParseSecret's error for a key that is not base32 of at least 128 bits.
var ErrSecret = errors.New("totp: the key is not a base32 secret of at least 16 bytes")

// encoding is the base32 of authenticator apps' manual entry and of otpauth URIs: RFC 4648's alphabet,
// without padding.
var encoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Secret is the key an authenticator app and the server share.
type Secret []byte

// NewSecret makes a random secret of SecretSize bytes.
func NewSecret() (Secret, error) {
	s := make(Secret, SecretSize)
	if _, err := rand.Read(s); err != nil {
		return nil, err
	}
	return s, nil
}

// String is the secret as a person types it into an authenticator app: base32, upper case, no padding.
func (s Secret) String() string { return encoding.EncodeToString(s) }

// ParseSecret reads a secret as String writes it; spaces and lower case, as people copy keys, are
// accepted.
func ParseSecret(key string) (Secret, error) {
	key = strings.ToUpper(strings.Join(strings.Fields(key), ""))
	s, err := encoding.DecodeString(strings.TrimRight(key, "="))
	if err != nil || len(s) < 16 {
		return nil, ErrSecret
	}
	return s, nil
}

// Step is the time step that t falls in: RFC 6238's T = floor((t - T0) / X), T0 = 0.
func Step(t time.Time) int64 { return t.Unix() / int64(Period/time.Second) }

// Code is the code of step for secret s.
func Code(s Secret, step int64) string {
	// HOTP(K, C) = Truncate(HMAC-SHA-1(K, C)), C as 8 bytes big-endian (RFC 4226, section 5.3).
	var c [8]byte
	binary.BigEndian.PutUint64(c[:], uint64(step))
	mac := hmac.New(sha1.New, s)
	mac.Write(c[:])
	h := mac.Sum(nil)
	// Dynamic truncation: the low 4 bits of the last byte are an offset; the 31 bits from there are the
	// number, of which the code is the last Digits decimal digits.
	off := h[len(h)-1] & 0x0f
	n := binary.BigEndian.Uint32(h[off:off+4]) & 0x7fffffff
	return fmt.Sprintf("%0*d", Digits, n%modulus)
}

// Verify checks code against s at time now, one step either side (Skew), and returns the step it
// matched. Only steps after lastUsed count: "the verifier MUST NOT accept the second attempt of the OTP
// after the successful validation has been issued for the first OTP" (RFC 6238, section 5.2), so the
// caller records the step returned and passes it as lastUsed next time (0 before the first use).
// A code that is not Digits decimal digits (spaces allowed, as people type them) never matches.
func Verify(s Secret, code string, now time.Time, lastUsed int64) (step int64, ok bool) {
	code = strings.Join(strings.Fields(code), "")
	if len(code) != Digits || strings.Trim(code, "0123456789") != "" {
		return 0, false
	}
	cur := Step(now)
	for st := cur - Skew; st <= cur+Skew; st++ {
		if st > lastUsed && subtle.ConstantTimeCompare([]byte(Code(s, st)), []byte(code)) == 1 {
			return st, true
		}
	}
	return 0, false
}

// URI is the otpauth URI an authenticator app reads from a QR code ("Key Uri Format"): the label is
// issuer and account, and the parameters say what this package computes.
func URI(s Secret, issuer, account string) string {
	q := url.Values{"secret": {s.String()}, "issuer": {issuer}, "algorithm": {"SHA1"}, "digits": {fmt.Sprint(Digits)},
		"period": {fmt.Sprint(int(Period / time.Second))}}
	label := url.PathEscape(issuer) + ":" + url.PathEscape(account)
	return "otpauth://totp/" + label + "?" + q.Encode()
}

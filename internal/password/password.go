// Package password hashes and verifies staff passwords with argon2id (RFC 9106), stored as PHC
// strings so that the parameters can be raised later without invalidating existing hashes.
//
// Every hash and every verification goes through a Gate (Gate.Hash, Gate.Verify), which bounds how
// many run at once and so the memory they hold (64 MiB each): the package has no other way to compute
// one, so that no handler can hash outside the bound.
package password

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Length limits of a password, in characters.
const (
	MinLength = 10
	MaxLength = 256
)

// Parameters of new hashes: RFC 9106 §4's second recommended option (64 MiB, 3 passes), with
// parallelism 2 for a 2-core host; above OWASP's minimum of 19 MiB and 2 passes (docs/design/auth.md,
// "Passwords: argon2id, one computation at a time").
const (
	memoryKiB = 64 * 1024
	passes    = 3
	lanes     = 2
	keyLen    = 32
	saltLen   = 16
)

// ErrTooShort and ErrTooLong report a password outside the length limits.
var (
	ErrTooShort = fmt.Errorf("password: must be at least %d characters", MinLength)
	ErrTooLong  = fmt.Errorf("password: must be at most %d characters", MaxLength)
)

var errMalformed = errors.New("password: malformed hash")

// Check reports whether pw is within the length limits, without hashing it.
func Check(pw string) error {
	n := utf8.RuneCountInString(pw)
	switch {
	case n < MinLength:
		return ErrTooShort
	case n > MaxLength:
		return ErrTooLong
	}
	return nil
}

// hash returns the PHC string of an argon2id hash of pw with a fresh random salt.
func hash(pw string) (string, error) {
	if err := Check(pw); err != nil {
		return "", err
	}
	salt := make([]byte, saltLen)
	rand.Read(salt)
	key := argon2.IDKey([]byte(pw), salt, passes, memoryKiB, lanes, keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, memoryKiB, passes, lanes,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// verify reports whether pw matches the PHC string h, comparing in constant time.
func verify(h, pw string) (bool, error) {
	parts := strings.Split(h, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errMalformed
	}
	var version int
	var m uint32
	var t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errMalformed
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || p == 0 || t == 0 {
		return false, errMalformed
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, errMalformed
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errMalformed
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummy is a valid hash of a random password. Verifying against it takes as long as verifying a real
// hash, so a sign-in for an unknown e-mail costs the same time as one with a wrong password.
// It is computed on first use, not at start-up.
var dummy = sync.OnceValue(func() string {
	h, err := hash(rand.Text())
	if err != nil {
		panic(err) // rand.Text is always within the length limits
	}
	return h
})

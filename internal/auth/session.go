package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// Session is a staff user signed in to the authorization pages. It lives only in a cookie, sealed with
// the token keys like an access token (under its own additional data, so that neither can pass for
// the other): any node opens it, and nothing is stored. The merchant the user approves a partner for
// is chosen on the consent page, among those whose staff it is in a role that may.
type Session struct {
	ID        [16]byte
	UserID    string
	ExpiresAt time.Time
}

// SessionTTL is how long a sign-in to the authorization pages lasts.
const SessionTTL = 30 * time.Minute

// DeviceTTL is how long a device cookie vouches for the browser that signed in with it (see
// NewDeviceCookie).
const DeviceTTL = 90 * 24 * time.Hour

var (
	// A session names the staff user who signed in; a session of before, which named a merchant, does
	// not open under it.
	sessionAAD = []byte("kassa sign-in session\x00user")
	deviceAAD  = []byte("kassa device cookie")
)

const sessionLen = 1 + 16 + 5 + 8 // version | id | user | expiry

// NewSession starts a session for the staff user and returns the cookie value that carries it.
func (s *Service) NewSession(userID string) (string, Session) {
	return s.sealPass(sessionAAD, userID, SessionTTL)
}

// OpenSession opens a session cookie's value; false when it is not one of ours or has expired.
func (s *Service) OpenSession(v string) (Session, bool) {
	return s.openPass(sessionAAD, v)
}

// NewDeviceCookie returns the value of a device cookie for the browser that has just signed in as
// the staff user, and its expiry. It is sealed like a session, under its own additional data, and
// names the user and a random device id; a sign-in that presents it for the same user is counted against that
// device alone (OWASP, "Slow Down Online Guessing Attacks with Device Cookies").
func (s *Service) NewDeviceCookie(userID string) (string, time.Time) {
	v, d := s.sealPass(deviceAAD, userID, DeviceTTL)
	return v, d.ExpiresAt
}

// sealPass seals a random id, the user and an expiry ttl from now under aad: a session, or a device
// cookie.
func (s *Service) sealPass(aad []byte, userID string, ttl time.Duration) (string, Session) {
	sess := Session{ID: newTokenID(), UserID: userID, ExpiresAt: s.now().Add(ttl).Truncate(time.Second)}
	p := make([]byte, 0, sessionLen)
	p = append(p, claimsFormat)
	p = append(p, sess.ID[:]...)
	var m [5]byte
	hex.Decode(m[:], []byte(userID))
	p = append(p, m[:]...)
	p = binary.BigEndian.AppendUint64(p, uint64(sess.ExpiresAt.Unix()))
	sealed := []byte{s.sealer.current}
	sealed = s.sealer.keys[s.sealer.current].Seal(sealed, nil, p, aad)
	return base64.RawURLEncoding.EncodeToString(sealed), sess
}

// openPass opens what sealPass sealed under aad; false when v is not one of ours or has expired.
func (s *Service) openPass(aad []byte, v string) (Session, bool) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(v)
	if err != nil || len(raw) < 2 {
		return Session{}, false
	}
	aead, ok := s.sealer.keys[raw[0]]
	if !ok {
		return Session{}, false
	}
	p, err := aead.Open(nil, nil, raw[1:], aad)
	if err != nil || len(p) != sessionLen || p[0] != claimsFormat {
		return Session{}, false
	}
	var sess Session
	copy(sess.ID[:], p[1:17])
	sess.UserID = hex.EncodeToString(p[17:22])
	sess.ExpiresAt = time.Unix(int64(binary.BigEndian.Uint64(p[22:30])), 0)
	if !s.now().Before(sess.ExpiresAt) {
		return Session{}, false
	}
	return sess, true
}

// CSRFToken is the anti-forgery token of the session's forms: derived from the session id, which
// only the sealed, HttpOnly cookie carries, so that another site can neither read nor guess it.
func (sess Session) CSRFToken() string {
	sum := sha256.Sum256(append([]byte("kassa csrf "), sess.ID[:]...))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

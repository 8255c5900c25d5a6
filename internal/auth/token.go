package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/httpapi"
)

// Claims is what an access token carries: whose it is, for which merchant, with which scopes, until
// when.
type Claims struct {
	TokenID    [16]byte // random; names the token for revocation
	ClientID   [16]byte // the OAuth client the token was issued to
	GrantID    [16]byte // the authorization grant it descends from; zero for client credentials
	MerchantID string   // the merchant whose data the token reaches (10 hex characters)
	Scopes     Scopes
	IssuedAt   time.Time
	ExpiresAt  time.Time
}

// ClientIDString is the client id as the API shows it: 32 hex characters.
func (c Claims) ClientIDString() string { return hex.EncodeToString(c.ClientID[:]) }

// Principal is who a request with the token acts as (httpapi.Principal): the merchant's account and
// the client the token was issued to. The client, not the grant, names the credential: every grant of
// a client is held by the one party that holds the client's secret, and a new grant (a password grant
// signs in anew, a partner may be approved again) must not make a retry of an earlier request a new
// request, which for money would be a second charge. A partner's client acting for two merchants is
// two principals, by their accounts.
func (c Claims) Principal() httpapi.Principal {
	return httpapi.Principal{Account: "acct_" + c.MerchantID, Credential: "client:" + c.ClientIDString()}
}

// An access token is "kat_" followed by the unpadded base64url encoding of
//
//	key id (1 byte) | AES-256-GCM sealed claims with a random 96-bit nonce (12 + 72 + 16 bytes)
//
// The token is opaque: clients can neither read nor forge it, and the server checks it with one AES
// operation and an in-memory revocation lookup, without a database round trip. Nothing of it is
// stored; its 128-bit random TokenID is what revocation records.
const (
	tokenPrefix  = "kat_"
	claimsLen    = 1 + 16 + 16 + 16 + 5 + 2 + 8 + 8 // version | token | client | grant | merchant | scopes | iat | exp
	sealedLen    = 1 + 12 + claimsLen + 16
	tokenLen     = len(tokenPrefix) + (sealedLen*8+5)/6
	claimsFormat = 1
)

// tokenEncoding is strict so that each token has exactly one spelling.
var tokenEncoding = base64.RawURLEncoding.Strict()

var (
	errMalformed  = errors.New("auth: malformed token")
	errUnknownKey = errors.New("auth: token sealed with an unknown key")
	tokenAAD      = []byte("kassa access token")
)

// sealer seals and opens access tokens with the token keys.
type sealer struct {
	current byte
	keys    map[byte]cipher.AEAD
}

func newSealer(keys map[byte][]byte, current byte) (*sealer, error) {
	s := &sealer{current: current, keys: make(map[byte]cipher.AEAD, len(keys))}
	for id, k := range keys {
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, err
		}
		s.keys[id] = aead
	}
	if _, ok := s.keys[current]; !ok {
		return nil, errors.New("auth: current token key missing")
	}
	return s, nil
}

// seal returns the access token carrying c.
func (s *sealer) seal(c Claims) string {
	var plain [claimsLen]byte
	p := plain[:0]
	p = append(p, claimsFormat)
	p = append(p, c.TokenID[:]...)
	p = append(p, c.ClientID[:]...)
	p = append(p, c.GrantID[:]...)
	var m [5]byte
	hex.Decode(m[:], []byte(c.MerchantID)) // merchant ids are always 10 hex characters
	p = append(p, m[:]...)
	p = binary.BigEndian.AppendUint16(p, uint16(c.Scopes))
	p = binary.BigEndian.AppendUint64(p, uint64(c.IssuedAt.Unix()))
	p = binary.BigEndian.AppendUint64(p, uint64(c.ExpiresAt.Unix()))
	sealed := make([]byte, 1, sealedLen)
	sealed[0] = s.current
	sealed = s.keys[s.current].Seal(sealed, nil, p, tokenAAD)
	return tokenPrefix + tokenEncoding.EncodeToString(sealed)
}

// open checks the token's seal and returns its claims. It does not check expiry or revocation.
func (s *sealer) open(tok string) (Claims, error) {
	var c Claims
	if len(tok) != tokenLen || tok[:len(tokenPrefix)] != tokenPrefix {
		return c, errMalformed
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	n, err := tokenEncoding.Decode(sc.sealed[:], sc.text(tok[len(tokenPrefix):]))
	if err != nil || n != sealedLen {
		return c, errMalformed
	}
	aead, ok := s.keys[sc.sealed[0]]
	if !ok {
		return c, errUnknownKey
	}
	p, err := aead.Open(sc.claims[:0], nil, sc.sealed[1:n], tokenAAD)
	if err != nil || len(p) != claimsLen || p[0] != claimsFormat {
		return c, errMalformed
	}
	p = p[1:]
	copy(c.TokenID[:], p[0:16])
	copy(c.ClientID[:], p[16:32])
	copy(c.GrantID[:], p[32:48])
	c.MerchantID = hex.EncodeToString(p[48:53])
	c.Scopes = Scopes(binary.BigEndian.Uint16(p[53:55]))
	c.IssuedAt = time.Unix(int64(binary.BigEndian.Uint64(p[55:63])), 0)
	c.ExpiresAt = time.Unix(int64(binary.BigEndian.Uint64(p[63:71])), 0)
	return c, nil
}

// scratch holds the buffers of one open. They pass through the cipher.AEAD interface, so they would
// escape to the heap on every bearer check; a pool reuses them instead.
type scratch struct {
	textBuf [tokenLen - len(tokenPrefix)]byte
	sealed  [sealedLen]byte
	claims  [claimsLen]byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// text copies the token's base64 text into the scratch buffer, as the decoder wants bytes.
func (sc *scratch) text(s string) []byte { return sc.textBuf[:copy(sc.textBuf[:], s)] }

// newTokenID returns 128 random bits.
func newTokenID() (id [16]byte) {
	rand.Read(id[:])
	return id
}

// Package cardenc is the server side of client-side card encryption. Each merchant has an RSA-2048
// key pair; its public key goes to the merchant's web pages, where the CardEncryption script
// (web/card-encryption.js) encrypts a card with RSA-OAEP (SHA-256, MGF1-SHA-256) into a card token; the
// shop's server sends the token instead of the card fields, and only Kassa can open it.
//
// The public key is handed out as the original system did: the hex encoding of its PEM text, an
// alphanumeric string a page can embed anywhere. Private keys are sealed under the server's
// key-encryption key (package envelope) and never stored in clear.
//
// A card token is
//
//	"ct1." key-id "." base64url(RSA-OAEP ciphertext)
//
// where the key id is the first 16 hex digits of the SHA-256 of the public key's DER encoding, and the
// plaintext is the JSON object {"n": number, "m": month, "y": year, "c": cvv2, "t": epoch ms}.
package cardenc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"database/sql"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/store"
)

const (
	// DefaultGrace is how long a rotated key keeps opening tokens after its replacement.
	DefaultGrace = 7 * 24 * time.Hour
	keyBits      = 2048
	keyCacheTTL  = 30 * time.Second
)

// Config configures a Service.
type Config struct {
	DB      *store.DB
	Keyring *envelope.Keyring
	Now     func() time.Time
}

// Service keeps merchants' key pairs and opens card tokens.
type Service struct {
	db   *store.DB
	ring *envelope.Keyring
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]cachedKey // by key id
	dummy *rsa.PrivateKey      // decrypts in place of a key that cannot be used, to take the same time
}

type cachedKey struct {
	merchantID string
	priv       *rsa.PrivateKey
	expiresAt  time.Time // zero: current key
	fetched    time.Time
}

// New returns a Service.
func New(cfg Config) *Service {
	s := &Service{db: cfg.DB, ring: cfg.Keyring, now: cfg.Now, cache: map[string]cachedKey{}}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// PublicKey is a merchant's public card-encryption key.
type PublicKey struct {
	ID         string
	MerchantID string
	PEM        string
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero for the current key
}

// Encoded is the public key as merchants use it: the hex encoding of its PEM text.
func (k PublicKey) Encoded() string { return hex.EncodeToString([]byte(k.PEM)) }

// Current returns the merchant's current public key, creating the merchant's first pair when it has
// none.
func (s *Service) Current(ctx context.Context, merchantID string) (PublicKey, error) {
	k, err := s.current(ctx, merchantID)
	if errors.Is(err, sql.ErrNoRows) {
		return s.create(ctx, merchantID, -1)
	}
	return k, err
}

// Rotate makes a new pair for the merchant. Tokens made with the previous key keep opening for grace,
// then fail.
func (s *Service) Rotate(ctx context.Context, merchantID string, grace time.Duration) (PublicKey, error) {
	return s.create(ctx, merchantID, max(grace, 0))
}

func (s *Service) current(ctx context.Context, merchantID string) (PublicKey, error) {
	k := PublicKey{MerchantID: merchantID}
	var created int64
	err := s.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT id, public_key, created_at FROM card_encryption_keys
			WHERE merchant_id = $1 AND expires_at IS NULL ORDER BY created_at DESC LIMIT 1`, merchantID).
			Scan(&k.ID, &k.PEM, &created)
	})
	k.CreatedAt = time.UnixMilli(created)
	return k, err
}

// create generates a pair and stores it as the merchant's current key. With a grace of zero or more,
// the previous current key is given the end of its grace period.
func (s *Service) create(ctx context.Context, merchantID string, grace time.Duration) (PublicKey, error) {
	priv, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return PublicKey{}, err
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return PublicKey{}, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return PublicKey{}, err
	}
	now := s.now()
	k := PublicKey{ID: KeyID(der), MerchantID: merchantID, CreatedAt: now,
		PEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
	sealed := s.ring.Seal(pkcs8, privateKeyAAD(k.ID, merchantID))
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		if grace >= 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE card_encryption_keys SET expires_at = $2
				WHERE merchant_id = $1 AND expires_at IS NULL`, merchantID, now.Add(grace).UnixMilli()); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO card_encryption_keys (id, merchant_id, public_key, private_key, created_at)
			VALUES ($1, $2, $3, $4, $5)`, k.ID, merchantID, k.PEM, sealed, now.UnixMilli())
		return err
	})
	if err != nil {
		return PublicKey{}, fmt.Errorf("cardenc: store key: %w", err)
	}
	return k, nil
}

// KeyID names a public key: the first 16 hex digits of the SHA-256 of its DER encoding.
func KeyID(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

func privateKeyAAD(keyID, merchantID string) []byte {
	return []byte("kassa card-encryption key\x00" + keyID + "\x00" + merchantID)
}

// privateKey returns the key pair named id, from memory when it was read less than keyCacheTTL ago.
func (s *Service) privateKey(ctx context.Context, id string) (cachedKey, error) {
	now := s.now()
	s.mu.Lock()
	c, ok := s.cache[id]
	s.mu.Unlock()
	if ok && now.Sub(c.fetched) < keyCacheTTL {
		return c, nil
	}
	var sealed []byte
	var expires sql.NullInt64
	err := s.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT merchant_id, private_key, expires_at FROM card_encryption_keys WHERE id = $1`, id).
			Scan(&c.merchantID, &sealed, &expires)
	})
	if err != nil {
		return cachedKey{}, err
	}
	pkcs8, err := s.ring.Open(sealed, privateKeyAAD(id, c.merchantID))
	if err != nil {
		return cachedKey{}, err
	}
	parsed, err := x509.ParsePKCS8PrivateKey(pkcs8)
	if err != nil {
		return cachedKey{}, err
	}
	priv, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return cachedKey{}, errors.New("cardenc: stored key is not RSA")
	}
	priv.Precompute()
	c.priv, c.fetched = priv, now
	if expires.Valid {
		c.expiresAt = time.UnixMilli(expires.Int64)
	}
	s.mu.Lock()
	s.cache[id] = c
	s.mu.Unlock()
	return c, nil
}

// dummyKey is a key that opens nothing of anyone's, made once.
func (s *Service) dummyKey() *rsa.PrivateKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dummy == nil {
		s.dummy, _ = rsa.GenerateKey(rand.Reader, keyBits)
	}
	return s.dummy
}

// Package vault keeps merchants' customers and the cards they store with the merchant, and charges
// stored cards through the payments core. Card numbers are sealed under the envelope keyring (the
// server's key-encryption key wraps the data keys; PCI DSS 3.5); a keyed HMAC fingerprint under a
// separate key finds a card again without decrypting it (3.5.1.1); the CVV is never stored (3.3.1).
package vault

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"errors"
	"time"

	"github.com/kassapay/kassa/internal/cardenc"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// Config configures a Service.
type Config struct {
	DB        *store.DB
	Keyring   *envelope.Keyring
	Ledger    *payment.Ledger
	Merchants *merchant.Cache
	Tokens    *cardenc.Service
	Now       func() time.Time
}

// Service is the customer vault.
type Service struct {
	db        *store.DB
	ring      *envelope.Keyring
	ledger    *payment.Ledger
	merchants *merchant.Cache
	tokens    *cardenc.Service
	now       func() time.Time
	fpKey     []byte
	kick      func() // tells the billing engine that a subscription is due now
}

// OnDue sets the function called when a subscription becomes due at once (created to start now,
// resumed, reactivated): the billing engine's wake-up.
func (s *Service) OnDue(kick func()) { s.kick = kick }

// New returns the vault, loading its fingerprint key (creating it in a new database).
func New(ctx context.Context, cfg Config) (*Service, error) {
	s := &Service{db: cfg.DB, ring: cfg.Keyring, ledger: cfg.Ledger, merchants: cfg.Merchants, tokens: cfg.Tokens, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	key, err := s.ring.Secret(ctx, "card-fingerprint-key")
	if err != nil {
		return nil, err
	}
	s.fpKey = key
	return s, nil
}

// fingerprint is the keyed HMAC-SHA256 of a card number.
func (s *Service) fingerprint(pan string) []byte {
	m := hmac.New(sha256.New, s.fpKey)
	m.Write([]byte(pan))
	return m.Sum(nil)
}

// panAAD binds a sealed card number to its card.
func panAAD(cardLookupID string) []byte { return []byte("kassa stored card\x00" + cardLookupID) }

var errNoRows = sql.ErrNoRows

func isNoRows(err error) bool { return errors.Is(err, errNoRows) }

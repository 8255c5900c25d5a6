// Package auth is Kassa's OAuth 2 token service: client-credential pairs, the token endpoint, the
// access tokens it issues, their revocation, and the bearer-token middleware in front of the
// transaction, customer and plan services.
package auth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
)

// DefaultRevocationPoll is how often a node reloads revocations made elsewhere (by another node or by
// the operator CLI). A revoked client's tokens stop working within this interval; the requirement is
// 60 seconds.
const DefaultRevocationPoll = 5 * time.Second

// Config configures a Service.
type Config struct {
	DB             *store.DB
	Logger         *slog.Logger
	Now            func() time.Time // defaults to time.Now
	RevocationPoll time.Duration    // defaults to DefaultRevocationPoll
	CodeTTL        time.Duration    // authorization code lifetime; defaults to DefaultCodeTTL, at most MaxCodeTTL
	// Keyring seals the token keys at rest under the key-encryption key (required): whoever reads the
	// database could otherwise forge tokens for every merchant. It also keeps the MAC key of sign-in
	// throttling.
	Keyring *envelope.Keyring
	// Metrics counts the tokens issued (nil: not counted).
	Metrics *metrics.Set
}

// Service issues and checks access tokens.
type Service struct {
	db      *store.DB
	log     *slog.Logger
	now     func() time.Time
	poll    time.Duration
	codeTTL time.Duration
	sealer  *sealer
	revoked revocations
	// gate bounds the password verifications of the sign-in page and the password grant together.
	gate        *password.Gate
	throttleKey []byte // the MAC key of sign-in throttling's subjects
	used        lastUse
	metrics     *metrics.Set
}

// NewService loads the token keys (creating the first one in a new database) and the current
// revocations.
func NewService(ctx context.Context, cfg Config) (*Service, error) {
	s := &Service{db: cfg.DB, log: cfg.Logger, now: cfg.Now, poll: cfg.RevocationPoll, codeTTL: cfg.CodeTTL, metrics: cfg.Metrics,
		gate: password.NewGate(password.GateConfig{})}
	if s.codeTTL <= 0 || s.codeTTL > MaxCodeTTL {
		s.codeTTL = DefaultCodeTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.poll <= 0 {
		s.poll = DefaultRevocationPoll
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if cfg.Keyring == nil {
		return nil, errors.New("auth: a keyring for the token keys is required")
	}
	keys, current, err := loadKeys(ctx, cfg.DB, cfg.Keyring, s.now())
	if err != nil {
		return nil, err
	}
	if s.sealer, err = newSealer(keys, current); err != nil {
		return nil, err
	}
	if err := s.loadRevocations(ctx); err != nil {
		return nil, fmt.Errorf("auth: load revocations: %w", err)
	}
	if s.throttleKey, err = cfg.Keyring.Secret(ctx, throttleSecret); err != nil {
		return nil, err
	}
	return s, nil
}

// Run reloads revocations every poll interval until ctx is done.
func (s *Service) Run(ctx context.Context) {
	clock.Every(ctx, s.poll, s.log, "reload revocations", func(ctx context.Context) error {
		return s.loadRevocations(ctx)
	})
}

func (s *Service) loadRevocations(ctx context.Context) error {
	return s.db.Read(ctx, func(q store.Querier) error { return s.revoked.load(ctx, q, s.now()) })
}

// loadKeys reads the token keys, creating key 1 when there is none. Concurrent first starts of several
// nodes agree on one key: the insert does nothing when another node got there first. Keys are stored
// sealed under ring; a key stored in clear by an earlier version is sealed in place.
func loadKeys(ctx context.Context, db *store.DB, ring *envelope.Keyring, now time.Time) (map[byte][]byte, byte, error) {
	err := db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO token_keys (id, secret, created_at) VALUES (1, $1, $2)
			ON CONFLICT (id) DO NOTHING`, ring.Seal(randomKey(), tokenKeyAAD(1)), now.UnixMilli())
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("auth: create token key: %w", err)
	}
	stored := map[byte][]byte{}
	err = db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT id, secret FROM token_keys ORDER BY id`)
		if err != nil {
			return fmt.Errorf("auth: load token keys: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var secret []byte
			if err := rows.Scan(&id, &secret); err != nil {
				return err
			}
			if id < 1 || id > 255 {
				return fmt.Errorf("auth: token key %d is malformed", id)
			}
			stored[byte(id)] = secret
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	keys := map[byte][]byte{}
	var current byte
	for id, secret := range stored {
		key := secret
		if len(secret) == 32 { // stored in clear by an earlier version: seal it now
			if err := db.Write(ctx, func(tx *store.Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE token_keys SET secret = $2 WHERE id = $1 AND secret = $3`,
					int64(id), ring.Seal(secret, tokenKeyAAD(id)), secret)
				return err
			}); err != nil {
				return nil, 0, fmt.Errorf("auth: seal token key %d: %w", id, err)
			}
		} else if key, err = ring.Open(secret, tokenKeyAAD(id)); err != nil || len(key) != 32 {
			return nil, 0, fmt.Errorf("auth: token key %d does not open under the key-encryption key", id)
		}
		keys[id] = key
		current = max(current, id)
	}
	if len(keys) == 0 {
		return nil, 0, errors.New("auth: no token key")
	}
	return keys, current, nil
}

// tokenKeyAAD binds a sealed token key to its id.
func tokenKeyAAD(id byte) []byte { return []byte{'k', 't', 'k', id} }

func randomKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

// Errors of Verify.
var (
	ErrInvalidToken = errors.New("auth: invalid token")
	ErrExpiredToken = errors.New("auth: token expired")
	ErrRevokedToken = errors.New("auth: token revoked")
)

// Verify checks an access token: its seal, its expiry and the revocations. It touches no database.
func (s *Service) Verify(tok string) (Claims, error) {
	c, err := s.sealer.open(tok)
	if err != nil {
		return Claims{}, ErrInvalidToken
	}
	if !s.now().Before(c.ExpiresAt) {
		return Claims{}, ErrExpiredToken
	}
	if s.revoked.cur.Load().has(&c) {
		return Claims{}, ErrRevokedToken
	}
	return c, nil
}

// issue seals a new access token.
func (s *Service) issue(clientID [16]byte, merchantID string, scopes Scopes, validity time.Duration) (string, Claims) {
	return s.issueClaims(Claims{ClientID: clientID, MerchantID: merchantID, Scopes: scopes}, validity)
}

// issueClaims seals a new access token carrying c, with a fresh token id, issued now and valid for
// validity.
func (s *Service) issueClaims(c Claims, validity time.Duration) (string, Claims) {
	now := s.now().Truncate(time.Second)
	c.TokenID, c.IssuedAt, c.ExpiresAt = newTokenID(), now, now.Add(validity)
	return s.sealer.seal(c), c
}

// RevokeClient revokes a client, its tokens and its grants (see the package function) and applies it
// on this node at once. A partner's API keys are the payments API's: checkout.RevokeClient revokes
// them with the client.
func (s *Service) RevokeClient(ctx context.Context, clientID string) error {
	var c client
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		if _, err := RevokeClient(ctx, tx, clientID, s.now()); err != nil {
			return err
		}
		var err error
		c, err = lookupClient(ctx, tx, clientID)
		return err
	})
	if err != nil {
		return err
	}
	s.revoked.add(kindClient, c.id)
	return nil
}

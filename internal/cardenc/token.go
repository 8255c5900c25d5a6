package cardenc

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store"
)

// Card is what a token carries, and the token it came from.
type Card struct {
	Number card.Number
	Expiry card.Expiry
	CVV    string
	// Token is the token, to be consumed by the use of the card (Token.Consume).
	Token Token
}

// Token is one card token, known by the SHA-256 of its RSA-OAEP ciphertext. OAEP encryption is
// randomized, so the hash says nothing about the card: two tokens of one card have unrelated hashes.
// The ciphertext has one encoding (strict base64url, and crypto/rsa refuses a ciphertext that is not
// below the modulus), so a token cannot be re-spelled into another identity.
type Token struct {
	hash       [sha256.Size]byte
	merchantID string
	expiresAt  time.Time // when the token is too old to open anyway
}

// Consume records in tx that the token has been used. A card token is single-use: it is consumed by
// its first successful use (sale, authorization or stored card add), recorded in the same transaction
// as the attempt; a second use answers 400 invalid_card_token, the same answer as any other unusable
// token, so that the answer tells nothing of the token; of racing uses, exactly one wins. A token used
// before is ErrInvalidToken; of racing transactions, the one that inserts the row first wins, and the
// others find it (PostgreSQL makes them wait for the winner's commit, SQLite has one writer).
func (t Token) Consume(ctx context.Context, tx *store.Tx) error {
	r, err := tx.ExecContext(ctx, `INSERT INTO used_card_tokens (token_hash, merchant_id, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (token_hash) DO NOTHING`, t.hash[:], t.merchantID, t.expiresAt.UnixMilli())
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return ErrInvalidToken
	}
	return nil
}

// Purge forgets the used tokens that are too old to open anyway.
func (s *Service) Purge(ctx context.Context) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM used_card_tokens WHERE expires_at <= $1`, s.now().UnixMilli())
		return err
	})
}

// ErrInvalidToken is the one answer to a token that cannot be used — it does not decrypt, was made
// with another merchant's key or an expired one, is too old, or carries malformed card data — so that
// no difference between those causes can serve as a decryption oracle.
var ErrInvalidToken = errors.New("cardenc: invalid card token")

// AsFault is how the APIs answer a token that cannot be used: one 400 invalid_card_token naming the
// token field, the same for every cause. Other errors pass through.
func AsFault(err error) error {
	if !errors.Is(err, ErrInvalidToken) {
		return err
	}
	return &fault.Error{Status: http.StatusBadRequest, Code: "invalid_card_token", Field: "token",
		Message: "The card token cannot be used: it may be damaged, expired, or made with another merchant's key. Encrypt the card again."}
}

// Token age limits: a token is used within a day of its making; a clock a little ahead is tolerated.
const (
	maxAge    = 24 * time.Hour
	maxFuture = time.Hour
	prefix    = "ct1."
)

// payload is the token's plaintext.
type payload struct {
	Number string `json:"n"`
	Month  string `json:"m"`
	Year   string `json:"y"`
	CVV    string `json:"c"`
	Time   int64  `json:"t"`
}

// Open decrypts a card token for merchantID. Every failure is ErrInvalidToken, after the same
// RSA work: a token naming a key that cannot be used is decrypted with a dummy key.
func (s *Service) Open(ctx context.Context, merchantID, token string) (Card, error) {
	keyID, ct, ok := split(token)
	priv := s.dummyKey()
	usable := false
	if ok {
		k, err := s.privateKey(ctx, keyID)
		switch {
		case err == nil && k.merchantID == merchantID && (k.expiresAt.IsZero() || s.now().Before(k.expiresAt)):
			priv, usable = k.priv, true
		case err != nil && ctx.Err() != nil:
			return Card{}, ctx.Err()
		}
	}
	if !ok {
		ct = make([]byte, priv.Size())
	}
	plain, err := rsa.DecryptOAEP(sha256.New(), nil, priv, ct, nil)
	if err != nil || !usable {
		return Card{}, ErrInvalidToken
	}
	c, err := s.parse(plain)
	if err != nil {
		return Card{}, ErrInvalidToken
	}
	// A token opens for at most maxAge after it was made, and it may have been made up to maxFuture
	// ahead of this clock: after that its use cannot be repeated anyway.
	c.Token = Token{hash: sha256.Sum256(ct), merchantID: merchantID, expiresAt: s.now().Add(maxAge + maxFuture)}
	return c, nil
}

// split reads "ct1.<key id>.<ciphertext>".
func split(token string) (string, []byte, bool) {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok {
		return "", nil, false
	}
	keyID, b64, ok := strings.Cut(rest, ".")
	if !ok || len(keyID) != 16 {
		return "", nil, false
	}
	ct, err := base64.RawURLEncoding.Strict().DecodeString(b64)
	if err != nil || len(ct) != keyBits/8 {
		return "", nil, false
	}
	return keyID, ct, true
}

func (s *Service) parse(plain []byte) (Card, error) {
	var p payload
	if err := json.Unmarshal(plain, &p); err != nil {
		return Card{}, err
	}
	made := time.UnixMilli(p.Time)
	now := s.now()
	if made.Before(now.Add(-maxAge)) || made.After(now.Add(maxFuture)) {
		return Card{}, errors.New("token age")
	}
	n, err := card.ParseNumber(p.Number)
	if err == nil {
		err = card.Validate(n)
	}
	if err != nil || len(p.Number) != len(n.Digits()) {
		return Card{}, errors.New("number")
	}
	exp, err := card.ParseExpiry(p.Month, p.Year)
	if err != nil {
		return Card{}, err
	}
	if err := card.ValidateCVV(p.CVV, card.BrandOf(n)); err != nil {
		return Card{}, err
	}
	return Card{Number: n, Expiry: exp, CVV: p.CVV}, nil
}

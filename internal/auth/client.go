package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// Token validity bounds of a client-credential pair. 12 hours is the spec's recommended default.
const (
	DefaultValidity = 12 * time.Hour
	MinValidity     = time.Minute
	MaxValidity     = 30 * 24 * time.Hour
)

// ErrUnknownClient is returned for a client id that does not exist.
var ErrUnknownClient = errors.New("auth: unknown client")

// Credentials is a newly created client-credential pair. The secret is shown once and never again.
type Credentials struct {
	ClientID             string `json:"client_id"`
	ClientSecret         string `json:"client_secret"`
	MerchantID           string `json:"merchant_id"`
	TokenValiditySeconds int64  `json:"token_validity_seconds"`
}

// client is a stored client-credential pair.
type client struct {
	id         [16]byte
	secretHash []byte
	merchantID string // the merchant of a merchant's client
	partnerID  string // the partner of a partner's client
	scopes     Scopes
	validity   time.Duration
	revoked    bool
}

// CreateClient stores a new client-credential pair for merchantID, inside the caller's transaction.
// The secret is 128 random bits; only its SHA-256 is stored. A slow password hash would add nothing
// against a secret of that entropy and would cost every token request dearly.
func CreateClient(ctx context.Context, tx store.Querier, merchantID string, validity time.Duration, now time.Time) (Credentials, error) {
	if validity < MinValidity || validity > MaxValidity || validity%time.Second != 0 {
		return Credentials{}, fmt.Errorf("validity must be whole seconds between %v and %v", MinValidity, MaxValidity)
	}
	id, secret, err := insertClient(ctx, tx, merchantID, "", validity, now)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{ClientID: id, ClientSecret: secret, MerchantID: merchantID, TokenValiditySeconds: int64(validity / time.Second)}, nil
}

// insertClient stores a new client of a merchant or of a partner (one of the two ids is ""), with the
// default scopes, and returns its id and secret.
func insertClient(ctx context.Context, tx store.Querier, merchantID, partnerID string, validity time.Duration, now time.Time) (string, string, error) {
	id, secret := newHex16(), newHex16()
	sum := sha256.Sum256([]byte(secret))
	_, err := tx.ExecContext(ctx, `INSERT INTO oauth_clients
		(client_id, secret_hash, merchant_id, partner_id, scopes, token_validity_seconds, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		id, sum[:], nullable(merchantID), nullable(partnerID), DefaultScopes.String(), int64(validity/time.Second), now.UnixMilli())
	if err != nil {
		return "", "", fmt.Errorf("auth: store client: %w", err)
	}
	return id, secret, nil
}

func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// RevokedClient is what revoking a client ended.
type RevokedClient struct {
	ClientID string
	// PartnerID is the partner whose client it was; "" for a merchant's client.
	PartnerID string
	// Grants counts the grants of the client that were live: partners' approvals, or a merchant's
	// password sign-ins.
	Grants int
}

// RevokeClient revokes a client in the caller's transaction: it can no longer get tokens, every node
// stops accepting the tokens it already has within one revocation poll, and every grant it holds is
// revoked, so that their refresh tokens stop at once and the merchants' approvals of it stop counting
// (PartnerScopes). Revoking a partner's client so revokes its tokens, grants and API keys within
// one revocation poll: the API keys are the payments API's, which revokes them in the same
// transaction (checkout.RevokeClient).
//
// The grants' access tokens need no revocation of their own: each carries the client's id, which the
// client's revocation covers for as long as any of them can live.
func RevokeClient(ctx context.Context, tx store.Querier, clientID string, now time.Time) (RevokedClient, error) {
	out := RevokedClient{ClientID: clientID}
	var validity int64
	var partnerID sql.NullString
	err := tx.QueryRowContext(ctx, `UPDATE oauth_clients SET revoked_at = COALESCE(revoked_at, $2)
		WHERE client_id = $1 RETURNING token_validity_seconds, partner_id`, clientID, now.UnixMilli()).Scan(&validity, &partnerID)
	if errors.Is(err, sql.ErrNoRows) {
		return out, ErrUnknownClient
	}
	if err != nil {
		return out, err
	}
	out.PartnerID = partnerID.String
	res, err := tx.ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = $2 WHERE client_id = $1 AND revoked_at IS NULL`,
		clientID, now.UnixMilli())
	if err != nil {
		return out, fmt.Errorf("auth: revoke the client's grants: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return out, err
	}
	out.Grants = int(n)
	// Once the longest token the client could hold has expired, the revocation has nothing left
	// to stop.
	expires := now.Add(time.Duration(validity) * time.Second)
	return out, recordRevocation(ctx, tx, kindClient, clientID, now, expires)
}

// lookupClient reads a client by id.
func lookupClient(ctx context.Context, q store.Querier, id string) (client, error) {
	var c client
	var scopes string
	var validity int64
	var revoked sql.NullInt64
	var merchantID, partnerID sql.NullString
	if !httpapi.Storable(id) {
		return c, ErrUnknownClient // no client is so named, and PostgreSQL would refuse to look
	}
	err := q.QueryRowContext(ctx, `SELECT secret_hash, merchant_id, partner_id, scopes, token_validity_seconds, revoked_at
		FROM oauth_clients WHERE client_id = $1`, id).Scan(&c.secretHash, &merchantID, &partnerID, &scopes, &validity, &revoked)
	c.merchantID, c.partnerID = merchantID.String, partnerID.String
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrUnknownClient
	}
	if err != nil {
		return c, err
	}
	if _, err := hex.Decode(c.id[:], []byte(id)); err != nil {
		return c, fmt.Errorf("auth: stored client id %q is not hex", id)
	}
	c.scopes, err = ParseScopes(scopes)
	if err != nil {
		return c, err
	}
	c.validity = time.Duration(validity) * time.Second
	c.revoked = revoked.Valid
	return c, nil
}

// dummySecretHash is compared against when the client does not exist, so that an unknown client id
// costs the same time as a wrong secret.
var dummySecretHash = make([]byte, sha256.Size)

// secretMatches compares the SHA-256 of secret with hash in constant time.
func secretMatches(hash []byte, secret string) bool {
	sum := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(sum[:], hash) == 1
}

// newHex16 returns 128 random bits as 32 lowercase hex characters: the shape of client ids and
// secrets in the original.
func newHex16() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// idString is the client id as stored: 32 hex characters.
func (c client) idString() string { return hex.EncodeToString(c.id[:]) }

package checkout

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
)

// keyPrefix starts every secret API key, so that a leaked one is recognisable (and scannable) as Kassa's.
const keyPrefix = "kk_"

// APIKey is a stored API key, without its secret. It belongs to a merchant's account or to a partner's
// (exactly one of MerchantID and PartnerID is set).
type APIKey struct {
	ID          string
	Hint        string // the secret's last four characters
	MerchantID  string
	PartnerID   string
	Permissions Permissions
	CreatedAt   time.Time
}

// Owner is the id of the account the key belongs to.
func (k APIKey) Owner() string {
	if k.PartnerID != "" {
		return k.PartnerID
	}
	return k.MerchantID
}

// AccountID is the key's own account: "acct_" + the merchant or partner id.
func (k APIKey) AccountID() string { return accountPrefix + k.Owner() }

// NewKey is a created key with its secret, which is shown this once and never stored.
type NewKey struct {
	APIKey
	Key string
}

const accountPrefix = "acct_"

// ErrUnknownAccount is returned for an account id that is neither a merchant's nor a partner's.
var ErrUnknownAccount = errors.New("checkout: unknown account")

// CreateKey stores a new API key of accountID ("acct_" + a merchant or partner id) with the given
// permissions, inside the caller's transaction, and records it in the audit log on behalf of
// createdBy (the API key that asked, or "" for the operator). The secret is 130 random bits; only its
// SHA-256 is stored: a slow hash adds nothing against a secret of that entropy and would cost every
// request (docs/design/auth.md, "Client secrets are hashed with SHA-256").
func CreateKey(ctx context.Context, tx *store.Tx, accountID string, perms Permissions, createdBy string, now time.Time) (NewKey, error) {
	if perms == 0 {
		return NewKey{}, fault.Invalid("permissions", "permissions must name at least one of %s", strings.Join(AllPermissions.Names(), ", "))
	}
	var k NewKey
	var err error
	if k.MerchantID, k.PartnerID, err = ownerOf(ctx, tx, accountID); err != nil {
		return NewKey{}, err
	}
	k.ID, k.Key = "key_"+rand.Text()[:24], keyPrefix+rand.Text()
	k.Hint, k.Permissions, k.CreatedAt = k.Key[len(k.Key)-4:], perms, time.UnixMilli(now.UnixMilli())
	sum := sha256.Sum256([]byte(k.Key))
	_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (id, key_hash, key_hint, merchant_id, partner_id, permissions, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, k.ID, sum[:], k.Hint, nullable(k.MerchantID), nullable(k.PartnerID), perms.String(), now.UnixMilli())
	if err != nil {
		return NewKey{}, err
	}
	return k, audit.Write(ctx, tx, audit.Record{MerchantID: k.Owner(), ClientID: createdBy, Operation: "api_key.create",
		Resource: "api_key/" + k.ID, Outcome: audit.Done, Detail: perms.String(), RequestID: httpapi.RequestID(ctx), At: now})
}

const keyColumns = `id, key_hint, COALESCE(merchant_id, ''), COALESCE(partner_id, ''), permissions, created_at`

func scanKey(s interface{ Scan(...any) error }) (APIKey, error) {
	var k APIKey
	var perms string
	var created int64
	if err := s.Scan(&k.ID, &k.Hint, &k.MerchantID, &k.PartnerID, &perms, &created); err != nil {
		return APIKey{}, err
	}
	p, err := ParsePermissions(strings.Fields(perms))
	k.Permissions, k.CreatedAt = p, time.UnixMilli(created)
	return k, err
}

// ownerOf finds the owner of accountID ("acct_" + a merchant or partner id): one of the two ids is
// set. ErrUnknownAccount when neither has it.
func ownerOf(ctx context.Context, q store.Querier, accountID string) (merchantID, partnerID string, err error) {
	id, ok := strings.CutPrefix(accountID, accountPrefix)
	if !ok {
		return "", "", ErrUnknownAccount
	}
	if _, err := merchant.Get(ctx, q, id); err == nil {
		return id, "", nil
	} else if !errors.Is(err, merchant.ErrNotFound) {
		return "", "", err
	}
	if _, err := auth.GetPartner(ctx, q, id); errors.Is(err, auth.ErrUnknownPartner) {
		return "", "", ErrUnknownAccount
	} else if err != nil {
		return "", "", err
	}
	return "", id, nil
}

// ownerCondition selects the keys of owner's account.
const ownerCondition = `(merchant_id = $1 OR partner_id = $1) AND deleted_at IS NULL`

// ListKeys returns the live keys of accountID ("acct_" + a merchant or partner id), newest first, as
// the operator's CLI lists them; ErrUnknownAccount when no merchant or partner has that account.
func ListKeys(ctx context.Context, db *store.DB, accountID string) ([]APIKey, error) {
	var merchantID, partnerID string
	err := db.Read(ctx, func(q store.Querier) error {
		var err error
		merchantID, partnerID, err = ownerOf(ctx, q, accountID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return listKeys(ctx, db, merchantID+partnerID)
}

// listKeys returns the live keys of an account, newest first.
func listKeys(ctx context.Context, db *store.DB, owner string) ([]APIKey, error) {
	out := []APIKey{}
	err := db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE `+ownerCondition+` ORDER BY created_at DESC, id`, owner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			k, err := scanKey(rows)
			if err != nil {
				return err
			}
			out = append(out, k)
		}
		return rows.Err()
	})
	return out, err
}

// deleteKey deletes one of the account's keys. It stops authenticating at once on this node, and on
// the others within the key cache's TTL.
func (s *Service) deleteKey(ctx context.Context, caller Caller, id string) (APIKey, error) {
	var gone []revokedKey
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		gone, err = revokeKeys(ctx, tx, caller.Key.ID, "", s.now(), ownerCondition+` AND id = $2`, caller.Key.Owner(), id)
		if err == nil && len(gone) == 0 {
			err = fault.NotFound("No API key %s.", id)
		}
		return err
	})
	if err != nil {
		return APIKey{}, err
	}
	s.keys.forget(gone[0].hash)
	return gone[0].APIKey, nil
}

// ErrUnknownKey is returned by RevokeKey for an id that names no live key.
var ErrUnknownKey = errors.New("checkout: unknown API key")

// RevokeKey deletes the live key id, as the operator's CLI does, with an audit record. Every node
// stops accepting it within the key cache's TTL.
func RevokeKey(ctx context.Context, db *store.DB, id string, now time.Time) (APIKey, error) {
	var gone []revokedKey
	err := db.Write(ctx, func(tx *store.Tx) error {
		var err error
		gone, err = revokeKeys(ctx, tx, "", "", now, `deleted_at IS NULL AND id = $1`, id)
		if err == nil && len(gone) == 0 {
			err = ErrUnknownKey
		}
		return err
	})
	if err != nil {
		return APIKey{}, err
	}
	return gone[0].APIKey, nil
}

// ClientRevocation is what revoking an OAuth client ended.
type ClientRevocation struct {
	auth.RevokedClient
	// APIKeys counts the partner's API keys deleted with its client.
	APIKeys int
}

// RevokeClient revokes an OAuth client and everything it holds, in one transaction: its tokens and its
// grants (auth.RevokeClient) and, for a partner's client, every live API key of the partner, each
// with an audit record. Everything the client held so stops within one revocation poll: tokens by
// the revocation set every node reloads each poll, keys and the merchants' approvals by the key cache,
// whose TTL is at most the poll.
//
// A key belongs to the partner's account, not to one of its clients, so a partner with several
// clients loses every key when any one of them is revoked: a revoked client most often means leaked
// credentials, and keys kept beside the secret are presumed leaked with it. The partner's other
// clients, and the approvals merchants gave them, stand; the operator creates new keys.
func RevokeClient(ctx context.Context, db *store.DB, clientID string, now time.Time) (ClientRevocation, error) {
	var out ClientRevocation
	err := db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if out.RevokedClient, err = auth.RevokeClient(ctx, tx, clientID, now); err != nil || out.PartnerID == "" {
			return err
		}
		gone, err := revokeKeys(ctx, tx, "", "client "+clientID+" revoked", now, `deleted_at IS NULL AND partner_id = $1`, out.PartnerID)
		out.APIKeys = len(gone)
		return err
	})
	return out, err
}

// revokedKey is a key just deleted, with the hash under which the key cache may hold it.
type revokedKey struct {
	APIKey
	hash []byte
}

// revokeKeys deletes the live keys that cond selects (with args as its $1, $2, …), in tx, and records
// each in the audit log on behalf of by (the API key that asked, or "" for the operator), with detail.
func revokeKeys(ctx context.Context, tx *store.Tx, by, detail string, now time.Time, cond string, args ...any) ([]revokedKey, error) {
	at := "$" + strconv.Itoa(len(args)+1)
	rows, err := tx.QueryContext(ctx, `UPDATE api_keys SET deleted_at = `+at+` WHERE `+cond+` RETURNING `+keyColumns+`, key_hash`,
		append(args, now.UnixMilli())...)
	if err != nil {
		return nil, err
	}
	var gone []revokedKey
	for rows.Next() {
		var k revokedKey
		if k.APIKey, err = scanKey(scanInto{rows, &k.hash}); err != nil {
			rows.Close()
			return nil, err
		}
		gone = append(gone, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, k := range gone {
		if err := audit.Write(ctx, tx, audit.Record{MerchantID: k.Owner(), ClientID: by, Operation: "api_key.delete",
			Resource: "api_key/" + k.ID, Outcome: audit.Done, Detail: detail, RequestID: httpapi.RequestID(ctx), At: now}); err != nil {
			return nil, err
		}
	}
	return gone, nil
}

// keyCache serves API keys from memory for the hot path: each key is read from the database at most
// once per TTL, so a key deleted on another node stops working there within the TTL, and one deleted
// here at once. Unknown keys are not cached: each costs one indexed read, like any other wrong key.
type keyCache struct {
	db  *store.DB
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	keys     map[[sha256.Size]byte]cachedKey
	partners map[[2]string]cachedScopes // (partner, merchant) -> the scopes the merchant approved
}

type cachedKey struct {
	key     APIKey
	hash    [sha256.Size]byte
	fetched time.Time
}

// maxKeyLen bounds what is hashed: a real key is 29 characters.
const maxKeyLen = 200

// dummyHash is what a key is compared with when no stored key matches, so that every wrong key costs
// the same: one hash, one indexed read, one constant-time comparison.
var dummyHash [sha256.Size]byte

// lookup returns the live key whose secret is secret.
func (c *keyCache) lookup(ctx context.Context, secret string) (APIKey, bool, error) {
	if secret == "" || len(secret) > maxKeyLen {
		return APIKey{}, false, nil
	}
	sum := sha256.Sum256([]byte(secret))
	now := c.now()
	c.mu.Lock()
	ck, ok := c.keys[sum]
	c.mu.Unlock()
	if ok && now.Sub(ck.fetched) < c.ttl {
		return ck.key, subtle.ConstantTimeCompare(ck.hash[:], sum[:]) == 1, nil
	}
	var k APIKey
	var stored []byte
	err := c.db.Read(ctx, func(q store.Querier) error {
		row := q.QueryRowContext(ctx, `SELECT `+keyColumns+`, key_hash FROM api_keys WHERE key_hash = $1 AND deleted_at IS NULL`, sum[:])
		var err error
		k, err = scanKey(scanInto{row, &stored})
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		subtle.ConstantTimeCompare(dummyHash[:], sum[:])
		c.forget(sum[:])
		return APIKey{}, false, nil
	}
	if err != nil {
		return APIKey{}, false, err
	}
	if subtle.ConstantTimeCompare(stored, sum[:]) != 1 {
		return APIKey{}, false, nil
	}
	c.mu.Lock()
	c.keys[sum] = cachedKey{key: k, hash: sum, fetched: now}
	c.mu.Unlock()
	return k, true, nil
}

// forget drops a key from the cache.
func (c *keyCache) forget(hash []byte) {
	var h [sha256.Size]byte
	if copy(h[:], hash) != len(h) {
		return
	}
	c.mu.Lock()
	delete(c.keys, h)
	c.mu.Unlock()
}

// partnerScopes returns the scopes merchantID has approved for partnerID (auth.PartnerScopes): none
// when it has not authorized the partner, or has revoked it. An answer with scopes is remembered for
// the TTL, so that a revocation applies within it; none is never remembered, so that guessing merchant
// ids fills no cache.
func (c *keyCache) partnerScopes(ctx context.Context, partnerID, merchantID string) (auth.Scopes, error) {
	pair := [2]string{partnerID, merchantID}
	now := c.now()
	c.mu.Lock()
	seen, ok := c.partners[pair]
	c.mu.Unlock()
	if ok && now.Sub(seen.fetched) < c.ttl {
		return seen.scopes, nil
	}
	var scopes auth.Scopes
	err := c.db.Read(ctx, func(q store.Querier) error {
		var err error
		scopes, err = auth.PartnerScopes(ctx, q, partnerID, merchantID)
		return err
	})
	c.mu.Lock()
	if err == nil && scopes != 0 {
		c.partners[pair] = cachedScopes{scopes: scopes, fetched: now}
	} else {
		delete(c.partners, pair)
	}
	c.mu.Unlock()
	return scopes, err
}

// cachedScopes is a merchant's approval of a partner as last read.
type cachedScopes struct {
	scopes  auth.Scopes
	fetched time.Time
}

// scanInto scans a row into the destinations of a scanner function followed by one more.
type scanInto struct {
	row   interface{ Scan(...any) error }
	extra *[]byte
}

func (s scanInto) Scan(dest ...any) error { return s.row.Scan(append(dest, s.extra)...) }

func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// unauthorized is the 401 of a missing or unknown API key.
func unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("WWW-Authenticate", `ApiKey realm="kassa", header="payments-api-key"`)
	httpapi.WriteError(w, r, fault.New(http.StatusUnauthorized, "invalid_api_key", "%s", msg))
}

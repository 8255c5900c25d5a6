// Package envelope keeps secrets at rest: each is sealed with AES-256-GCM under a data key, and data
// keys are stored wrapped under the server's key-encryption key (KEK), which lives outside the
// database, in a file or the environment (PCI DSS 3.5, 3.6). Reading the database alone reveals no
// secret; replacing the KEK re-wraps the data keys and touches no secret.
package envelope

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// KEK is a key-encryption key: 32 bytes, and an id derived from them that names it in the database.
type KEK struct {
	ID   string
	aead cipher.AEAD
}

// ParseKEK reads a KEK written as 64 hex characters or as the standard base64 of 32 bytes.
func ParseKEK(text string) (*KEK, error) {
	text = strings.TrimSpace(text)
	raw, err := hex.DecodeString(text)
	if err != nil || len(raw) != 32 {
		raw, err = base64.StdEncoding.DecodeString(text)
	}
	if err != nil || len(raw) != 32 {
		return nil, errors.New("envelope: a key-encryption key is 32 bytes, written as 64 hex characters or in base64")
	}
	return newKEK(raw)
}

// NewKEKText returns a fresh random KEK as 64 hex characters.
func NewKEKText() string {
	raw := make([]byte, 32)
	rand.Read(raw)
	return hex.EncodeToString(raw)
}

func newKEK(raw []byte) (*KEK, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	id := sha256.Sum256(append([]byte("kassa kek id\x00"), raw...))
	return &KEK{ID: hex.EncodeToString(id[:8]), aead: aead}, nil
}

// Keyring seals and opens secrets with data keys wrapped under a KEK.
type Keyring struct {
	db  *store.DB
	kek *KEK
	now func() time.Time

	mu      sync.RWMutex
	current int64
	keys    map[int64]cipher.AEAD
}

// ErrWrongKEK is returned when the database's data keys were wrapped under another KEK.
var ErrWrongKEK = errors.New("envelope: the data keys were wrapped under another key-encryption key")

// NewKeyring loads the data keys, creating the first one in a new database, and makes the keyring the
// database's sealer (store.DB.SetSealer). A data key wrapped under another KEK is an error: the server
// must not run with the wrong key.
func NewKeyring(ctx context.Context, db *store.DB, kek *KEK, now func() time.Time) (*Keyring, error) {
	if now == nil {
		now = time.Now
	}
	k := &Keyring{db: db, kek: kek, now: now}
	err := db.Read(ctx, func(q store.Querier) error {
		var err error
		k.keys, k.current, err = unwrapAll(ctx, q, kek)
		return err
	})
	if err != nil {
		return nil, err
	}
	if k.current == 0 {
		if err := k.newDataKey(ctx); err != nil {
			return nil, err
		}
	}
	db.SetSealer(k)
	return k, nil
}

// CheckKEK reports how many data keys the database that q reads holds, and fails unless every one of
// them opens under kek: what a copy of a database needs before a server can use it (a server refuses
// to start otherwise, and the secrets sealed under those keys could not be read).
func CheckKEK(ctx context.Context, q store.Querier, kek *KEK) (int, error) {
	keys, _, err := unwrapAll(ctx, q, kek)
	return len(keys), err
}

// unwrapAll loads the data keys through q and unwraps each under kek; current is the newest one's id
// (0 when there is none). A data key wrapped under another KEK is an error.
func unwrapAll(ctx context.Context, q store.Querier, kek *KEK) (keys map[int64]cipher.AEAD, current int64, err error) {
	all, err := loadWrapped(ctx, q)
	if err != nil {
		return nil, 0, fmt.Errorf("envelope: load data keys: %w", err)
	}
	keys = map[int64]cipher.AEAD{}
	for _, w := range all {
		if w.kekID != kek.ID {
			return nil, 0, fmt.Errorf("%w (data key %d is under key %s; the key given is %s)", ErrWrongKEK, w.id, w.kekID, kek.ID)
		}
		raw, err := kek.aead.Open(nil, nil, w.key, dataKeyAAD(w.id))
		if err != nil {
			return nil, 0, fmt.Errorf("envelope: data key %d does not open under key %s", w.id, kek.ID)
		}
		aead, err := aeadOf(raw)
		if err != nil {
			return nil, 0, err
		}
		keys[w.id], current = aead, w.id
	}
	return keys, current, nil
}

// wrappedKey is a row of data_keys.
type wrappedKey struct {
	id    int64
	kekID string
	key   []byte
}

func loadWrapped(ctx context.Context, q store.Querier) ([]wrappedKey, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, kek_id, wrapped FROM data_keys ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all []wrappedKey
	for rows.Next() {
		var w wrappedKey
		if err := rows.Scan(&w.id, &w.kekID, &w.key); err != nil {
			return nil, err
		}
		all = append(all, w)
	}
	return all, rows.Err()
}

// KEKID names the KEK the keyring wraps its data keys under.
func (k *Keyring) KEKID() string { return k.kek.ID }

func (k *Keyring) newDataKey(ctx context.Context) error {
	raw := make([]byte, 32)
	rand.Read(raw)
	var id int64
	err := k.db.Write(ctx, func(tx *store.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO data_keys (kek_id, wrapped, created_at) VALUES ($1, $2, $3) RETURNING id`,
			k.kek.ID, []byte("pending"), k.now().UnixMilli()).Scan(&id)
	})
	if err != nil {
		return fmt.Errorf("envelope: store data key: %w", err)
	}
	// The wrap binds the data key to its id, so the row must exist before the key can be wrapped.
	err = k.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE data_keys SET wrapped = $2 WHERE id = $1`, id, k.wrap(id, raw))
		return err
	})
	if err != nil {
		return err
	}
	aead, err := aeadOf(raw)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.keys[id], k.current = aead, id
	k.mu.Unlock()
	return nil
}

func (k *Keyring) wrap(id int64, raw []byte) []byte {
	return k.kek.aead.Seal(nil, nil, raw, dataKeyAAD(id))
}

func dataKeyAAD(id int64) []byte { return binary.AppendVarint([]byte("kassa data key\x00"), id) }

func aeadOf(raw []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(block)
}

// A sealed secret is
//
//	format (1 byte, 1) | data key id (uvarint) | nonce | ciphertext | tag
//
// with aad, the caller's context (what the secret is and whose), authenticated but not stored.
const sealedFormat = 1

// ErrOpen is returned for a sealed secret that does not open: damaged, or sealed for another context.
var ErrOpen = errors.New("envelope: sealed data does not open")

// Seal encrypts plaintext under the current data key, bound to aad.
func (k *Keyring) Seal(plaintext, aad []byte) []byte {
	k.mu.RLock()
	id, aead := k.current, k.keys[k.current]
	k.mu.RUnlock()
	out := binary.AppendUvarint([]byte{sealedFormat}, uint64(id))
	return aead.Seal(out, nil, plaintext, aad)
}

// Open decrypts what Seal sealed with the same aad.
func (k *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) < 2 || sealed[0] != sealedFormat {
		return nil, ErrOpen
	}
	id, n := binary.Uvarint(sealed[1:])
	if n <= 0 {
		return nil, ErrOpen
	}
	k.mu.RLock()
	aead, ok := k.keys[int64(id)]
	k.mu.RUnlock()
	if !ok {
		return nil, ErrOpen
	}
	out, err := aead.Open(nil, nil, sealed[1+n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// Secret returns the server secret called name: 32 random bytes, created the first time any node asks
// for it and the same on every node of a cluster afterwards. It is stored sealed under the keyring
// (the row of vault_secrets holds no secret in clear), and survives a change of the key-encryption
// key, which re-wraps only data keys. Keys for keyed MACs (card fingerprints, request fingerprints)
// are server secrets: each purpose has its own name, so that no MAC of one purpose can be compared
// with another's.
func (k *Keyring) Secret(ctx context.Context, name string) ([]byte, error) {
	aad := []byte("kassa vault secret\x00" + name)
	fresh := make([]byte, 32)
	rand.Read(fresh)
	err := k.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO vault_secrets (name, sealed, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO NOTHING`, name, k.Seal(fresh, aad), k.now().UnixMilli())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("envelope: store secret %s: %w", name, err)
	}
	var sealed []byte
	err = k.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT sealed FROM vault_secrets WHERE name = $1`, name).Scan(&sealed)
	})
	if err != nil {
		return nil, fmt.Errorf("envelope: load secret %s: %w", name, err)
	}
	return k.Open(sealed, aad)
}

// Rewrap re-wraps every data key of the database from the KEK from to the KEK to, in one transaction,
// and returns how many it re-wrapped. Running servers keep working: they hold the data keys unwrapped;
// once it is done they must be restarted with the new KEK (a server started with the old one refuses
// to start). Keys already under to are left as they are, so an interrupted rotation can be repeated.
func Rewrap(ctx context.Context, db *store.DB, from, to *KEK) (int, error) {
	n := 0
	err := db.Write(ctx, func(tx *store.Tx) error {
		n = 0
		all, err := loadWrapped(ctx, tx)
		if err != nil {
			return err
		}
		for _, r := range all {
			if r.kekID == to.ID {
				continue
			}
			if r.kekID != from.ID {
				return fmt.Errorf("%w (data key %d is under key %s, neither the current %s nor the new %s)", ErrWrongKEK, r.id, r.kekID, from.ID, to.ID)
			}
			raw, err := from.aead.Open(nil, nil, r.key, dataKeyAAD(r.id))
			if err != nil {
				return fmt.Errorf("envelope: data key %d does not open under key %s", r.id, from.ID)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE data_keys SET kek_id = $2, wrapped = $3 WHERE id = $1`,
				r.id, to.ID, to.aead.Seal(nil, nil, raw, dataKeyAAD(r.id))); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

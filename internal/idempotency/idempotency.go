// Package idempotency makes POST requests safe to retry. A request with an Idempotency-Key header is
// recorded for 24 hours per principal — the account it acts for and the credential that sent it — so
// that a retry by the same credential with the same key and body replays the first response (same
// status and body, plus Idempotent-Replayed: true) without running the handler again; the same key
// with another body is a 422; a key whose first request is still running is a 409. An answer that is
// not the request's own (a 5xx, a 429, a 409 with Retry-After: something it waits on is in progress)
// is not recorded: the retry runs afresh. Another credential,
// even of the same account, never meets the record: its request with the same key runs as its own,
// through its own permission checks: every record is scoped to the account and the credential that
// made it, so that a key cannot replay another credential's answer.
//
// A record holds no secret in clear: the request is known by a keyed MAC under a server secret, never
// by a plain hash of a body that may carry a card number and CVV, and the response body (which may
// carry an API key or a hosted page's URL) is sealed under the envelope keyring.
//
// This layer gives exact replay. The ledger adds the guarantee that matters for money: the key,
// qualified by the credential (Key), is stored on the transaction it created, unique per merchant, so
// that even a retry after a crash (when the first response was never recorded here) finds that
// transaction instead of charging again.
package idempotency

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"hash"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// Defaults of Config.
const (
	DefaultRetention = 24 * time.Hour
	// DefaultLock is how long a first request may run before a retry may take it over, on the
	// assumption that the process running it died. It exceeds every timeout of a request.
	DefaultLock = 2 * time.Minute
	maxKeyLen   = 255
	// macSecret names the server secret (envelope.Keyring.Secret) under which requests are MACed.
	macSecret = "idempotency-request-mac"
)

// Config configures a Store.
type Config struct {
	DB *store.DB
	// Keyring seals the recorded responses and keeps the request MAC's secret.
	Keyring   *envelope.Keyring
	Now       func() time.Time
	Retention time.Duration
	Lock      time.Duration
}

// Store keeps idempotency records.
type Store struct {
	db        *store.DB
	ring      *envelope.Keyring
	macKey    []byte
	now       func() time.Time
	retention time.Duration
	lock      time.Duration
}

// New returns a Store, loading the request MAC's secret (creating it in a new database).
func New(ctx context.Context, cfg Config) (*Store, error) {
	s := &Store{db: cfg.DB, ring: cfg.Keyring, now: cfg.Now, retention: cfg.Retention, lock: cfg.Lock}
	if s.now == nil {
		s.now = time.Now
	}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	if s.lock <= 0 {
		s.lock = DefaultLock
	}
	key, err := s.ring.Secret(ctx, macSecret)
	if err != nil {
		return nil, err
	}
	s.macKey = key
	return s, nil
}

type keyCtx struct{}

// Key returns the idempotency key of the request of ctx qualified by the credential that sent it
// ("<credential>/<key>"), or "" for a request without one. The ledger binds this to the transaction
// the request created, so that two credentials of one merchant never find each other's transaction.
// It contains no space, so it never equals a ledger key that checkout derives (those have spaces), and
// it begins with the credential's kind ("client:", "key:"), so it never equals one that
// billing derives ("sub-…").
func Key(ctx context.Context) string {
	k, _ := ctx.Value(keyCtx{}).(string)
	return k
}

// Middleware applies idempotency to POST requests that carry the header, per principal
// (httpapi.PrincipalFrom): it must run after the request's authentication.
func (s *Store) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(Header)
		if r.Method != http.MethodPost || key == "" {
			next.ServeHTTP(w, r)
			return
		}
		if err := validKey(key); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		p, ok := httpapi.PrincipalFrom(r.Context())
		if !ok {
			httpapi.WriteError(w, r, errors.New("idempotency: the request has no principal; authenticate before this middleware"))
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			httpapi.WriteError(w, r, httpapi.BodyError(err))
			return
		}
		rec := record{scope: p.String(), key: key}
		mac := s.mac(rec, []byte(r.Method), []byte(r.URL.Path), []byte(r.URL.RawQuery), body)

		replay, err := s.claim(r.Context(), &rec, mac)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if replay != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store") // the body may carry a secret (an API key, a page's URL)
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(replay.status)
			w.Write(replay.body)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		out := &recorder{header: w.Header()}
		next.ServeHTTP(out, r.WithContext(context.WithValue(r.Context(), keyCtx{}, p.Credential+"/"+key)))
		if out.status == 0 {
			out.status = http.StatusOK
		}
		// The record outlives a client that went away: finish it on a context of its own.
		ctx := context.WithoutCancel(r.Context())
		if out.status >= 500 || out.status == http.StatusTooManyRequests || (out.status == http.StatusConflict && out.header.Get("Retry-After") != "") {
			// A failure on our side, a velocity limit's refusal (the request did not run), or a
			// conflict that passes (fault.Busy: what the request waits on, such as its own attempt
			// under this key, is still in progress): either way the client's retry with the same key
			// must run afresh, not replay the refusal. Replaying "still being processed; retry
			// shortly" would say it for ever, after the operation has ended.
			err = s.release(ctx, rec)
		} else {
			err = s.complete(ctx, rec, out.status, out.body.Bytes())
		}
		if err != nil {
			httpapi.Logger(ctx).ErrorContext(ctx, "record idempotent response", "err", err)
		}
		w.WriteHeader(out.status)
		w.Write(out.body.Bytes())
	})
}

// Once gives a request that is not an API call the same guarantee under the same records: the
// dashboard's forms, whose key is a hidden field of the form (one per form shown) rather than a
// header. The first call of principal p with key runs do and records the result it returns; a later
// call with the same key and the same request returns that result without running do (replayed
// true); the same key with another request is a 422 idempotency_key_reused, and a call while the first
// still runs a 409 idempotency_key_in_use (fault.Busy). When do fails nothing is recorded, so that a
// form refused for a field can be corrected and sent again with its key. The result is sealed like a
// recorded response.
func (s *Store) Once(ctx context.Context, p httpapi.Principal, key string, request []byte, do func() ([]byte, error)) ([]byte, bool, error) {
	if err := validKey(key); err != nil {
		return nil, false, err
	}
	rec := record{scope: p.String(), key: key}
	replay, err := s.claim(ctx, &rec, s.mac(rec, request))
	switch {
	case err != nil:
		return nil, false, err
	case replay != nil:
		return replay.body, true, nil
	}
	result, err := do()
	// The record outlives a client that went away: finish it on a context of its own.
	done := context.WithoutCancel(ctx)
	if err != nil {
		if rerr := s.release(done, rec); rerr != nil {
			httpapi.Logger(ctx).ErrorContext(ctx, "release an idempotency key", "err", rerr)
		}
		return nil, false, err
	}
	if err := s.complete(done, rec, http.StatusOK, result); err != nil {
		// Done, and said so: only a retry would run it again, as after a lost API response's record.
		httpapi.Logger(ctx).ErrorContext(ctx, "record an idempotent result", "err", err)
	}
	return result, false, nil
}

func validKey(k string) error {
	if len(k) > maxKeyLen {
		return fault.Invalid(Header, "the Idempotency-Key header must be at most %d characters", maxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return fault.Invalid(Header, "the Idempotency-Key header must be printable ASCII without spaces")
		}
	}
	return nil
}

// record names one idempotency record: the principal's scope (httpapi.Principal.String) and the key;
// and, once claimed, until when the claim locks it (Unix milliseconds).
type record struct {
	scope, key  string
	lockedUntil int64
}

// mac is the request's fingerprint: HMAC-SHA256, under a server secret sealed under the KEK, of the
// record's name and the request's parts (an API request's method, path, query and body), each
// length-prefixed. It is a keyed MAC, never a plain hash of card data: a plain hash of a body whose
// card number is known but for a few digits, and whose CVV has three or four, falls to a brute force
// in seconds; without the secret there is nothing to test guesses against. The record's name is in
// it too, so that equal fingerprints of two records say nothing.
func (s *Store) mac(rec record, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, s.macKey)
	writePart(m, []byte(rec.scope))
	writePart(m, []byte(rec.key))
	for _, part := range parts {
		writePart(m, part)
	}
	return m.Sum(nil)
}

func writePart(h hash.Hash, b []byte) {
	h.Write(binary.AppendUvarint(nil, uint64(len(b))))
	h.Write(b)
}

// aad binds a sealed response to its record and status: it opens for no other.
func (rec record) aad(status int) []byte {
	return []byte("kassa idempotent response\x00" + rec.scope + "\x00" + rec.key + "\x00" + strconv.Itoa(status))
}

type stored struct {
	status int
	body   []byte
}

// claim records the key as running, or says why the request must not run: a replay, a mismatch or a
// request still running. The record is taken by a compare-and-set, an upsert that changes only a
// record expired or of a request that died, so that of requests that all found no record (on
// PostgreSQL, where each reads before any inserts) one runs and the others are told it is running.
//
// A claim whose commit's answer was lost (store.DB.InDoubt) may hold the key: it is
// withdrawn (withdraw) before the request is answered 503, so that the retry runs rather than being
// told the key is in use until the lock ends.
func (s *Store) claim(ctx context.Context, rec *record, mac []byte) (*stored, error) {
	now := s.now()
	rec.lockedUntil = now.Add(s.lock).UnixMilli()
	var replay *stored
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		replay = nil
		var prevMAC, sealed []byte
		var status sql.NullInt64
		var lockedUntil, expiresAt int64
		err := tx.QueryRowContext(ctx, `SELECT request_mac, status, body, locked_until, expires_at
			FROM idempotency_keys WHERE scope = $1 AND idem_key = $2`, rec.scope, rec.key).
			Scan(&prevMAC, &status, &sealed, &lockedUntil, &expiresAt)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case expiresAt <= now.UnixMilli():
			// An expired record is as good as none.
		case !hmac.Equal(prevMAC, mac):
			return fault.New(http.StatusUnprocessableEntity, "idempotency_key_reused",
				"This Idempotency-Key was used with a different request; use a new key for a new request.")
		case status.Valid:
			body, err := s.ring.Open(sealed, rec.aad(int(status.Int64)))
			if err != nil {
				return err
			}
			replay = &stored{status: int(status.Int64), body: body}
			return nil
		case lockedUntil > now.UnixMilli():
			return inUse()
		}
		r, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (scope, idem_key, request_mac, status, body, locked_until, expires_at)
			VALUES ($1, $2, $3, NULL, NULL, $4, $5)
			ON CONFLICT (scope, idem_key) DO UPDATE SET request_mac = excluded.request_mac, status = NULL, body = NULL,
				locked_until = excluded.locked_until, expires_at = excluded.expires_at
			WHERE idempotency_keys.expires_at <= $6 OR (idempotency_keys.status IS NULL AND idempotency_keys.locked_until <= $6)`,
			rec.scope, rec.key, mac, rec.lockedUntil, now.Add(s.retention).UnixMilli(), now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err == nil && n == 0 {
			// Another request took the key between the read and the upsert: it runs, this one waits.
			err = inUse()
		}
		return err
	})
	if s.db.InDoubt(err) {
		ctx := context.WithoutCancel(ctx)
		s.settle(*rec, func() error {
			return s.db.Write(ctx, func(tx *store.Tx) error {
				// Only this claim's record: its request's MAC, still running, locked until this claim's time.
				_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE scope = $1 AND idem_key = $2
					AND request_mac = $3 AND status IS NULL AND locked_until = $4`, rec.scope, rec.key, mac, rec.lockedUntil)
				return err
			})
		})
	}
	return replay, err
}

// settle makes write, which changes nothing when made a second time, until the database answers it:
// once now, and again while the database is not reached or its answer is lost, until rec's lock ends
// (store.DB.Again). A record left running (a claim, a response or a release whose commit is in doubt)
// would tell the retry of its request the key is in use until then. The lock is read in the store's
// time and waited for in real time. It returns the error of the last run.
func (s *Store) settle(rec record, write func() error) error {
	deadline := time.Now().Add(time.UnixMilli(rec.lockedUntil).Sub(s.now()))
	return s.db.Again(deadline, write(), write)
}

// inUse is the refusal of a request whose key's first request is still running.
func inUse() error {
	return fault.Busy("idempotency_key_in_use", "A request with this Idempotency-Key is still being processed; retry after it completes.")
}

// complete records the response, its body sealed under the vault's envelope encryption: it may carry
// an API key or a hosted page's URL. It and release change the record only while it is rec's claim
// (locked until its time), so that made again after a commit whose answer was lost (settle) they
// never touch a later request's claim of the key.
func (s *Store) complete(ctx context.Context, rec record, status int, body []byte) error {
	sealed := s.ring.Seal(body, rec.aad(status))
	return s.settle(rec, func() error {
		return s.db.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET status = $3, body = $4 WHERE scope = $1 AND idem_key = $2
				AND locked_until = $5`, rec.scope, rec.key, status, sealed, rec.lockedUntil)
			return err
		})
	})
}

func (s *Store) release(ctx context.Context, rec record) error {
	return s.settle(rec, func() error {
		return s.db.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE scope = $1 AND idem_key = $2 AND status IS NULL
				AND locked_until = $3`, rec.scope, rec.key, rec.lockedUntil)
			return err
		})
	})
}

// ReleaseAll frees the keys of every request still marked running. Only a single server may call it,
// at start-up, when no request of a previous process can be running.
func (s *Store) ReleaseAll(ctx context.Context) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET locked_until = 0 WHERE status IS NULL`)
		return err
	})
}

// Purge deletes records older than the retention.
func (s *Store) Purge(ctx context.Context) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1`, s.now().UnixMilli())
		return err
	})
}

// recorder holds a response until it has been recorded.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

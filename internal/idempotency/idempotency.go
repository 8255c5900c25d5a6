// Package idempotency makes POST requests safe to retry. A request with an Idempotency-Key header is
// recorded per merchant for 24 hours: a retry with the same key and body replays the first response
// (same status and body, plus Idempotent-Replayed: true) without running the handler again; the same
// key with another body is a 422; a key whose first request is still running is a 409.
//
// This layer gives exact replay. The ledger adds the guarantee that matters for money: the key is
// stored on the transaction it created, unique per merchant, so that even a retry after a crash (when
// the first response was never recorded here) finds that transaction instead of charging again.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"time"

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
)

// Config configures a Store.
type Config struct {
	DB        *store.DB
	Now       func() time.Time
	Retention time.Duration
	Lock      time.Duration
}

// Store keeps idempotency records.
type Store struct {
	db        *store.DB
	now       func() time.Time
	retention time.Duration
	lock      time.Duration
}

// New returns a Store.
func New(cfg Config) *Store {
	s := &Store{db: cfg.DB, now: cfg.Now, retention: cfg.Retention, lock: cfg.Lock}
	if s.now == nil {
		s.now = time.Now
	}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	if s.lock <= 0 {
		s.lock = DefaultLock
	}
	return s
}

type keyCtx struct{}

// Key returns the idempotency key of the request of ctx, or "".
func Key(ctx context.Context) string {
	k, _ := ctx.Value(keyCtx{}).(string)
	return k
}

// Middleware applies idempotency to POST requests that carry the header. scope names the merchant
// the key belongs to; keys of different merchants never meet.
func (s *Store) Middleware(scope func(*http.Request) string, next http.Handler) http.Handler {
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
		body, err := io.ReadAll(r.Body)
		if err != nil {
			httpapi.WriteError(w, r, httpapi.BodyError(err))
			return
		}
		h := sha256.New()
		io.WriteString(h, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+"\n")
		h.Write(body)
		hash := h.Sum(nil)
		merchant := scope(r)

		replay, err := s.claim(r.Context(), merchant, key, hash)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if replay != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(replay.status)
			w.Write(replay.body)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recorder{header: w.Header()}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), keyCtx{}, key)))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		// The record outlives a client that went away: finish it on a context of its own.
		ctx := context.WithoutCancel(r.Context())
		if rec.status >= 500 || rec.status == http.StatusTooManyRequests {
			// A failure on our side, or a velocity limit's refusal (the request did not run): either
			// way the client's retry with the same key must run afresh, not replay the refusal.
			err = s.release(ctx, merchant, key)
		} else {
			err = s.complete(ctx, merchant, key, rec.status, rec.body.Bytes())
		}
		if err != nil {
			httpapi.Logger(ctx).ErrorContext(ctx, "record idempotent response", "err", err)
		}
		w.WriteHeader(rec.status)
		w.Write(rec.body.Bytes())
	})
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

type stored struct {
	status int
	body   []byte
}

// claim records the key as running, or says why the request must not run: a replay, a mismatch or a
// request still running.
func (s *Store) claim(ctx context.Context, merchant, key string, hash []byte) (*stored, error) {
	now := s.now()
	var replay *stored
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		replay = nil
		var prevHash, body []byte
		var status sql.NullInt64
		var lockedUntil, expiresAt int64
		err := tx.QueryRowContext(ctx, `SELECT request_hash, status, body, locked_until, expires_at
			FROM idempotency_keys WHERE merchant_id = $1 AND idem_key = $2`, merchant, key).
			Scan(&prevHash, &status, &body, &lockedUntil, &expiresAt)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case expiresAt <= now.UnixMilli():
			// An expired record is as good as none.
		case !bytes.Equal(prevHash, hash):
			return fault.New(http.StatusUnprocessableEntity, "idempotency_key_reused",
				"This Idempotency-Key was used with a different request; use a new key for a new request.")
		case status.Valid:
			replay = &stored{status: int(status.Int64), body: body}
			return nil
		case lockedUntil > now.UnixMilli():
			return fault.Conflict("idempotency_key_in_use",
				"A request with this Idempotency-Key is still being processed; retry after it completes.")
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO idempotency_keys (merchant_id, idem_key, request_hash, status, body, locked_until, expires_at)
			VALUES ($1, $2, $3, NULL, NULL, $4, $5)
			ON CONFLICT (merchant_id, idem_key) DO UPDATE SET request_hash = excluded.request_hash, status = NULL, body = NULL,
				locked_until = excluded.locked_until, expires_at = excluded.expires_at`,
			merchant, key, hash, now.Add(s.lock).UnixMilli(), now.Add(s.retention).UnixMilli())
		return err
	})
	return replay, err
}

func (s *Store) complete(ctx context.Context, merchant, key string, status int, body []byte) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET status = $3, body = $4 WHERE merchant_id = $1 AND idem_key = $2`,
			merchant, key, status, body)
		return err
	})
}

func (s *Store) release(ctx context.Context, merchant, key string) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE merchant_id = $1 AND idem_key = $2`, merchant, key)
		return err
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

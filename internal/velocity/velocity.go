// Package velocity throttles card testing: how often one card and one credential
// may be declined, one payment intent fail its confirmation and one API key create hosted-page
// sessions, each within a window, and how many requests a second one credential may send. Every
// limit is a merchant setting (Limits), and a refusal is a 429 rate_limited — or, for a card, a
// decline that never reaches the processor — that reports the limit in its headers.
//
// A windowed count lives in the database, one row per subject, counted by one conditional upsert that
// returns the count of the current window: the nodes of a PostgreSQL cluster share counts without a
// read of their own. A subject that has used up its quota is remembered in memory until its window
// ends, so the check before a payment costs no database round trip. A node learns of a subject's
// count at its own next counted event, so over a cluster each node lets through at most about one
// event more than the quota (and what was already running). The request rate is a token bucket per
// credential in each process (golang.org/x/time/rate), and so are the limits of the public links
// (PublicLink): per link and per client address.
package velocity

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// DeclineCode is the decline code of a payment that the card's limit declined without asking the
// processor.
const DeclineCode = "card_velocity_exceeded"

// Config configures a Limiter.
type Config struct {
	DB *store.DB
	// Keyring keeps the server secret under which card numbers are fingerprinted.
	Keyring *envelope.Keyring
	Now     func() time.Time
}

// Limiter keeps the velocity limits of one node.
type Limiter struct {
	db           *store.DB
	fingerprints sync.Pool // of HMAC-SHA256 under the card fingerprint key, reset for each use
	now          func() time.Time

	mu    sync.RWMutex
	used  map[string]usedUp // subjects that have used up their quota, until their window ends
	nUsed atomic.Int64      // len(used), read without the lock

	principals buckets[httpapi.Principal] // request rates (Requests)
	addresses  buckets[netip.Addr]        // public links' requests per client address (PublicLink)
	links      buckets[string]            // public links' requests per link (PublicLink)
}

// usedUp is a subject's count when it reached its quota, and the end of that window.
type usedUp struct {
	count int
	until time.Time
}

// New returns a Limiter. The card fingerprint key is a server secret of its own
// ("velocity-card-key"), not the vault's: no counter's fingerprint matches a stored card's.
func New(ctx context.Context, cfg Config) (*Limiter, error) {
	l := &Limiter{db: cfg.DB, now: cfg.Now, used: map[string]usedUp{}}
	if l.now == nil {
		l.now = time.Now
	}
	key, err := cfg.Keyring.Secret(ctx, "velocity-card-key")
	l.fingerprints.New = func() any { return hmac.New(sha256.New, key) }
	return l, err
}

// A Subject is what one windowed limit counts: one card at one merchant, one credential, one payment
// intent, one API key's sessions. The zero Subject is no one: checking or counting it does nothing
// (a subscription's charge has no credential).
type Subject struct {
	policy *policy
	key    string // the policy's name, a space, and the subject's own key: its counter's row
	// A card's key is its keyed fingerprint, computed only when it is needed (keyOf): while no
	// subject of this node is over its quota, a payment checks its card without hashing it.
	merchantID string
	card       card.Number
}

// CardDeclines is the card pan as the merchant's declines count it: by its keyed fingerprint,
// HMAC-SHA256 under the limiter's server secret, so that no counter holds a card number or a hash
// anyone could recompute from one. Cards are counted per merchant: one merchant's declines must not
// refuse a card at another (nor let one merchant block a card everywhere).
func (l *Limiter) CardDeclines(merchantID string, pan card.Number) Subject {
	return Subject{policy: cardDeclines, merchantID: merchantID, card: pan}
}

// keyOf is s's key, a card's fingerprint computed now.
func (l *Limiter) keyOf(s Subject) string {
	if s.policy != cardDeclines {
		return s.key
	}
	m := l.fingerprints.Get().(hash.Hash)
	m.Reset()
	m.Write([]byte(s.card.Digits()))
	var sum [sha256.Size]byte
	m.Sum(sum[:0])
	l.fingerprints.Put(m)
	return cardDeclines.name + " " + s.merchantID + " " + hex.EncodeToString(sum[:16])
}

// CredentialDeclines is the declines of the payments that p asks for; the zero Subject for no
// principal.
func CredentialDeclines(p httpapi.Principal) Subject { return principalSubject(credentialDeclines, p) }

// Sessions is the hosted-page sessions that p (an API key acting for an account) creates.
func Sessions(p httpapi.Principal) Subject { return principalSubject(sessions, p) }

func principalSubject(of *policy, p httpapi.Principal) Subject {
	if p == (httpapi.Principal{}) {
		return Subject{}
	}
	return Subject{policy: of, key: of.name + " " + p.String()}
}

// IntentFailures is the failed confirmations of the merchant's payment intent id.
func IntentFailures(merchantID, id string) Subject {
	return Subject{policy: intentFailures, key: intentFailures.name + " " + merchantID + " " + id}
}

// Over returns the state of s's limit when s has used up its quota (lim's) in the current window, and
// nil otherwise. It reads only memory.
func (l *Limiter) Over(s Subject, lim Limits) *fault.RateLimit {
	if s.policy == nil || l.nUsed.Load() == 0 {
		return nil // nothing is over its quota on this node: the common case costs one atomic load
	}
	key := l.keyOf(s)
	l.mu.RLock()
	u, ok := l.used[key]
	l.mu.RUnlock()
	now := l.now()
	quota := s.policy.quota(lim.Effective())
	// A raised quota frees a subject at once; a lowered one applies at its next counted event.
	if !ok || !now.Before(u.until) || u.count < quota {
		return nil
	}
	return &fault.RateLimit{Policy: s.policy.name, Quota: quota, Window: s.policy.window, Reset: u.until.Sub(now)}
}

// Check returns the 429 of the first of subjects that has used up its quota, and nil when none has.
// It reads only memory: the check before a payment adds no database round trip.
func (l *Limiter) Check(lim Limits, subjects ...Subject) error {
	for _, s := range subjects {
		if rl := l.Over(s, lim); rl != nil {
			return s.policy.refuse(rl)
		}
	}
	return nil
}

// Refusal is what a decline without the processor says: the card's limit is used up.
func Refusal(rl *fault.RateLimit) string { return cardDeclines.refuse(rl).Message }

// Record counts an event that happened to each of subjects (a decline, a failed confirmation), in one
// transaction. A subject whose count reaches its quota is refused from then on until its window ends.
func (l *Limiter) Record(ctx context.Context, lim Limits, subjects ...Subject) error {
	now := l.now()
	keys := make([]string, len(subjects))
	counts := make([]counted, len(subjects))
	err := l.db.Write(ctx, func(tx *store.Tx) error {
		for i, s := range subjects {
			if s.policy == nil {
				continue
			}
			keys[i] = l.keyOf(s)
			if err := tx.QueryRowContext(ctx, countSQL, keys[i], now.Add(s.policy.window).UnixMilli(), now.UnixMilli()).
				Scan(&counts[i].n, &counts[i].end); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, s := range subjects {
		if s.policy != nil {
			l.note(s, keys[i], lim, counts[i])
		}
	}
	return nil
}

// Take counts an event about to happen to s (a session to create) and refuses it, with a 429, when it
// would exceed s's quota: the count comes first, so that no two nodes both let the last one through.
func (l *Limiter) Take(ctx context.Context, s Subject, lim Limits) error {
	if err := l.Check(lim, s); err != nil {
		return err
	}
	now := l.now()
	var c counted
	key := l.keyOf(s)
	if err := l.db.QueryRow(ctx, []any{&c.n, &c.end}, countSQL, key, now.Add(s.policy.window).UnixMilli(), now.UnixMilli()); err != nil {
		return err
	}
	l.note(s, key, lim, c)
	if quota := s.policy.quota(lim.Effective()); c.n > quota {
		return s.policy.refuse(&fault.RateLimit{Policy: s.policy.name, Quota: quota, Window: s.policy.window,
			Reset: time.UnixMilli(c.end).Sub(now)})
	}
	return nil
}

// countSQL counts one event of a subject ($1) in one conditional upsert, and returns the count of its
// current window and when that window ends: a window that has ended ($3 is now) starts afresh, ending
// at $2. Concurrent upserts of one row wait for each other's row lock, so each gets its own count.
const countSQL = `INSERT INTO velocity_counters (subject, hits, window_end) VALUES ($1, 1, $2)
	ON CONFLICT (subject) DO UPDATE SET
		hits = CASE WHEN velocity_counters.window_end <= $3 THEN 1 ELSE velocity_counters.hits + 1 END,
		window_end = CASE WHEN velocity_counters.window_end <= $3 THEN $2 ELSE velocity_counters.window_end END
	RETURNING hits, window_end`

// counted is what countSQL returns.
type counted struct {
	n   int
	end int64 // epoch milliseconds
}

// note remembers s, whose key is key, as used up when its count c reached its quota.
func (l *Limiter) note(s Subject, key string, lim Limits, c counted) {
	if c.n < s.policy.quota(lim.Effective()) {
		return
	}
	l.mu.Lock()
	l.used[key] = usedUp{count: c.n, until: time.UnixMilli(c.end)}
	l.nUsed.Store(int64(len(l.used)))
	l.mu.Unlock()
}

// Sweep forgets what has expired: subjects whose window has ended, idle request buckets, and counter
// rows of ended windows.
func (l *Limiter) Sweep(ctx context.Context) error {
	now := l.now()
	l.mu.Lock()
	for k, u := range l.used {
		if !now.Before(u.until) {
			delete(l.used, k)
		}
	}
	l.nUsed.Store(int64(len(l.used)))
	l.mu.Unlock()
	l.sweepBuckets(now)
	_, err := l.db.Exec(ctx, `DELETE FROM velocity_counters WHERE window_end <= $1`, now.UnixMilli())
	return err
}

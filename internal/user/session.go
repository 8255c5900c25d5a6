package user

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// The limits of a dashboard session: it ends after 30 minutes unused, and 12 hours after sign-in
// whatever its use.
const (
	IdleTimeout     = 30 * time.Minute
	AbsoluteTimeout = 12 * time.Hour
	// LastSeenEvery is how often a session in use has its last-seen time written: the idle limit is
	// kept in memory, and the database learns of activity at most this late.
	LastSeenEvery = time.Minute
	// DefaultSessionPoll is how often a node reads which sessions changed elsewhere.
	DefaultSessionPoll = 5 * time.Second
	// pollOverlap is how far back each poll reads before the previous one began: it covers the clocks
	// of nodes that disagree by up to this much and changes committed after the time they carry.
	pollOverlap = 30 * time.Second
	// maxStored bounds the address and user agent kept with a session.
	maxStored = 255
)

// Session is a signed-in user's dashboard session.
type Session struct {
	UserID, MerchantID, Email string
	Role                      Role
	// Merchants are the ids of the merchants whose staff the person is, this session's among them:
	// those it may switch the session to.
	Merchants []string
	CreatedAt time.Time
	// CSRF is the anti-forgery token of the session's forms: derived from the cookie's secret, which
	// only the HttpOnly cookie carries, so that another site can neither read nor guess it.
	CSRF string
}

// SessionConfig configures Sessions.
type SessionConfig struct {
	DB     *store.DB
	Logger *slog.Logger
	Now    func() time.Time
	// Poll is how often sessions ended or changed on other nodes are read (default DefaultSessionPoll).
	Poll time.Duration
}

// Sessions keeps dashboard sessions: stored in the database, and served from this node's memory once
// read, as bearer tokens are checked against revocations held in memory: a page view costs at most
// one session check, and that check does not hit the database. A session ended on this
// node is dropped from its memory at once; one ended, or whose user's role changed, on another node is
// dropped at this node's next poll, which reads the sessions changed since (docs/design/auth.md,
// "Dashboard sessions").
type Sessions struct {
	db   *store.DB
	log  *slog.Logger
	now  func() time.Time
	poll time.Duration

	mu       sync.RWMutex
	cache    map[[32]byte]*entry
	lastPoll time.Time

	loads atomic.Int64 // sessions read from the database, for tests
}

// entry is a session held in memory.
type entry struct {
	sess     Session
	lastSeen atomic.Int64 // epoch ms of the last request seen on this node
	written  atomic.Int64 // epoch ms of the last-seen time last written
}

// NewSessions returns an empty Sessions.
func NewSessions(cfg SessionConfig) *Sessions {
	s := &Sessions{db: cfg.DB, log: cfg.Logger, now: cfg.Now, poll: cfg.Poll, cache: map[[32]byte]*entry{}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.poll <= 0 {
		s.poll = DefaultSessionPoll
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.lastPoll = s.now()
	return s
}

// Poll is the interval of the session poll.
func (s *Sessions) Poll() time.Duration { return s.poll }

// Start begins a session for u, signed in from addr with userAgent, and returns the cookie's value.
func (s *Sessions) Start(ctx context.Context, u User, addr, userAgent string) (string, Session, error) {
	cookie := rand.Text() // 130 random bits
	now := s.now()
	id := sessionHash(cookie)
	_, err := s.db.Exec(ctx, `INSERT INTO dashboard_sessions (id_hash, user_id, merchant_id, created_at, last_seen, addr, user_agent, changed_at)
		VALUES ($1, $2, $3, $4, $4, $5, $6, $4)`, id[:], u.ID, u.MerchantID, now.UnixMilli(), storable(addr), storable(userAgent))
	if err != nil {
		return "", Session{}, err
	}
	e := &entry{sess: Session{UserID: u.ID, MerchantID: u.MerchantID, Email: u.Email, Role: u.Role, CreatedAt: now, CSRF: csrfToken(cookie)}}
	err = s.db.Read(ctx, func(q store.Querier) error {
		var err error
		e.sess.Merchants, err = s.merchantsOf(ctx, q, u.ID)
		return err
	})
	if err != nil {
		return "", Session{}, err
	}
	e.lastSeen.Store(now.UnixMilli())
	e.written.Store(now.UnixMilli())
	s.mu.Lock()
	s.cache[id] = e
	s.mu.Unlock()
	return cookie, e.sess, nil
}

// Switch moves the session of a cookie's value to u's merchant (a person on the staff of several),
// in the caller's transaction: the session keeps its age and its limits. Once the transaction has
// committed, Forget the person on this node; the others read the session again within the poll.
func (s *Sessions) Switch(ctx context.Context, tx store.Querier, cookie string, u User) error {
	id := sessionHash(cookie)
	r, err := tx.ExecContext(ctx, `UPDATE dashboard_sessions SET merchant_id = $2, changed_at = $3 WHERE id_hash = $1 AND user_id = $4
		AND ended_at IS NULL`, id[:], u.MerchantID, s.now().UnixMilli(), u.ID)
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return cmpErr(err, ErrNotFound)
	}
	return nil
}

// merchantsOf reads the ids of the merchants whose staff person id is.
func (s *Sessions) merchantsOf(ctx context.Context, q store.Querier, id string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT merchant_id FROM memberships WHERE user_id = $1 AND accepted_at IS NOT NULL ORDER BY merchant_id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Open returns the session of a cookie's value, false when there is none: unknown, ended, idle for
// IdleTimeout, or older than AbsoluteTimeout. A session this node holds is checked in memory; the
// database is read when the node does not hold it, and when it looks idle here (the user may have
// been active on another node).
func (s *Sessions) Open(ctx context.Context, cookie string) (Session, bool, error) {
	id := sessionHash(cookie)
	now := s.now()
	s.mu.RLock()
	e := s.cache[id]
	s.mu.RUnlock()
	if e != nil && now.Sub(e.sess.CreatedAt) < AbsoluteTimeout && now.Sub(time.UnixMilli(e.lastSeen.Load())) < IdleTimeout {
		return e.sess, true, s.touch(ctx, id, e, now)
	}
	e, err := s.load(ctx, id, cookie, now)
	if e == nil || err != nil {
		return Session{}, false, err
	}
	return e.sess, true, s.touch(ctx, id, e, now)
}

// load reads a session from the database into memory; nil when it has ended or expired, in which
// case it is ended in the database too.
func (s *Sessions) load(ctx context.Context, id [32]byte, cookie string, now time.Time) (*entry, error) {
	s.loads.Add(1)
	e := &entry{sess: Session{CSRF: csrfToken(cookie)}}
	var created, lastSeen int64
	var ended sql.NullInt64
	err := s.db.Read(ctx, func(q store.Querier) error {
		// A session is of one person at one merchant: without the membership (removed, or never
		// accepted) there is no session.
		err := q.QueryRowContext(ctx, `SELECT s.user_id, s.merchant_id, s.created_at, s.last_seen, s.ended_at, u.email, m.role
			FROM dashboard_sessions s JOIN users u ON u.id = s.user_id
			JOIN memberships m ON m.user_id = s.user_id AND m.merchant_id = s.merchant_id AND m.accepted_at IS NOT NULL
			WHERE s.id_hash = $1`, id[:]).
			Scan(&e.sess.UserID, &e.sess.MerchantID, &created, &lastSeen, &ended, &e.sess.Email, &e.sess.Role)
		if err == nil {
			e.sess.Merchants, err = s.merchantsOf(ctx, q, e.sess.UserID)
		}
		return err
	})
	s.forget(id)
	switch {
	case errors.Is(err, sql.ErrNoRows) || ended.Valid:
		return nil, nil
	case err != nil:
		return nil, err
	}
	e.sess.CreatedAt = time.UnixMilli(created)
	if now.Sub(e.sess.CreatedAt) >= AbsoluteTimeout || now.Sub(time.UnixMilli(lastSeen)) >= IdleTimeout {
		return nil, s.end(ctx, id, now)
	}
	e.lastSeen.Store(lastSeen)
	e.written.Store(lastSeen)
	s.mu.Lock()
	s.cache[id] = e
	s.mu.Unlock()
	return e, nil
}

// touch records a request on the session: in memory, and in the database once LastSeenEvery has
// passed since the last write.
func (s *Sessions) touch(ctx context.Context, id [32]byte, e *entry, now time.Time) error {
	ms := now.UnixMilli()
	e.lastSeen.Store(ms)
	w := e.written.Load()
	if ms-w < LastSeenEvery.Milliseconds() || !e.written.CompareAndSwap(w, ms) {
		return nil
	}
	_, err := s.db.Exec(ctx, `UPDATE dashboard_sessions SET last_seen = $2 WHERE id_hash = $1 AND last_seen < $2`, id[:], ms)
	return err
}

// End ends the session of a cookie's value (a sign-out): at once on this node, within the poll on
// the others.
func (s *Sessions) End(ctx context.Context, cookie string) error {
	id := sessionHash(cookie)
	s.forget(id)
	return s.end(ctx, id, s.now())
}

func (s *Sessions) end(ctx context.Context, id [32]byte, now time.Time) error {
	_, err := s.db.Exec(ctx, `UPDATE dashboard_sessions SET ended_at = $2, changed_at = $2 WHERE id_hash = $1 AND ended_at IS NULL`,
		id[:], now.UnixMilli())
	return err
}

// Forget drops what this node holds of a user's sessions, after a change made on this node (its
// password, its role, its removal): the next request reads them again.
func (s *Sessions) Forget(userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.cache {
		if e.sess.UserID == userID {
			delete(s.cache, id)
		}
	}
}

func (s *Sessions) forget(id [32]byte) {
	s.mu.Lock()
	delete(s.cache, id)
	s.mu.Unlock()
}

// Run polls until ctx is done.
func (s *Sessions) Run(ctx context.Context) {
	clock.Every(ctx, s.poll, s.log, "reload dashboard sessions", s.Reload)
}

// Reload drops from memory the sessions changed in the database since shortly before the previous
// poll (ended, or their user's role changed), and those expired; each is read again at its next
// request. Reading back an overlap makes the poll see a change whose node's clock is behind, or
// whose transaction committed after the time it records, and corrects a session that a request read
// just before its change and stored after the poll that dropped it.
func (s *Sessions) Reload(ctx context.Context) error {
	start := s.now()
	s.mu.RLock()
	since := s.lastPoll.Add(-max(pollOverlap, 2*s.poll))
	s.mu.RUnlock()
	var changed [][32]byte
	err := s.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT id_hash FROM dashboard_sessions WHERE changed_at >= $1`, since.UnixMilli())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return err
			}
			var id [32]byte
			copy(id[:], b)
			changed = append(changed, id)
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range changed {
		delete(s.cache, id)
	}
	for id, e := range s.cache {
		if start.Sub(e.sess.CreatedAt) >= AbsoluteTimeout || start.Sub(time.UnixMilli(e.lastSeen.Load())) >= IdleTimeout {
			delete(s.cache, id)
		}
	}
	s.lastPoll = start
	return nil
}

// Purge deletes sessions and links that ended or expired more than a day ago: long after every node
// has learnt of it.
func (s *Sessions) Purge(ctx context.Context) error {
	day := s.now().Add(-24 * time.Hour)
	return s.db.Write(ctx, func(tx *store.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE ended_at < $1 OR created_at < $2`,
			day.UnixMilli(), day.Add(-AbsoluteTimeout).UnixMilli()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM user_links WHERE expires_at < $1`, day.UnixMilli())
		return err
	})
}

func sessionHash(cookie string) [32]byte { return sha256.Sum256([]byte(cookie)) }

func csrfToken(cookie string) string {
	sum := sha256.Sum256([]byte("kassa dashboard csrf " + cookie))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// storable is s cut to maxStored bytes of valid UTF-8 that a database keeps as sent ("" otherwise).
func storable(s string) string {
	if len(s) > maxStored {
		s = s[:maxStored]
	}
	s = strings.ToValidUTF8(s, "")
	if !httpapi.Storable(s) {
		return ""
	}
	return s
}

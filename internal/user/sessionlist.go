package user

import (
	"context"
	"encoding/hex"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// ActiveSession is one of a user's sessions as the account page lists it, where the user sees its
// active sessions and ends them. Handle names it in a form: the hex of the stored hash of its cookie,
// which opens nothing.
type ActiveSession struct {
	Handle              string
	CreatedAt, LastSeen time.Time // LastSeen to the minute (LastSeenEvery)
	Addr, UserAgent     string
	Current             bool // the session of the request that asks
}

// HandleOf is the handle of the session of a cookie's value.
func HandleOf(cookie string) string {
	id := sessionHash(cookie)
	return hex.EncodeToString(id[:])
}

// List returns the user's sessions that have not ended or expired, newest first, marking the one of
// the cookie current.
func (s *Sessions) List(ctx context.Context, userID, cookie string) ([]ActiveSession, error) {
	now := s.now()
	cur := HandleOf(cookie)
	var out []ActiveSession
	err := s.db.Read(ctx, func(q store.Querier) error {
		out = nil
		rows, err := q.QueryContext(ctx, `SELECT id_hash, created_at, last_seen, addr, user_agent FROM dashboard_sessions
			WHERE user_id = $1 AND ended_at IS NULL AND created_at > $2 AND last_seen > $3 ORDER BY created_at DESC`,
			userID, now.Add(-AbsoluteTimeout).UnixMilli(), now.Add(-IdleTimeout-LastSeenEvery).UnixMilli())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id []byte
			var created, seen int64
			var a ActiveSession
			if err := rows.Scan(&id, &created, &seen, &a.Addr, &a.UserAgent); err != nil {
				return err
			}
			a.Handle, a.CreatedAt, a.LastSeen = hex.EncodeToString(id), time.UnixMilli(created), time.UnixMilli(seen)
			a.Current = a.Handle == cur
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}

// EndHandle ends the user's session named by handle (ActiveSession.Handle): at once on this node,
// within the poll on the others. Another user's session, or none, is ErrNotFound.
func (s *Sessions) EndHandle(ctx context.Context, userID, handle string) error {
	var id [32]byte
	b, err := hex.DecodeString(handle)
	if err != nil || len(b) != len(id) {
		return ErrNotFound
	}
	copy(id[:], b)
	now := s.now()
	r, err := s.db.Exec(ctx, `UPDATE dashboard_sessions SET ended_at = $3, changed_at = $3 WHERE id_hash = $1 AND user_id = $2 AND ended_at IS NULL`,
		id[:], userID, now.UnixMilli())
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	s.forget(id)
	return nil
}

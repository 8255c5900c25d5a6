package httpapi

import (
	"encoding/base64"
	"net/url"
	"strconv"

	"github.com/kassapay/kassa/internal/fault"
)

// EncodeCursor makes the opaque paging cursor of a position in a list ordered by id.
func EncodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("t" + strconv.FormatInt(id, 10)))
}

// DecodeCursor reads a cursor made by EncodeCursor.
func DecodeCursor(s string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || b[0] != 't' {
		return 0, false
	}
	id, err := strconv.ParseInt(string(b[1:]), 10, 64)
	return id, err == nil && id > 0
}

// PageParams reads a list's paging parameters: limit (1 to max, def when absent), and the before and
// after cursors. Each bad one is a 400 naming it.
func PageParams(q url.Values, def, max int) (limit int, before, after int64, err error) {
	limit = def
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > max {
			return 0, 0, 0, fault.Invalid("limit", "limit must be a whole number from 1 to %d", max)
		}
		limit = n
	}
	for _, c := range []struct {
		name string
		dst  *int64
	}{{"before", &before}, {"after", &after}} {
		if v := q.Get(c.name); v != "" {
			id, ok := DecodeCursor(v)
			if !ok {
				return 0, 0, 0, fault.Invalid(c.name, "%s must be a cursor from this list's paging", c.name)
			}
			*c.dst = id
		}
	}
	return limit, before, after, nil
}

// Page is the list envelope of the gateway API: {"entities": [...], "paging": {"cursors": {"before",
// "after"}}} (wire-contract.md, Transactions).
type Page[T any] struct {
	Entities []T `json:"entities"`
	Paging   struct {
		Cursors struct {
			Before string `json:"before,omitempty"`
			After  string `json:"after,omitempty"`
		} `json:"cursors"`
	} `json:"paging"`
}

// SetCursors sets the cursors of a page from the ids of its first (newest) and last (oldest) entity.
func (p *Page[T]) SetCursors(first, last int64) {
	p.Paging.Cursors.Before, p.Paging.Cursors.After = EncodeCursor(first), EncodeCursor(last)
}

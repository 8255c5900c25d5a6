package dashboard

import (
	"net/url"
	"strconv"

	"github.com/kassapay/kassa/internal/fault"
)

// pageSize is how many rows a page of the billing and payments lists shows.
const pageSize = 25

// pager links a list page to its neighbours, newest first: relative URLs ("?…"), "" when there is none.
// The cursor after asks for the rows older than a row, before for those newer than one.
type pager struct {
	Newer, Older string
}

// cursors reads a list's after and before cursors (row ids, or the ids its objects are known by).
type cursors struct {
	After, Before string
}

func cursorsOf(q url.Values) cursors { return cursors{After: q.Get("after"), Before: q.Get("before")} }

// rowIDs reads cursors that are row ids; 0 for none. One that is not is a 400 naming it.
func (c cursors) rowIDs() (after, before int64, err error) {
	read := func(name, s string) int64 {
		id, perr := strconv.ParseInt(s, 10, 64)
		if s != "" && (perr != nil || id <= 0) && err == nil {
			err = badPage(name)
		}
		return id
	}
	after, before = read("after", c.After), read("before", c.Before)
	return after, before, err
}

// badPage is the refusal of a list's page cursor (after or before) that no page of the list gave.
func badPage(name string) error {
	return fault.Invalid(name, "The page asked for is not one of this list's pages.")
}

// trimPage keeps a page of at most pageSize of rows read one beyond it (newest first), and reports
// whether there were more beyond it: older ones, or newer ones for a page read with before.
func trimPage[T any](rows []T, c cursors) ([]T, bool) {
	if len(rows) <= pageSize {
		return rows, false
	}
	if c.Before != "" {
		return rows[len(rows)-pageSize:], true
	}
	return rows[:pageSize], true
}

// links are the pager of a page whose rows run from newest to oldest (their cursors), read with c,
// of q's filter; more says whether trimPage found more beyond it.
func (c cursors) links(q url.Values, newest, oldest string, more bool) pager {
	var p pager
	if newest == "" {
		return p
	}
	at := func(key, value string) string {
		v := url.Values{}
		for k, vs := range q {
			if k != "after" && k != "before" {
				v[k] = vs
			}
		}
		v.Set(key, value)
		return "?" + v.Encode()
	}
	if c.Before != "" || more {
		p.Older = at("after", oldest)
	}
	if c.After != "" || c.Before != "" && more {
		p.Newer = at("before", newest)
	}
	return p
}

package vault

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/store"
)

// prefixKey is the lowered text of a customer's column as the prefix search compares it, by dialect:
// in byte order, so that the names that begin with a prefix are one range of the index, [prefix,
// prefixEnd(prefix)). SQLite compares text so already (BINARY) and finds it on migration 29's
// indexes; PostgreSQL compares by the database's collation, in which the names that begin with "a-"
// need not be one range, so its key is the lowered text in the "C" collation, indexed by migration
// 70.
func prefixKey(dialect store.Dialect, col string) string {
	if dialect == store.Postgres {
		return `(LOWER(` + col + `) COLLATE "C")`
	}
	return `LOWER(` + col + `)`
}

// prefixEnd is the least text above every text that begins with p, in byte order (which is UTF-8's
// code point order): p with its last character advanced by one. ok is false when there is none (p is
// all U+10FFFF), and the range has no upper bound.
func prefixEnd(p string) (end string, ok bool) {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF: // the next code points are surrogates, which UTF-8 does not encode
			return p + "\uE000", true
		}
		return p + string(r+1), true
	}
	return "", false
}

// prefixQuery is the statement that reads, in the order of col's key, at most limit of the merchant's
// customers whose col begins with prefix, lowered; and the customers whose first name is first as
// well, when first is not "". Each reads one range of one index and stops at limit, however many
// customers the merchant has.
func prefixQuery(dialect store.Dialect, merchantID, col, prefix, first string, limit int) (string, []any) {
	key := prefixKey(dialect, col)
	args := []any{merchantID, prefix}
	where := "merchant_id = $1 AND " + key + " >= $2"
	if end, ok := prefixEnd(prefix); ok {
		args = append(args, end)
		where += " AND " + key + " < $" + strconv.Itoa(len(args))
	}
	if first != "" {
		args = append(args, first)
		where += " AND LOWER(first_name) = $" + strconv.Itoa(len(args))
	}
	args = append(args, limit)
	return `SELECT ` + customerColumns + ` FROM customers WHERE ` + where + ` ORDER BY ` + key + `, id LIMIT $` + strconv.Itoa(len(args)), args
}

// SearchCustomers returns at most limit of the merchant's customers found by the dashboard's search
// box, by name, and whether there are more. A single word q finds the customers whose e-mail, first
// name or last name begins with it, whatever its case ("jan" finds Jane and jan@example.com); several
// words, those whose first name is the first word and whose last name begins with the rest ("jane
// ro" finds Jane Roe). A prefix, never a text found inside a name: each match is one range of an
// index, read up to limit, so a search takes as long at 1,000,000 customers as at 100. The customers
// are in the order of their names, without their cards.
func (s *Service) SearchCustomers(ctx context.Context, merchantID, q string, limit int) ([]Customer, bool, error) {
	words := strings.Fields(strings.ToLower(q))
	if len(words) == 0 || limit <= 0 {
		return nil, false, nil
	}
	type read struct{ col, prefix, first string }
	reads := []read{{"email", words[0], ""}, {"first_name", words[0], ""}, {"last_name", words[0], ""}}
	if len(words) > 1 {
		reads = []read{{"last_name", strings.Join(words[1:], " "), words[0]}}
	}
	var out []Customer
	more := false
	seen := map[int64]bool{}
	err := s.db.Read(ctx, func(sq store.Querier) error {
		for _, rd := range reads {
			stmt, args := prefixQuery(s.db.Dialect(), merchantID, rd.col, rd.prefix, rd.first, limit+1)
			rows, err := sq.QueryContext(ctx, stmt, args...)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				c, err := scanCustomer(rows)
				if err != nil {
					rows.Close()
					return err
				}
				if n++; n > limit {
					more = true
					break
				}
				if !seen[c.ID] {
					seen[c.ID] = true
					out = append(out, c)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	slices.SortFunc(out, func(a, b Customer) int {
		return cmp.Or(cmp.Compare(strings.ToLower(sortName(a)), strings.ToLower(sortName(b))), cmp.Compare(a.ID, b.ID))
	})
	if len(out) > limit {
		out, more = out[:limit], true
	}
	return out, more, nil
}

// sortName is what a customer is sorted by among search results: its name, else its e-mail.
func sortName(c Customer) string {
	if n := strings.TrimSpace(c.FirstName + " " + c.LastName); n != "" {
		return n
	}
	return c.Email
}

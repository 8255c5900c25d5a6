package vault

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The search box's customers: a prefix of an e-mail, a first or a last name, whatever its case, or a
// first name and the beginning of a last name, finds exactly the merchant's customers that begin so —
// never another merchant's — at most limit of them in the order of their names, saying whether there
// are more; each read is a range of an index (migration 29 on SQLite, 70 on PostgreSQL), never the
// merchant's every customer, on SQLite and on PostgreSQL.
func TestSearchCustomersByPrefix(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var m, other merchant.Merchant
		err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			if m, err = merchant.Create(ctx, tx, merchant.New{Name: "Searched", Email: "s@example.com"}, time.Now()); err != nil {
				return err
			}
			if other, err = merchant.Create(ctx, tx, merchant.New{Name: "Other", Email: "o@example.com"}, time.Now()); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
				INSERT INTO customers (lookup_id, merchant_id, email, first_name, last_name, created_at, updated_at)
				SELECT 'P' || i, $1, 'buyer' || i || '@example.com', 'Given' || i, 'Family' || i, 0, 0 FROM n`, m.ID); err != nil {
				return err
			}
			// Names a collation could sort apart from their prefix's range, and another merchant's twin.
			_, err = tx.ExecContext(ctx, `INSERT INTO customers (lookup_id, merchant_id, email, first_name, last_name, created_at, updated_at) VALUES
				('PJANE', $1, 'Jane.Roe@Example.com', 'Jane', 'Roe', 0, 0),
				('PJANA', $1, 'jana@example.com', 'Jana', 'Ro-Smith', 0, 0),
				('PDASH', $1, 'a-b@example.com', 'A-b', 'Dash', 0, 0),
				('PABC', $1, 'abc@example.com', 'Abc', 'Plain', 0, 0),
				('OJANE', $2, 'jane.roe@example.com', 'Jane', 'Roe', 0, 0)`, m.ID, other.ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Raw().ExecContext(ctx, "ANALYZE"); err != nil {
			t.Fatal(err)
		}
		s := &Service{db: db}
		for _, tc := range []struct {
			q    string
			want []string
		}{
			{"JAN", []string{"PJANA", "PJANE"}}, // e-mail and first name, sorted by name
			{"jane.roe@", []string{"PJANE"}},    // an e-mail's beginning, any case
			{"roe", []string{"PJANE"}},          // a last name
			{"ro", []string{"PJANA", "PJANE"}},  // a last name's beginning
			{"jana ro-", []string{"PJANA"}},     // a first name and the beginning of the last
			{"jane  ro", []string{"PJANE"}},     // words, however spaced
			{"a-", []string{"PDASH"}},           // punctuation counts, in byte order
			{"given2999", []string{"P2999"}},    // one of thousands
			{"nobody", nil},                     // none
			{"OJANE", nil},                      // not an id: a prefix of no name
			{"given29999", nil},                 // longer than any
			{string(utf8.MaxRune), nil},         // no upper bound to the range
			{"z" + string(rune(0xD7FF)), nil},   // the code point below the surrogates
		} {
			got, more, err := s.SearchCustomers(ctx, m.ID, tc.q, 10)
			if err != nil {
				t.Fatalf("%q: %v", tc.q, err)
			}
			var ids []string
			for _, c := range got {
				ids = append(ids, c.LookupID)
			}
			if strings.Join(ids, ",") != strings.Join(tc.want, ",") || more {
				t.Errorf("search %q found %v (more %v), want %v", tc.q, ids, more, tc.want)
			}
		}
		// Thousands begin with "given": a page of them, in order, and more.
		got, more, err := s.SearchCustomers(ctx, m.ID, "Given", 10)
		if err != nil || len(got) != 10 || !more || got[0].LookupID != "P1" || got[1].LookupID != "P10" {
			t.Errorf("search \"Given\": %d customers from %v, more %v, %v", len(got), got[0].LookupID, more, err)
		}
		// Another merchant's customers are not found by its own name.
		if got, _, err := s.SearchCustomers(ctx, other.ID, "given", 10); err != nil || len(got) != 0 {
			t.Errorf("another merchant's search found %d of this one's customers (%v)", len(got), err)
		}
		for _, col := range []string{"email", "first_name", "last_name"} {
			stmt, args := prefixQuery(db.Dialect(), m.ID, col, "given1", "", 11)
			p := storetest.Plan(t, db, stmt, args...)
			if !strings.Contains(p, "customers_"+col) || storetest.FullScan(p, "customers") || merchantRange.MatchString(p) ||
				strings.Contains(p, "TEMP B-TREE") || strings.Contains(p, "Sort") {
				t.Errorf("the prefix search by %s does not read one range of its index in order:\n%s", col, p)
			}
		}
	})
}

// prefixEnd is above every text that begins with p and at most every text above them: a text begins
// with p exactly when it is in [p, prefixEnd(p)).
func FuzzPrefixEnd(f *testing.F) {
	for _, s := range []string{"a", "jane", "a-", string(utf8.MaxRune), "x" + string(rune(0xD7FF)), "é", "\x7f"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, p, rest string) {
		if !utf8.ValidString(p) || !utf8.ValidString(rest) || p == "" {
			return
		}
		end, ok := prefixEnd(p)
		if !ok {
			if strings.Trim(p, string(utf8.MaxRune)) != "" {
				t.Fatalf("prefixEnd(%q) has no end", p)
			}
			return
		}
		if !utf8.ValidString(end) {
			t.Fatalf("prefixEnd(%q) = %q, not UTF-8", p, end)
		}
		if s := p + rest; s >= end {
			t.Fatalf("%q begins with %q but is not below %q", s, p, end)
		}
		if rest != "" && rest < end && rest >= p && !strings.HasPrefix(rest, p) {
			t.Fatalf("%q is in [%q, %q) but does not begin with %q", rest, p, end, p)
		}
	})
}

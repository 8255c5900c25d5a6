package storetest

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store"
)

// RawData is everything the database holds, as bytes: the SQLite files (database, write-ahead log,
// shared memory), free pages included, or every row of every PostgreSQL table as text (bytea as bytes,
// see below).
// A secret that a test finds in it is stored in clear.
func RawData(t testing.TB, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	if db.Dialect() == store.SQLite {
		path := strings.TrimPrefix(db.String(), "sqlite: ")
		var b strings.Builder
		files, _ := filepath.Glob(path + "*")
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
		if b.Len() == 0 {
			t.Fatalf("no database files at %s", path)
		}
		return b.String()
	}
	// bytea is rendered in PostgreSQL's escape format, as bytes: printable ones as themselves, the others
	// as octal escapes. In the default hex format a sealed blob reads as hex digits, among which any
	// short run of decimal digits — a CVV — turns up by chance once the data is a few hundred kilobytes.
	tx, err := db.Raw().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL bytea_output = 'escape'`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	var b strings.Builder
	for _, table := range tables {
		rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT t::text FROM %q t`, table))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var row string
			rows.Scan(&row)
			b.WriteString(row)
			b.WriteByte('\n')
		}
		rows.Close()
	}
	return b.String()
}

// NotStored fails t for each secret that data (RawData) holds in clear: as it is, in hex, or in
// base64 with or without padding or URL-safe. secrets maps a description of each secret, which must
// not give it away, to the secret.
//
// A secret of at most four decimal digits (a CVV) counts as itself only where it stands alone, not
// inside a longer run of digits: a millisecond timestamp or an amount holds any four digits sooner or
// later, and that is another number, not the CVV.
func NotStored(t testing.TB, data string, secrets map[string]string) {
	t.Helper()
	for what, secret := range secrets {
		for name, enc := range map[string]string{"as it is": secret, "in hex": hex.EncodeToString([]byte(secret)),
			"in base64": base64.StdEncoding.EncodeToString([]byte(secret)), "in base64url": base64.RawURLEncoding.EncodeToString([]byte(secret))} {
			found := strings.Contains(data, enc)
			if found && enc == secret && len(secret) <= 4 && allDigits(secret) {
				found = standsAlone(data, secret)
			}
			if found {
				t.Errorf("%s is in the database %s", what, name)
			}
		}
	}
}

// standsAlone reports whether digits occur in data with no decimal digit on either side.
func standsAlone(data, digits string) bool {
	for i := 0; ; {
		j := strings.Index(data[i:], digits)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(digits)
		if (at == 0 || !isDigit(data[at-1])) && (end == len(data) || !isDigit(data[end])) {
			return true
		}
		i = at + 1
	}
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

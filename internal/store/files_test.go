package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The SQLite data directory is 0700 and every file of the database in it 0600 — kassa.db, its -wal and
// -shm, the lock files — whatever the umask of the process that opens it: 022, the usual one, and 000,
// under which every file is as open as its creator asks. It changes the umask of the test process, so
// it runs alone (not in parallel).
func TestDataDirectoryIsPrivate(t *testing.T) {
	ctx := context.Background()
	for _, umask := range []int{0o022, 0o000} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			defer syscall.Umask(syscall.Umask(umask))
			dir := filepath.Join(t.TempDir(), "new", "kassa-data")
			db, err := store.Open(ctx, store.Config{DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			release, err := db.ClaimServer()
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			mustExec(t, db, `INSERT INTO outbox (merchant_id, to_addr, subject, text_body, html_body, next_attempt, created_at) VALUES ('m', 'a@example.com', '', '', '', 1, 1)`)
			storetest.WantPrivate(t, dir, store.SQLiteFile, store.SQLiteFile+"-wal", store.SQLiteFile+"-shm", "kassa.migrate.lock", "kassa.serve.lock")
		})
	}
}

// A data directory that an earlier Kassa left open to every local user, as the umask 022 made it
// (0755, its database 0644), is closed when the database is opened, and Note is told of each change.
func TestOpenDataDirectoryIsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "kassa-data")
	path := filepath.Join(dir, store.SQLiteFile)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", "file:"+path)
	if err == nil {
		_, err = old.Exec(`CREATE TABLE t (x)`)
	}
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	for name, mode := range map[string]fs.FileMode{dir: 0o755, path: 0o644} {
		if err := os.Chmod(name, mode); err != nil {
			t.Fatal(err)
		}
	}
	var notes []string
	db, err := store.Open(ctx, store.Config{DataDir: dir, Note: func(msg string, args ...any) {
		notes = append(notes, fmt.Sprintln(append([]any{msg}, args...)...))
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.WantPrivate(t, dir, store.SQLiteFile)
	all := strings.Join(notes, "\n")
	for _, want := range []string{"path " + dir + " mode_was 0755 mode 0700", "path " + path + " mode_was 0644 mode 0600"} {
		if !strings.Contains(all, want) {
			t.Errorf("the notes lack %q:\n%s", want, all)
		}
	}
}

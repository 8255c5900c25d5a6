package backup_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kassapay/kassa/internal/backup"
	"github.com/kassapay/kassa/internal/store"
)

// A restored copy's ISO 8583 number series move on, as after a promotion of PostgreSQL: the acquirer
// has seen the STANs and RRNs handed out since the backup was made, and refuses a STAN reused the
// same day. The backup itself is left as it was.
func TestRestoreMovesTheNumberSeriesOn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO iso8583_series (name, reserved) VALUES ('stan ACQ1 TERM0001', 2001), ('rrn ACQ1', 3001)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	copyPath := filepath.Join(t.TempDir(), "kassa.db")
	if _, err := backup.Create(ctx, filepath.Join(dir, store.SQLiteFile), copyPath); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(t.TempDir(), "data")
	if _, err := backup.Restore(ctx, copyPath, restored, nil); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][2]int64{
		restored: {2001 + 250_000, 3001 + 1_000_000_000},
		copyPath: {2001, 3001},
	} {
		cfg := store.Config{DataDir: path}
		if path == copyPath {
			cfg = store.Config{DataDir: filepath.Dir(path)}
		}
		db, err := store.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var stan, rrn int64
		err = db.QueryRow(ctx, []any{&stan, &rrn}, `SELECT
			(SELECT reserved FROM iso8583_series WHERE name = 'stan ACQ1 TERM0001'), (SELECT reserved FROM iso8583_series WHERE name = 'rrn ACQ1')`)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if stan != want[0] || rrn != want[1] {
			t.Errorf("%s: STAN series at %d, RRN series at %d; want %d, %d", path, stan, rrn, want[0], want[1])
		}
	}
}

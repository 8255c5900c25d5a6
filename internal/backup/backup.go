// Package backup copies the embedded SQLite database while the server runs, and puts such a copy in
// place as the database of a new data directory.
//
// A copy is kept only once it is verified: SQLite's PRAGMA integrity_check answers "ok", it holds the
// schema Kassa's migrations make, and, on restore, the key-encryption key opens every data key in
// it, so that the stored cards it holds can be decrypted. A failed backup leaves the previous file
// of that name as it was, and a failed restore leaves no database behind. PostgreSQL databases are
// backed up with PostgreSQL's own tools, not here.
package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/private"
	"github.com/kassapay/kassa/internal/processor/iso8583"
	"github.com/kassapay/kassa/internal/store"
)

// Info describes a verified copy of a database.
type Info struct {
	// Path is the copy: the backup file, or the restored database.
	Path  string `json:"-"`
	Bytes int64  `json:"bytes"`
	// IntegrityCheck is what PRAGMA integrity_check answered on the copy: always "ok" (anything
	// else is an error).
	IntegrityCheck string `json:"integrity_check"`
	// SchemaVersion is the last migration the copy's database had.
	SchemaVersion int64 `json:"schema_version"`
	Transactions  int64 `json:"transactions"`
	// VaultKeyIDs name the key-encryption keys the copy's data keys are wrapped under: the key that
	// must be kept beside the backup, for it is not in it.
	VaultKeyIDs []string `json:"vault_key_ids"`
	// DataKeys is, on restore, how many data keys the key-encryption key was checked to open.
	DataKeys *int `json:"data_keys_checked,omitempty"`
}

// Create writes a consistent copy of the SQLite database at db to out, while servers keep using it.
// SQLite's VACUUM INTO copies one read transaction's snapshot, which a WAL-mode database's writers
// do not wait for. The copy is written next to out under a temporary name, verified, synced, and only
// then renamed to out, replacing a previous backup of that name. The directory of out is made when
// missing, with its missing parents, 0700 as a data directory is (a backup holds what the database
// holds); a failed backup removes what it made. A directory that exists is left as it is.
func Create(ctx context.Context, db, out string) (Info, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return Info{}, err
	}
	if err := notTheDatabase(db, out); err != nil {
		return Info{}, err
	}
	var made []string // the directories missing on the way to out, deepest first
	for dir := filepath.Dir(out); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			break // there, or not for this user to see: CreateTemp then says why
		}
		made = append(made, dir)
	}
	if made != nil {
		if _, err := private.Dir(made[0]); err != nil {
			return Info{}, fmt.Errorf("make the backup's directory: %w", err)
		}
	}
	info, err := create(ctx, db, out)
	if err != nil {
		for _, dir := range made {
			os.Remove(dir) // empty, but for what another process put there meanwhile: then kept
		}
	}
	return info, err
}

// create is Create once out's directory exists.
func create(ctx context.Context, db, out string) (Info, error) {
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".partial-*")
	if err != nil {
		return Info{}, fmt.Errorf("create the backup file: %w", err)
	}
	tmp := f.Name()
	f.Close()
	defer removeCopy(tmp) // nothing left once renamed
	// 0600 whatever the umask, as the database: it holds sealed card data, and SQLite gives the
	// journal it may make beside the copy the copy's mode.
	if _, err := private.Tighten(tmp); err != nil {
		return Info{}, err
	}

	src, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return Info{}, err
	}
	defer src.Close()
	// VACUUM INTO accepts the empty file CreateTemp made, and writes an ordinary rollback-journal
	// database: one self-contained file.
	if _, err := src.ExecContext(ctx, `VACUUM INTO $1`, tmp); err != nil {
		return Info{}, fmt.Errorf("copy %s: %w", db, err)
	}
	info, err := verify(ctx, tmp, nil)
	if err != nil {
		return Info{}, err
	}
	if err := syncFile(tmp); err != nil {
		return Info{}, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return Info{}, err
	}
	info.Path = out
	return info, syncFile(filepath.Dir(out))
}

// notTheDatabase refuses a backup written over the database itself or one of its journals.
func notTheDatabase(db, out string) error {
	target, err := os.Stat(out)
	for _, name := range []string{db, db + "-wal", db + "-shm", db + "-journal"} {
		if st, serr := os.Stat(name); out == name || (err == nil && serr == nil && os.SameFile(st, target)) {
			return fmt.Errorf("--out %s is the database itself, or one of its journals", out)
		}
	}
	return nil
}

// ErrNotEmpty is returned by Restore for a data directory that holds anything but a vault.key.
var ErrNotEmpty = errors.New("the data directory is not empty")

// vaultKeyFile is the name of the key-encryption key's file in a data directory, which a restore
// may find there: the operator puts the key back before the database.
const vaultKeyFile = "vault.key"

// Restore makes the backup from the database of dataDir, which must be empty but for a vault.key
// (it is created when missing, and made 0700 either way). The backup is copied into the directory under a temporary name,
// verified there (integrity, Kassa's schema, and that kek opens every data key), its ISO 8583 number
// series moved on past what the acquirer may have seen since the backup, synced, and only then linked
// to the database's name; on any failure nothing is left of it, nor the directory when
// Restore made it.
func Restore(ctx context.Context, from, dataDir string, kek *envelope.KEK) (info Info, err error) {
	entries, err := os.ReadDir(dataDir)
	made := errors.Is(err, os.ErrNotExist)
	if err != nil && !made {
		return Info{}, err
	}
	var others []string
	for _, e := range entries {
		if e.Name() != vaultKeyFile {
			others = append(others, e.Name())
		}
	}
	if len(others) > 0 {
		return Info{}, fmt.Errorf("%w: %s holds %s; restore only into an empty directory (a vault.key may be there)",
			ErrNotEmpty, dataDir, strings.Join(others, ", "))
	}
	if err := store.DataDir(dataDir, nil); err != nil {
		return Info{}, err
	}
	if made {
		defer func() {
			if err != nil {
				os.Remove(dataDir)
			}
		}()
	}
	dst, err := filepath.Abs(filepath.Join(dataDir, store.SQLiteFile))
	if err != nil {
		return Info{}, err
	}
	tmp, err := copyInto(from, filepath.Dir(dst))
	if err != nil {
		return Info{}, err
	}
	defer removeCopy(tmp)
	if info, err = verify(ctx, tmp, kek); err != nil {
		return Info{}, err
	}
	if err := moveSeriesOn(ctx, tmp); err != nil {
		return Info{}, err
	}
	// A link, not a rename: it fails rather than replace a database that appeared meanwhile.
	if err := os.Link(tmp, dst); err != nil {
		return Info{}, err
	}
	if err := syncFile(filepath.Dir(dst)); err != nil {
		os.Remove(dst)
		return Info{}, err
	}
	info.Path = dst
	return info, nil
}

// moveSeriesOn moves the ISO 8583 connector's number series of the database at path on
// (iso8583.RestoredSQL): the acquirer has seen the STANs and RRNs handed out since the backup, and
// refuses one reused. The change is synced before Restore links the copy.
func moveSeriesOn(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=synchronous(FULL)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, iso8583.RestoredSQL); err != nil {
		return fmt.Errorf("move the ISO 8583 number series on: %w", err)
	}
	return db.Close()
}

// copyInto copies the file from into a new file of dir, mode 0600 whatever the umask, synced, and
// returns its name.
func copyInto(from, dir string) (string, error) {
	src, err := os.Open(from)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst, err := os.CreateTemp(dir, store.SQLiteFile+".restoring-*")
	if err != nil {
		return "", err
	}
	_, err = private.Tighten(dst.Name())
	if err == nil {
		_, err = io.Copy(dst, src)
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		removeCopy(dst.Name())
		return "", fmt.Errorf("copy %s: %w", from, err)
	}
	return dst.Name(), nil
}

// verify checks the database file at path, opened read-only: PRAGMA integrity_check must answer
// "ok", the file must hold Kassa's schema, and kek (when given) must open every data key.
func verify(ctx context.Context, path string, kek *envelope.KEK) (Info, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return Info{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	info := Info{Path: path}
	if err := integrity(ctx, db, &info); err != nil {
		return Info{}, err
	}
	err = db.QueryRowContext(ctx, `SELECT MAX(version_id) FROM goose_db_version WHERE is_applied`).Scan(&info.SchemaVersion)
	if err == nil {
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM transactions`).Scan(&info.Transactions)
	}
	if err == nil {
		// The key-encryption keys the data keys are wrapped under.
		info.VaultKeyIDs, err = column(ctx, db, `SELECT DISTINCT kek_id FROM data_keys ORDER BY kek_id`)
	}
	if err != nil {
		return Info{}, fmt.Errorf("not a Kassa database: %w", err)
	}
	if kek != nil {
		n, err := envelope.CheckKEK(ctx, db, kek)
		if err != nil {
			return Info{}, fmt.Errorf("the key-encryption key does not open the backup's data keys, so its stored cards "+
				"could not be decrypted: give the key of vault_key_ids %v: %w", info.VaultKeyIDs, err)
		}
		info.DataKeys = &n
	}
	st, err := os.Stat(path)
	if err != nil {
		return Info{}, err
	}
	info.Bytes = st.Size()
	return info, nil
}

// integrity runs PRAGMA integrity_check, which answers one row "ok", or the problems it found, or
// fails outright on a file too damaged to read, or not a database at all.
func integrity(ctx context.Context, db *sql.DB, info *Info) error {
	found, err := column(ctx, db, `PRAGMA integrity_check`)
	if err == nil && (len(found) != 1 || found[0] != "ok") {
		err = errors.New(strings.Join(found, "; "))
	}
	if err != nil {
		return fmt.Errorf("PRAGMA integrity_check failed: %w", err)
	}
	info.IntegrityCheck = found[0]
	return nil
}

// column is the one column of a query's rows, as text.
func column(ctx context.Context, db *sql.DB, query string) ([]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// removeCopy removes a temporary copy and the journals SQLite may have made beside it.
func removeCopy(path string) {
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// syncFile flushes a file, or a directory's entries, to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"

	"github.com/kassapay/kassa/internal/backup"
)

// On PostgreSQL, kassa backup and restore say plainly to use PostgreSQL's own tools (pg_dump,
// pg_basebackup) rather than pretend to copy a database they cannot copy consistently.
const (
	postgresBackup = "it copies the embedded SQLite database only; back up a PostgreSQL database with " +
		"PostgreSQL's own tools: pg_dump for a logical copy, pg_basebackup with WAL archiving for point-in-time recovery"
	postgresRestore = "it puts back the embedded SQLite database only; restore a PostgreSQL database with " +
		"PostgreSQL's own tools: pg_restore (or psql) for a pg_dump, a base backup and its WAL archive for pg_basebackup"
)

// backupCommand is "kassa backup --out FILE": a consistent online copy of the SQLite database while
// the server runs, verified with PRAGMA integrity_check on the copy.
func backupCommand(flags *flag.FlagSet) func(context.Context, *env) error {
	out := flags.String("out", "", "file to write the copy to (mode 0600; its missing directory made, 0700); a previous file of that name is replaced only once the new copy is verified (required)")
	return func(ctx context.Context, e *env) error {
		if e.db.databaseURL != "" {
			return usagef(postgresBackup)
		}
		if err := required([2]string{"out", *out}); err != nil {
			return err
		}
		db, err := e.db.sqlitePath()
		if err != nil {
			return err
		}
		info, err := backup.Create(ctx, db, *out)
		if err != nil {
			return err
		}
		return printJSON(e.stdout, struct {
			Database string `json:"database"`
			Backup   string `json:"backup"`
			backup.Info
		}{db, info.Path, info})
	}
}

// restoreCommand is "kassa restore --from FILE": into an empty data directory only (a non-empty one
// is refused), the file verified first, and no partial database left on failure. The key-encryption
// key must be the backup's: a restore never generates one.
func restoreCommand(flags *flag.FlagSet) func(context.Context, *env) error {
	from := flags.String("from", "", "backup file made by kassa backup (required)")
	return func(ctx context.Context, e *env) error {
		if e.db.databaseURL != "" {
			return usagef(postgresRestore)
		}
		if err := required([2]string{"from", *from}); err != nil {
			return err
		}
		kek, err := e.db.loadKEK()
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the backup's key-encryption key is needed to restore it (its stored cards are sealed under it): "+
				"give it with --vault-key-file or KASSA_VAULT_KEY, or put it in the data directory as vault.key (%w)", err)
		}
		if err != nil {
			return err
		}
		info, err := backup.Restore(ctx, *from, e.db.dataDir, kek)
		if err != nil {
			return err
		}
		return printJSON(e.stdout, struct {
			From     string `json:"from"`
			Database string `json:"database"`
			backup.Info
		}{*from, info.Path, info})
	}
}

package main_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// umasked is the kassa command with args, run under the umask mask (octal, as the shell's umask
// takes it).
func umasked(mask string, args ...string) *exec.Cmd {
	return exec.Command("/bin/sh", append([]string{"-c", `umask ` + mask + ` && exec "$0" "$@"`, kassaBin}, args...)...)
}

// kassa serve, started under the umask 022 (the usual one) with a data directory it makes, keeps that
// directory 0700 and every file in it 0600: the database, its -wal and -shm, the generated vault.key,
// the lock files. Under the umask 000, kassa backup writes its copy 0600, and kassa restore makes the
// empty directory it restores into 0700 and the database 0600. A data directory that an earlier
// Kassa left open to other local users (0755, its database 0644) is closed at the next start, which
// logs what it changed.
func TestFilesArePrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "kassa-data")
	srv := startCommand(t, umasked("022", "serve", "--addr", "127.0.0.1:0", "--data-dir", dir), nil)
	storetest.WantPrivate(t, dir, "kassa.db", "kassa.db-wal", "kassa.db-shm", "vault.key", "kassa.serve.lock", "kassa.migrate.lock")

	backups := t.TempDir()
	out := filepath.Join(backups, "kassa.backup")
	if b, err := umasked("000", "backup", "--data-dir", dir, "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("kassa backup: %v\n%s", err, b)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the backup: %v, %v", st, err)
	}
	restored := filepath.Join(backups, "restored")
	if err := os.Mkdir(restored, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(restored, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := umasked("000", "restore", "--from", out, "--data-dir", restored, "--vault-key-file", filepath.Join(dir, "vault.key")).CombinedOutput(); err != nil {
		t.Fatalf("kassa restore: %v\n%s", err, b)
	}
	storetest.WantPrivate(t, restored, "kassa.db")

	if err := srv.stop(t); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]fs.FileMode{dir: 0o755, filepath.Join(dir, "kassa.db"): 0o644} {
		if err := os.Chmod(name, mode); err != nil {
			t.Fatal(err)
		}
	}
	again := startCommand(t, umasked("022", "serve", "--addr", "127.0.0.1:0", "--data-dir", dir), nil)
	storetest.WantPrivate(t, dir, "kassa.db")
	// The log reaches the buffer through its own pipe, which may lag the line that says the server
	// listens.
	for _, want := range []string{`"mode_was":"0755"`, `"mode_was":"0644"`} {
		eventually(t, "the log saying what was changed ("+want+")", 5*time.Second, func() bool {
			return strings.Contains(again.stderr.String(), want)
		})
	}
}
